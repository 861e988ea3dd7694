"""A graph's reference grown with its measurements (models/api/reference_growth.py): the fastest
measured configs and their mutants join the reference a file-reference run reads its
statistics from, exactly as if a caller had passed that reference; and a CNN search's first
reference, grown by the model's own search (start_reference)."""
from __future__ import annotations

import numpy as np
import pytest

from pathlib import Path

from features.graph.layout_space import LayoutSpace, allowed_ranks, config_keys, invalid_configs
from features.npz.find import list_npz
from features import Graph
from models.api import CostModel, GraphArrays, Growth
from models.api.cost_model import start_reference
from models.api.reference_growth import fastest, grown, top_scored
from models.tuning.tune_graph import model_reference, search_reference, tune_graph
from models.tuning.tuner import TuneSettings

COLLECTION = "layout:nlp:default"
CNN = "layout:xla:default"


def test_growth_applies_to_the_named_programs_layout_graphs_only():
    assert Growth().applies("layout:nlp:default") and Growth().applies("layout:nlp:random")
    assert not Growth().applies("layout:xla:default") and not Growth().applies("tile:xla")
    assert not Growth(elite=0).applies("layout:nlp:default")
    assert Growth(programs=("xla", "nlp")).applies("layout:xla:default")


def test_the_models_own_search_grows_the_first_reference_of_cnn_layout_graphs_only():
    assert Growth().starts("layout:xla:default") and Growth().starts("layout:xla:random")
    assert not Growth().starts("layout:nlp:default") and not Growth().starts("tile:xla")
    assert not Growth(steps=0).starts("layout:xla:default")
    assert not Growth(elite=0).starts("layout:xla:default")


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


@pytest.fixture(scope="module")
def cnn_graph(tiny_npz):
    with np.load(list_npz(tiny_npz, CNN, "valid")[0]) as z:
        return GraphArrays.of_npz(z)


def _drawn(arrays: GraphArrays, seed: int = 0) -> np.ndarray:
    space = _space(arrays)
    return search_reference(space, TuneSettings(), seed)


def _space(arrays: GraphArrays):
    return LayoutSpace.of_graph(arrays.node_feat, arrays.node_opcode, arrays.edge_index,
                                arrays.node_config_ids, TuneSettings().space)


def test_the_top_scored_are_distinct_highest_first():
    configs = np.zeros((5, 1, 18), np.int8)
    configs[:, 0, 0] = [3, 1, 3, 2, 0]
    best = top_scored(configs, np.array([0.9, 0.5, 0.9, 0.7, 0.7]), 3)
    assert [c[0, 0] for c in best] == [3, 0, 2]      # 3 once; a tie goes to the lower key
    # equal scores, one config three times: the tie still goes to the lower key (keys are
    # hashes), however many copies either has
    many = np.repeat(configs[[0, 4]], [3, 1], axis=0)
    lower = min((0, 3), key=lambda i: config_keys(many[i:i + 1])[0])
    for order in (many, many[::-1]):
        np.testing.assert_array_equal(top_scored(order, np.full(4, 0.1 + 0.2), 1)[0], many[lower])


def test_a_cnn_search_starts_from_the_models_own_search_around_its_drawn_layouts(trained_run,
                                                                                 cnn_graph):
    """Independent reference: the loop written out with rank() alone: a model that has not
    seen the graph ranks the reference so far with it as reference=; its ten top-scored
    distinct configs (by score, then key) and their mutants join the drawn layouts, five
    times, step i's mutants drawn at seed 1 + i."""
    drawn = _drawn(cnn_graph)
    growth = Growth(mutants=60)
    model = CostModel.load(trained_run, growth=growth)
    out = start_reference(model, cnn_graph, drawn, CNN)

    g = _graph(cnn_graph, drawn)._replace(collection=CNN)
    reference = drawn
    for step in range(growth.steps):
        scores = CostModel.load(trained_run).rank(
            **cnn_graph.kwargs(), node_config_feat=reference, reference=reference,
            collection=CNN).scores
        keys = config_keys(reference)
        first = {}
        for i in sorted(range(len(keys)), key=lambda i: (-scores[i], keys[i])):
            first.setdefault(keys[i], i)
        elite = reference[list(first.values())[:growth.elite]]
        assert len(set(config_keys(elite))) == growth.elite
        reference = grown(g, drawn, elite, Growth(mutants=60, seed=1 + step))
    np.testing.assert_array_equal(out, reference)
    assert out.shape[0] == len(drawn) + growth.elite + growth.mutants
    assert len(model.cache) == 0     # the model itself saw nothing
    as_int64 = start_reference(model, cnn_graph, drawn.astype(np.int64), CNN)
    np.testing.assert_array_equal(as_int64, out)
    assert out.dtype == as_int64.dtype == np.int8


def test_other_graphs_and_runs_start_from_the_drawn_layouts(trained_run, nlp_graph, cnn_graph):
    arrays = nlp_graph[0]
    drawn = _drawn(arrays)
    model = CostModel.load(trained_run)
    assert start_reference(model, arrays, drawn, COLLECTION) is drawn
    cnn = _drawn(cnn_graph)
    assert start_reference(CostModel.load(trained_run, growth=Growth(steps=0)), cnn_graph, cnn,
                           CNN) is cnn


def test_tune_graph_gives_its_model_that_reference(trained_run, cnn_graph):
    model = CostModel.load(trained_run, growth=Growth(mutants=60))
    tune_graph(model, lambda c: 1.0 + np.abs(c.astype(float)).sum(axis=(1, 2)), budget=6,
               **cnn_graph.kwargs(), collection=CNN, seed=1)
    [learnt] = model.state().graphs
    expected = model_reference(CostModel.load(trained_run, growth=Growth(mutants=60)),
                               cnn_graph, _space(cnn_graph), TuneSettings(), 1, CNN)
    np.testing.assert_array_equal(learnt.reference, expected)
    drawn = _drawn(cnn_graph, 1)
    np.testing.assert_array_equal(expected[:len(drawn)], drawn)
    assert len(expected) > len(drawn)
