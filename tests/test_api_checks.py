"""What the cost-model API refuses and what it says: invalid layouts (refused, or -inf on
request), the run and data it uses, family mismatches, and a missing model."""
from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import pipeline
from features.npz import graph as npz_graph, read as io
from features.npz.find import list_npz
from models.sample.generate import write_npz
from features.schema import GRAPH_KEYS, SHAPE_DIMS
from models.api import (CostModel, DataFormatError, FamilyMismatchWarning, InvalidLayoutError,
                        MissingModelError, SampleTrainedWarning, StaleRunError, TrainedRun,
                        rank_file)


def _arrays(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def model(trained_run) -> CostModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SampleTrainedWarning)
        return CostModel.load(trained_run)


@pytest.fixture(scope="module")
def xla_file(tiny_npz) -> Path:
    return list_npz(tiny_npz, "layout:xla:random", "test")[0]


@pytest.fixture(scope="module")
def xla_graph(xla_file) -> tuple[dict, np.ndarray]:
    """A tiny xla test graph's arrays and its candidates (int8)."""
    arrays = _arrays(xla_file)
    return {k: arrays[k] for k in GRAPH_KEYS}, arrays["node_config_feat"].astype(np.int8)


def _node_of_rank(graph: dict, at_least: int) -> int:
    """Position in node_config_ids of the first configurable node of output rank >= at_least."""
    ranks = (graph["node_feat"][graph["node_config_ids"], SHAPE_DIMS] > 0).sum(axis=1)
    return int(np.flatnonzero(ranks >= at_least)[0])


def _broken(graph: dict, ncf: np.ndarray, kind: str, candidates) -> tuple[np.ndarray, int]:
    """Candidates with one output group of one node set to an invalid layout."""
    k = _node_of_rank(graph, 2)
    rank = int((graph["node_feat"][graph["node_config_ids"][k], SHAPE_DIMS] > 0).sum())
    slots = {"all five": [5] * 6, "all zero": [0] * 6,
             "repeated dim": list(range(rank - 1)) + [0] + [-1] * (6 - rank)}[kind]
    bad = ncf.copy()
    bad[candidates, k, 0:6] = slots
    return bad, k


@pytest.mark.parametrize("kind", ["all five", "all zero", "repeated dim"])
def test_an_invalid_layout_is_refused_naming_candidate_node_and_group(model, xla_graph, kind):
    graph, ncf = xla_graph
    bad, k = _broken(graph, ncf, kind, [7, 9])
    with pytest.raises(InvalidLayoutError) as exc:
        model.rank(**graph, node_config_feat=bad, name="tuner-graph")
    message = str(exc.value)
    node = int(graph["node_config_ids"][k])
    assert message.startswith("tuner-graph: ")
    assert f"candidate 7, node {node} (node_config_ids[{k}]), output layout" in message
    assert f"2 of {len(ncf)} candidates are invalid (first [7, 9])" in message
    assert isinstance(exc.value, DataFormatError)


def test_on_request_invalid_candidates_score_minus_inf_and_rank_last(model, xla_graph):
    graph, ncf = xla_graph
    bad_rows = [0, 3, 50, len(ncf) - 1]
    bad, _ = _broken(graph, ncf, "all five", bad_rows)
    got = model.rank(**graph, node_config_feat=bad, invalid="score")
    valid = np.setdiff1d(np.arange(len(ncf)), bad_rows)
    alone = model.rank(**graph, node_config_feat=ncf[valid])     # the valid ones by themselves
    assert np.all(np.isneginf(got.scores[bad_rows]))
    np.testing.assert_array_equal(got.scores[valid], alone.scores)
    np.testing.assert_array_equal(got.order[:valid.size], valid[alone.order])
    assert sorted(got.order[valid.size:]) == bad_rows
    every = model.rank(**graph, node_config_feat=_broken(graph, ncf, "all zero", slice(None))[0],
                       invalid="score")
    assert np.all(np.isneginf(every.scores)) and sorted(every.order) == list(range(len(ncf)))
    with pytest.raises(ValueError, match=re.escape("invalid='skip': expected one of")):
        model.rank(**graph, node_config_feat=ncf, invalid="skip")


def test_rank_file_and_the_command_refuse_a_file_with_an_invalid_config(
        trained, trained_run, model, xla_file, xla_graph, tmp_path, capsys):
    graph, ncf = xla_graph
    bad, k = _broken(graph, ncf, "all zero", [4])
    path = tmp_path / "proposals.npz"
    write_npz(path, {**graph, "node_config_feat": bad})
    with pytest.raises(InvalidLayoutError, match=rf"^{re.escape(str(path))}: .*candidate 4, "):
        rank_file(model, path, collection="layout:xla:random")
    ranking = rank_file(model, path, collection="layout:xla:random", invalid="score")
    assert ranking.order[-1] == 4 and np.isneginf(ranking.scores[4])
    cache, _ = trained
    code = pipeline.main(["rank", str(path), "--run", str(trained_run), "--cache-dir", str(cache),
                          "--collection", "layout:xla:random"])
    err = capsys.readouterr().err
    assert code == 2 and f"candidate 4, node {int(graph['node_config_ids'][k])}" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_real_dev_files_rank_unchanged_by_the_check(model, dev_npz):
    """The smallest graph of each dev layout collection, valid split, through rank_file: every
    config passes, and a file in the tree draws no family warning."""
    for collection in ("layout:xla:default", "layout:xla:random", "layout:nlp:default",
                       "layout:nlp:random"):
        path = min(list_npz(dev_npz, collection, "valid"), key=lambda f: f.stat().st_size)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ranking = rank_file(model, path)
        assert ranking.collection == collection and np.all(np.isfinite(ranking.scores))
        assert sorted(ranking.order) == list(range(io.count_configs(path)))


