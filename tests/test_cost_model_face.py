"""CostModel's face (rank, update, save, load, and read-only facts) and its saved state: what
save writes is `state()`, on disk in the format saved models have always had, and load gives it
back."""
from __future__ import annotations

import json

import numpy as np
import pytest

from features import FeatureConfig
from features.npz.find import list_npz
from features.schema import GRAPH_KEYS
from models.api import CostModel, GraphArrays, TrainedRun
from models.api.saved_state import SavedState

# The four verbs, and what a user reads: which run (description, trained), what was learnt
# (state), the graphs kept (cache), how a graph's reference grows with its measurements
# (growth). Everything else is a function beside it (rank_file, fresh).
FACE = {"load", "rank", "update", "save", "description", "trained", "state", "cache", "growth"}


def test_cost_model_is_a_small_face():
    model = CostModel(TrainedRun({}, FeatureConfig()))
    assert {n for n in dir(model) if not n.startswith("_")} == FACE
    assert model.state() == SavedState("", "", None, ())


def test_graph_arrays_give_the_keywords_rank_takes():
    arrays = {k: np.zeros(1) for k in GRAPH_KEYS}
    assert list(GraphArrays.of_npz(arrays).kwargs()) == list(GRAPH_KEYS)
    tile = GraphArrays.of_npz({k: arrays[k] for k in GRAPH_KEYS[:3]})
    assert list(tile.kwargs()) == list(GRAPH_KEYS[:3]) and tile.node_config_ids is None


@pytest.mark.slow
def test_a_saved_model_round_trips_through_its_public_state(trained_run, tiny_npz, tmp_path):
    """Layout (node effects, refit on load) and tile (a booster, saved) learnt; the directory
    holds the files and keys older saves hold, and loads to the same state and scores."""
    model = CostModel.load(trained_run)
    with np.load(list_npz(tiny_npz, "layout:xla:random", "train")[0]) as z:
        layout, ncf, runtime = GraphArrays.of_npz(z), z["node_config_feat"], z["config_runtime"]
    with np.load(list_npz(tiny_npz, "tile:xla", "train")[0]) as z:
        tile, cf, tile_runtime = GraphArrays.of_npz(z), z["config_feat"], z["config_runtime"]
    model.update(**layout.kwargs(), node_config_feat=ncf[:30], runtimes=runtime[:30] + 1.0)
    model.update(**tile.kwargs(), config_feat=cf[:40], runtimes=tile_runtime[:40] + 1.0)
    saved = model.save(tmp_path / "tuner")

    record = json.loads((saved / "cost_model.json").read_text())
    assert set(record) == {"run", "trained_run", "seeds", "graphs"} and record["run"] == "run"
    assert [set(e) for e in record["graphs"]] == [
        {"file", "collection", "name", "refinement_weight"}] * 2
    assert sorted(p.name for p in saved.iterdir()) == [
        "cost_model.json", "graph-0.npz", "graph-1.npz", "graph-1.refine.txt", "run"]
    with np.load(saved / "graph-0.npz") as z:
        assert z.files == [*GRAPH_KEYS, "reference", "measured", "runtimes"]

    loaded = CostModel.load(saved)
    for a, b in zip(model.state().graphs, loaded.state().graphs, strict=True):
        assert (a.collection, a.name) == (b.collection, b.name)
        for key in ("reference", "measured", "runtimes"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
        assert a.arrays.kwargs().keys() == b.arrays.kwargs().keys()
        assert (a.refinement is None) == (b.refinement is None)
    for graph, key, configs in ((layout, "node_config_feat", ncf), (tile, "config_feat", cf)):
        np.testing.assert_array_equal(loaded.rank(**graph.kwargs(), **{key: configs}).scores,
                                      model.rank(**graph.kwargs(), **{key: configs}).scores)
