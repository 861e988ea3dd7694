"""A graph's reference grown with its measurements (models/api/reference_growth.py): the fastest
measured configs and their mutants join the reference a file-reference run reads its
statistics from, exactly as if a caller had passed that reference."""
from __future__ import annotations

import numpy as np
import pytest

from pathlib import Path

from features.graph.layout_space import allowed_ranks, config_keys, invalid_configs
from features.npz.find import list_npz
from features import Graph
from models.api import CostModel, GraphArrays, Growth
from models.api.reference_growth import fastest, grown

COLLECTION = "layout:nlp:default"


def test_growth_applies_to_the_named_programs_layout_graphs_only():
    assert Growth().applies("layout:nlp:default") and Growth().applies("layout:nlp:random")
    assert not Growth().applies("layout:xla:default") and not Growth().applies("tile:xla")
    assert not Growth(elite=0).applies("layout:nlp:default")
    assert Growth(programs=("xla", "nlp")).applies("layout:xla:default")


def test_the_fastest_are_the_distinct_configs_of_lowest_mean_log_runtime():
    configs = np.full((5, 2, 18), -1, np.int8)
    for i, value in enumerate([0, 1, 2, 1, 3]):
        configs[i, 0, 0] = value
    # config 1 twice: 1.0 and 4.0, geometric mean 2.0 (arithmetic 2.5, slower than config 3)
    runtimes = np.array([3.0, 1.0, 2.2, 4.0, 5.0])
    best = fastest(configs, runtimes, 3)
    assert [c[0, 0] for c in best] == [1, 2, 0]
    assert len(fastest(configs, runtimes, 10)) == 4


def _graph(arrays: GraphArrays, configs: np.ndarray) -> Graph:
    return Graph(Path("graph"), COLLECTION, "train", arrays.node_feat, arrays.node_opcode,
                 arrays.edge_index, np.zeros(0), node_config_ids=arrays.node_config_ids,
                 node_config_feat=configs, node_splits=arrays.node_splits)


@pytest.fixture(scope="module")
def nlp_graph(tiny_npz):
    with np.load(list_npz(tiny_npz, COLLECTION, "train")[0]) as z:
        return GraphArrays.of_npz(z), z["node_config_feat"], z["config_runtime"].astype(float)


def test_the_grown_reference_is_the_first_the_elite_and_their_mutants(nlp_graph):
    arrays, configs, runtimes = nlp_graph
    g = _graph(arrays, configs)
    elite = fastest(configs, runtimes, 4)
    out = grown(g, configs[:7], elite, Growth(mutants=50))
    assert out.shape == (7 + 4 + 50, *configs.shape[1:])
    np.testing.assert_array_equal(out[:7], configs[:7])
    np.testing.assert_array_equal(out[7:11], elite)
    mutants = out[11:]
    allowed = allowed_ranks(arrays.node_feat, arrays.edge_index, arrays.node_config_ids)
    assert not invalid_configs(mutants, allowed).any()
    elite_keys = set(config_keys(elite))
    assert sum(k not in elite_keys for k in config_keys(mutants)) > 40   # moved, mostly
    np.testing.assert_array_equal(out, grown(g, configs[:7], elite, Growth(mutants=50)))


def test_a_grown_graph_scores_as_a_caller_passing_that_reference_would(trained_run,
                                                                     nlp_graph, tmp_path):
    """Independent reference: a model that never grows, given the grown reference by the
    caller, then the same measurements. The growing model ranks first, then learns in three
    steps: the second brings faster configs (the fastest ten change: the tables are rebuilt),
    the third slower ones (they do not). Growth changes the scores; a saved model restores
    them; a config's score still does not depend on the other candidates."""
    arrays, configs, runtimes = nlp_graph
    base, measured, rt = configs[:60], configs[60:105], runtimes[60:105] + 1.0
    rt[15:30] = rt.min() / 2 - np.arange(15) * 1e-3     # step two: the fastest of all
    rt[30:] = rt.max() * 2                               # step three: the slowest

    def scores(model, candidates=configs):
        return model.rank(**arrays.kwargs(), node_config_feat=candidates, reference=base,
                          collection=COLLECTION).scores

    def learn(model, part, reference=base):
        model.update(**arrays.kwargs(), node_config_feat=measured[part], runtimes=rt[part],
                     reference=reference, collection=COLLECTION)

    growing = CostModel.load(trained_run)
    before = scores(growing)
    for part in (slice(0, 15), slice(15, 30)):
        learn(growing, part)
    after_two = scores(growing)
    learn(growing, slice(30, 45))
    reference = grown(_graph(arrays, measured), base, fastest(measured, rt, Growth().elite),
                      Growth())
    told = CostModel.load(trained_run, growth=Growth(elite=0))
    learn(told, slice(0, 45), reference)
    never = CostModel.load(trained_run, growth=Growth(elite=0))
    learn(never, slice(0, 45))

    np.testing.assert_allclose(scores(growing), scores(told), rtol=0, atol=1e-9)
    assert not np.allclose(scores(growing), scores(never))
    assert not np.allclose(after_two, before)
    np.testing.assert_allclose(scores(growing, configs[:10]), scores(growing)[:10], atol=1e-12)
    loaded = CostModel.load(growing.save(tmp_path / "saved"))
    np.testing.assert_array_equal(scores(loaded), scores(growing))