def _run_copy(trained_run: Path, tmp_path: Path, **features_record) -> Path:
    """The trained run, copied, with run.json's 'features' entries changed."""
    run = tmp_path / trained_run.name
    shutil.copytree(trained_run, run)
    record = json.loads((run / "run.json").read_text())
    record["features"].update(features_record)
    (run / "run.json").write_text(json.dumps(record))
    return run


def test_load_names_the_run_and_its_data_and_warns_when_that_was_the_sample(trained_run,
                                                                           tmp_path):
    data = json.loads((trained_run / "run.json").read_text())["features"]["data"]
    with pytest.warns(SampleTrainedWarning, match="trained on the generated sample"):
        sample = CostModel.load(trained_run)     # the tiny tree is a generated sample
    assert sample.trained.trained_on == data and sample.trained.trained_on_sample
    assert sample.description == f"run {trained_run}, trained on {data} (the generated sample)"
    flagged = _run_copy(trained_run, tmp_path / "a", data="/elsewhere/npz", sample=True)
    with pytest.warns(SampleTrainedWarning, match=re.escape(str(flagged))):
        CostModel.load(flagged)
    real = _run_copy(trained_run, tmp_path / "b", data=str(tmp_path), sample=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = CostModel.load(real)
    assert loaded.description == f"run {real}, trained on {tmp_path}"


def test_the_rank_command_says_which_run_and_data_it_used(trained, trained_run, tiny_npz,
                                                          capsys):
    cache, _ = trained
    src = list_npz(tiny_npz, "layout:nlp:default", "valid")[0]
    assert pipeline.main(["rank", str(src), "--run", str(trained_run), "--cache-dir", str(cache),
                          "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["collection"] == "layout:nlp:default"    # stdout: the ranking alone
    data = json.loads((trained_run / "run.json").read_text())["features"]["data"]
    assert (f"ranked by the layout:nlp:default model of run {trained_run}, trained on {data} "
            f"(the generated sample)") in err
    assert re.search(r"^warning: .* was trained on the generated sample", err, re.M)


def test_a_graph_of_the_other_family_warns(model, tiny_npz, xla_graph, tmp_path):
    nlp_file = list_npz(tiny_npz, "layout:nlp:random", "test")[0]
    nlp = _arrays(nlp_file)
    nlp_graph = {k: nlp[k] for k in GRAPH_KEYS}
    with pytest.warns(FamilyMismatchWarning, match="transformer .* layout:xla:random model"):
        model.rank(**nlp_graph, node_config_feat=nlp["node_config_feat"])   # the default model
    graph, ncf = xla_graph
    with pytest.warns(FamilyMismatchWarning, match="convolutional .* layout:nlp:default model"):
        model.rank(**graph, node_config_feat=ncf, collection="layout:nlp:default")
    outside = tmp_path / nlp_file.name       # outside the tree: the collection is a guess
    shutil.copy(nlp_file, outside)
    with pytest.warns(FamilyMismatchWarning):
        rank_file(model, outside)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.rank(**nlp_graph, node_config_feat=nlp["node_config_feat"],
                   collection="layout:nlp:random")
        rank_file(model, nlp_file)             # in the tree: its own collection, no guess


def test_a_collection_the_run_lacks_is_a_missing_model_error(model, xla_graph, trained,
                                                             trained_run, tmp_path, capsys):
    graph, ncf = xla_graph
    tile_only = CostModel(TrainedRun({"tile:xla": model.trained.models["tile:xla"]},
                                     model.trained.settings, source="tile-run"))
    with pytest.raises(MissingModelError, match=re.escape(
            "tile-run has no model for layout:xla:random; it has ['tile:xla']")) as exc:
        tile_only.rank(**graph, node_config_feat=ncf)
    assert isinstance(exc.value, LookupError) and isinstance(exc.value, ValueError)
    assert not isinstance(exc.value, StaleRunError)
    assert DataFormatError is npz_graph.DataFormatError


def test_the_missing_model_reaches_a_cli_user_as_an_error_line(trained, trained_run, tiny_npz,
                                                               tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    record = json.loads((run / "run.json").read_text())
    del record["metrics"]["layout:nlp:random"]
    (run / "run.json").write_text(json.dumps(record))
    cache, _ = trained
    code = pipeline.main(["rank", str(list_npz(tiny_npz, "layout:nlp:random", "test")[0]),
                          "--run", str(run), "--cache-dir", str(cache)])
    err = capsys.readouterr().err
    assert code == 2 and "has no model for layout:nlp:random" in err and "Traceback" not in err
