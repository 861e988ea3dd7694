"""A program's HLO text through the command line: `encode` writes a layout file every command
reads, `rank PROGRAM --configs` ranks its layouts as the library does, and bad input is one
line naming the file, never a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pipeline
from features.npz.read import read_graph
from models.api import CostModel, rank_file, read_hlo

HLO = Path(__file__).parent / "data" / "hlo"
PROGRAM = HLO / "jax_conv_dot.hlo"


def test_encode_writes_a_layout_file_with_the_default_config(tmp_path, capsys):
    out = tmp_path / "new" / "model.npz"              # a missing directory is made
    assert pipeline.main(["encode", str(PROGRAM), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    graph, g = read_hlo(PROGRAM), read_graph(out, "layout:xla:random", "test")  # it validates
    with np.load(out) as f:
        for key, want in graph.items():
            assert f[key].dtype == want.dtype, key
            np.testing.assert_array_equal(f[key], want, err_msg=key)
    nc = graph["node_config_ids"].size
    assert g.node_config_feat.shape == (1, nc, 18) and (g.node_config_feat == -1).all()
    assert g.config_runtime.tolist() == [0]


def test_rank_of_a_program_with_configs_matches_the_library(trained_run, tmp_path, capsys):
    graph = read_hlo(PROGRAM)
    nc = graph["node_config_ids"].size
    rng = np.random.default_rng(0)
    configs = np.full((6, nc, 18), -1, np.int8)
    for c in range(1, 6):                              # the output slots as a random permutation
        for n in range(nc):
            rank = int(np.count_nonzero(graph["node_feat"][graph["node_config_ids"][n], 21:27]))
            configs[c, n, :rank] = rng.permutation(rank)
    np.save(tmp_path / "configs.npy", configs)
    argv = ["rank", str(PROGRAM), "--configs", str(tmp_path / "configs.npy"), "--run",
            str(trained_run), "--json", "--collection", "layout:xla:random"]
    assert pipeline.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    with pytest.warns(UserWarning, match="too few"):    # 6 configs: a reference is drawn
        want = CostModel.load(trained_run).rank(**graph, node_config_feat=configs,
                                                collection="layout:xla:random")
    assert printed["configs"] == want.order.tolist()


def test_rank_of_a_program_without_configs_says_what_to_pass(trained_run, capsys):
    assert pipeline.main(["rank", str(PROGRAM), "--run", str(trained_run)]) == 2
    err = capsys.readouterr().err
    assert "--configs" in err and str(PROGRAM) in err and "Traceback" not in err


@pytest.mark.parametrize("text, where", [
    ("this is not HLO\n", ":1:"),
    ("HloModule m\n\nENTRY %main () -> f32[2] {\n  ROOT %a = f32[2]{0} add(f32[2]{0} %x, "
     "f32[2]{0} %x)\n}\n", ":4:"),
])
def test_encode_of_bad_text_is_one_line_naming_file_and_line(tmp_path, capsys, text, where):
    program = tmp_path / "bad.hlo"
    program.write_text(text)
    out = tmp_path / "bad.npz"
    assert pipeline.main(["encode", str(program), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {program}{where}"), err
    assert not out.exists()


def test_rank_of_a_program_takes_tunes_best_npy_of_one_config(trained_run, tmp_path, capsys):
    """`tune` writes best.npy as (nc, 18), one config: `rank PROGRAM --configs` takes it."""
    nc = read_hlo(PROGRAM)["node_config_ids"].size
    np.save(tmp_path / "best.npy", np.full((nc, 18), -1, np.int8))
    argv = ["rank", str(PROGRAM), "--configs", str(tmp_path / "best.npy"), "--run",
            str(trained_run), "--json"]
    assert pipeline.main(argv) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["configs"] == [0]


def test_rank_and_tune_score_a_program_with_one_default_collection(trained_run, tmp_path,
                                                                   monkeypatch):
    """One default for a program's layouts: the model rank scores its HLO text with is the
    one tune searches with, its family's 'default' collection."""
    import sys
    from models.tuning.tune_graph import tune_graph
    module = sys.modules["models.tuning.tune_graph"]
    chosen, real_bound = [], module.Bound
    monkeypatch.setattr(module, "Bound", lambda model, graph, reference, collection:
                        chosen.append(collection) or real_bound(model, graph, reference,
                                                                collection))
    graph = read_hlo(PROGRAM)
    model = CostModel.load(trained_run)
    tune_graph(model, lambda configs: np.ones(len(configs)), budget=3, **graph)
    np.save(tmp_path / "one.npy", np.full((1, graph["node_config_ids"].size, 18), -1, np.int8))
    ranked = rank_file(model, PROGRAM, configs=tmp_path / "one.npy")
    assert chosen == [ranked.collection] == ["layout:xla:default"]
