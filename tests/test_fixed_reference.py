"""A run trained with FeatureConfig.reference = "drawn": a config's score depends on the graph and
the config alone, whatever configs a file, a pool or a caller's reference= holds."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time

import numpy as np
import pytest

import pipeline
from features import FeatureConfig
from features.graph.layout_space import LayoutSpace
from features.npz.find import list_npz
from features.schema import GRAPH_KEYS
from models.api import CostModel, GraphArrays
from models.api.cost_model import start_reference
from models.tuning.tune_graph import search_reference
from models.tuning.tuner import TuneSettings
from models.training.run_files import latest_run

from tests.conftest import QUICK_LGBM

COLLECTION = "layout:xla:default"


@pytest.fixture(scope="module")
def drawn_run(tiny_root, tmp_path_factory):
    """A one-seed run of one layout collection whose rows were set against drawn references."""
    cache = tmp_path_factory.mktemp("drawn")
    args = ["--data-dir", str(tiny_root), "--cache-dir", str(cache), "--workers", "1",
            "--collections", COLLECTION, "--feature", "reference=drawn"]
    assert pipeline.main(["train", "--ranker", "lambdarank", "--seeds", "1", *args,
                          *QUICK_LGBM]) == 0
    run, = (cache / "runs").glob("lambdarank-*")
    return run


@pytest.fixture(scope="module")
def graph(tiny_npz):
    """A valid file of the collection: its graph arrays and its configs."""
    with np.load(list_npz(tiny_npz, COLLECTION, "valid")[0]) as z:
        return {k: z[k] for k in GRAPH_KEYS}, z["node_config_feat"]


def _scores(run, graph, reference, candidates):
    arrays, _ = graph
    return CostModel.load(run).rank(**arrays, node_config_feat=candidates, reference=reference,
                                    collection=COLLECTION).scores


@pytest.mark.slow
def test_a_drawn_reference_run_scores_a_config_the_same_whatever_reference_is_passed(
        drawn_run, graph):
    _, configs = graph
    half = len(configs) // 2
    candidates = configs[:10]
    first = _scores(drawn_run, graph, configs[:half], candidates)
    second = _scores(drawn_run, graph, configs[half:], candidates)
    np.testing.assert_array_equal(first, second)
    assert np.unique(first).size > 1


@pytest.mark.slow
def test_a_file_reference_run_does_not(trained_run, graph):
    """The contrast that makes the test above able to fail: the file-reference run's scores
    move with its reference."""
    _, configs = graph
    half = len(configs) // 2
    candidates = configs[:10]
    assert not np.array_equal(_scores(trained_run, graph, configs[:half], candidates),
                              _scores(trained_run, graph, configs[half:], candidates))


@pytest.mark.slow
def test_the_setting_is_recorded_with_the_run(drawn_run):
    record = json.loads((drawn_run / "run.json").read_text())
    assert record["features"]["settings"]["reference"] == "drawn"


def test_an_unknown_reference_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"reference must be one of \('file', 'drawn'\)"):
        FeatureConfig(reference="pool")


def _two_runs(tmp_path, older, newer):
    """A runs/ directory holding copies of both runs, `newer` the newer whenever each was made."""
    runs, now = tmp_path / "runs", time.time()
    for age, run in ((100, older), (0, newer)):
        shutil.copytree(run, runs / run.name)
        os.utime(runs / run.name / "run.json", (now - age, now - age))
    return runs


@pytest.mark.slow
def test_tune_takes_the_newest_fixed_reference_run_and_rank_the_newest_file_one(
        drawn_run, trained_run, tmp_path):
    runs = _two_runs(tmp_path, drawn_run, trained_run)
    assert latest_run(runs) == runs / trained_run.name
    assert latest_run(runs, fixed_reference=True) == runs / drawn_run.name
    (runs / trained_run.name / "run.json").touch()     # the file run older than the drawn one
    os.utime(runs / trained_run.name / "run.json", (1, 1))
    assert latest_run(runs, fixed_reference=False) == runs / trained_run.name
    (runs / "damaged").mkdir()
    (runs / "damaged" / "run.json").write_text("{not json")    # passed over, not an error
    assert latest_run(runs, fixed_reference=True) == runs / drawn_run.name
    shutil.rmtree(runs / drawn_run.name)
    assert latest_run(runs, fixed_reference=True) == runs / trained_run.name


@pytest.mark.slow
def test_submit_takes_a_file_reference_run_over_a_newer_drawn_one(drawn_run, trained_run,
                                                                  tiny_root, tmp_path):
    from models.serving.predict import choose_runs
    from features import resolve_data
    runs = _two_runs(tmp_path, trained_run, drawn_run)     # the drawn run the newer
    chosen = choose_runs(runs, resolve_data(str(tiny_root)), [COLLECTION], {})
    assert chosen[COLLECTION].run_dir == runs / trained_run.name


def test_tune_prefers_a_drawn_run_for_a_cnn_and_a_file_run_for_a_transformer():
    """By the program's opcodes (a convolution's share of its convs and dots), or the layout
    collection named; the note names the other kind when the run is not the preferred one."""
    from features.schema import CONVOLUTION as CONV, DOT
    from models.api.model_choice import tuner_fixed_reference
    from models.cli.messages import DRAWN_REFERENCE_NOTE, FILE_REFERENCE_NOTE, reference_note
    cnn, transformer = np.array([CONV, CONV, DOT, 0]), np.array([DOT] * 12 + [CONV])
    assert tuner_fixed_reference(cnn) and not tuner_fixed_reference(transformer)
    assert tuner_fixed_reference(np.array([0, 1]))          # neither: as a CNN
    assert not tuner_fixed_reference(cnn, "layout:nlp:default")
    assert tuner_fixed_reference(transformer, "layout:xla:random")
    assert reference_note(run_fixed=True, program_fixed=True) is None
    assert reference_note(run_fixed=False, program_fixed=False) is None
    assert reference_note(run_fixed=False, program_fixed=True) == FILE_REFERENCE_NOTE
    assert reference_note(run_fixed=True, program_fixed=False) == DRAWN_REFERENCE_NOTE


@pytest.mark.slow
@pytest.mark.parametrize("family", ["xla", "nlp"])
def test_tune_without_run_searches_with_the_kind_that_fits_the_program(
        family, drawn_run, trained_run, tiny_npz, tmp_path, capsys):
    """A cache holding both kinds, the drawn run the newer: a CNN is searched with the drawn
    run, a transformer with the file-reference one, each without a note."""
    from pathlib import Path
    from models.api.model_choice import tuner_fixed_reference
    program = list_npz(tiny_npz, f"layout:{family}:default", "valid")[0]
    with np.load(program) as z:
        assert tuner_fixed_reference(z["node_opcode"]) == (family == "xla")
    _two_runs(tmp_path, trained_run, drawn_run)
    toy = Path(pipeline.__file__).parent / "models" / "tuning" / "toy_measure.py"
    code = pipeline.main(["tune", str(program), "--measure", f"{sys.executable} {toy}",
                          "--budget", "6", "--out", str(tmp_path / "out"), "--cache-dir",
                          str(tmp_path), "--model-seeds", "1"])
    said = capsys.readouterr().out
    assert code == 0
    chosen = drawn_run if family == "xla" else trained_run
    line = next(line for line in said.splitlines() if line.startswith("searching with"))
    assert chosen.name in line and "note:" not in said


def test_a_search_gives_a_drawn_run_the_layouts_it_drew(drawn_run, graph):
    """The model's own search grows a file-reference run's CNN reference only: a drawn run's
    reference is its own, so the layouts a search drew are passed on as they are."""
    arrays = GraphArrays(**graph[0])
    space = LayoutSpace.of_graph(arrays.node_feat, arrays.node_opcode, arrays.edge_index,
                                 arrays.node_config_ids, TuneSettings().space)
    drawn = search_reference(space, TuneSettings(), 0)
    assert start_reference(CostModel.load(drawn_run), arrays, drawn, COLLECTION) is drawn
