"""The cost model as an autotuner keeps it: learning from measurements, save and load."""
from __future__ import annotations

import itertools
from dataclasses import replace
import json
import warnings

import numpy as np
import pytest

import pipeline
from features.npz.find import list_npz
from models.api import (CostModel, DrawnReferenceWarning, GraphArrays, InvalidLayoutError,
                        ReferenceCoverageWarning, rank_file)
from models.api.cost_model import fresh
from models.api.reference import distinct
from models.metrics import kendall_tau_b
from models.api.node_effects import EffectsParams
from models.api.refine import refine
from models.reporting.figures import tuning_curves
from models.reporting.tune_sim_table import format_draws, format_table
from models.evaluation.hardware import Hardware, quirk_sum
from models.evaluation.hardware import main as hardware_main
from models.evaluation.live_search import genetic_best
from models.tuning.tune_graph import model_reference
from models.tuning.tuner import TuneSettings
from models.evaluation.tune_sim import (NEAR_STEPS, SimSettings, _picks, distinct_pool,
                                        near_best, random_best, simulate)
from features.schema import GRAPH_KEYS
from models.api.candidates import read_candidates
from features.graph.layout_space import LayoutSpace, group_codes


@pytest.fixture(scope="module")
def measured_graph(tiny_npz):
    """A layout train file of the tiny tree: a graph, its configs and their runtimes."""
    with np.load(list_npz(tiny_npz, "layout:xla:random", "train")[0]) as z:
        return ({k: z[k] for k in GRAPH_KEYS}, z["node_config_feat"],
                z["config_runtime"].astype(np.float64))


def _kendall(scores, runtime):
    """Higher score = faster, so agreement is with -runtime."""
    return kendall_tau_b(scores, -runtime)


def test_updates_learn_a_runtime_the_prior_gets_backwards(trained_run, measured_graph):
    """Measurements that contradict the trained model (a 'new machine' where what it calls fast
    is slow) move the scores of unmeasured configs their way."""
    graph, configs, _ = measured_graph
    model = CostModel.load(trained_run)
    prior = model.rank(**graph, node_config_feat=configs).scores
    truth = np.exp(prior - prior.min())          # slowest where the model says fastest
    seen = np.arange(configs.shape[0]) % 2 == 0
    assert _kendall(prior[~seen], truth[~seen]) < -0.9
    result = model.update(**graph, node_config_feat=configs[seen], runtimes=truth[seen])
    assert result.measurements == result.used == seen.sum()
    assert result.learner == "node effects"
    after = model.rank(**graph, node_config_feat=configs[~seen]).scores
    assert _kendall(after, truth[~seen]) > 0.3


def test_a_few_measurements_leave_the_prior_alone(trained_run, measured_graph):
    graph, configs, runtime = measured_graph
    model = CostModel.load(trained_run)
    before = model.rank(**graph, node_config_feat=configs).scores
    few = EffectsParams().min_measurements - 1
    model.update(**graph, node_config_feat=configs[:few], runtimes=runtime[:few])
    np.testing.assert_array_equal(model.rank(**graph, node_config_feat=configs).scores, before)


def test_refine_declines_measurements_that_say_nothing(rng):
    """Runtimes independent of the rows: the 2-fold check finds no gain over the prior."""
    X = rng.normal(size=(200, 5))
    prior = X[:, 0]
    runtime = np.exp(-prior)                      # the prior is already exactly right
    assert refine(X, prior, runtime) is None


@pytest.mark.parametrize("runtimes, message", [
    (lambda n: np.ones(n - 1), "runtimes must be"),
    (lambda n: np.zeros(n), "runtimes must be"),
    (lambda n: np.full(n, np.nan), "runtimes must be"),
])
def test_bad_runtimes_are_refused(trained_run, measured_graph, runtimes, message):
    graph, configs, _ = measured_graph
    with pytest.raises(ValueError, match=message):
        CostModel.load(trained_run).update(**graph, node_config_feat=configs[:20],
                                           runtimes=runtimes(20), name="tuned")


def test_save_and_load_keep_what_was_learnt(trained_run, measured_graph, tmp_path):
    graph, configs, runtime = measured_graph
    model = CostModel.load(trained_run)
    model.update(**graph, node_config_feat=configs[:40], runtimes=runtime[:40])
    before = model.rank(**graph, node_config_feat=configs)
    saved = model.save(tmp_path / "tuner")
    loaded = CostModel.load(saved)
    after = loaded.rank(**graph, node_config_feat=configs)
    np.testing.assert_array_equal(after.scores, before.scores)
    # The measurements came along: one more update continues from all 41, not from 1.
    assert loaded.update(**graph, node_config_feat=configs[40:41],
                         runtimes=runtime[40:41]).measurements == 41
    assert loaded.save(saved) == saved                 # a saved model may be replaced ...
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a saved cost model"):
        model.save(tmp_path / "notes")                 # ... any other directory is left alone
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"


def _positions(order):
    """Each config's place in the submitted order, as the competition scores it (tied
    scores are not ties there: the order breaks them)."""
    position = np.empty(order.size)
    position[order] = np.arange(order.size)
    return position


def test_fewer_seeds_score_as_the_runs_own_seeds_did(trained_run, tiny_npz, tmp_path):
    """seeds=1 ranks each valid graph as the run's seed 0 (its ranker with its partner) scored
    it in training, all seeds as the run's ensemble did (tile's top-5 score with NumPy, layout
    Kendall of the submitted order with scipy); the spread over one seed is 0, and a saved
    model keeps its seeds."""
    from scipy.stats import kendalltau

    record = json.loads((trained_run / "run.json").read_text())
    seeds = record["train_config"]["seeds"]
    assert seeds >= 2
    one, every = CostModel.load(trained_run, seeds=1), CostModel.load(trained_run)
    score = {"tile:xla": lambda r, t: 2 - t[r.order[:5]].min() / t.min(),
             "layout:xla:random": lambda r, t: kendalltau(_positions(r.order), t)[0]}
    for collection, metric in score.items():
        m, compared = record["metrics"][collection], 0
        assert len(one.trained.models[collection]) * seeds == len(every.trained.models[collection])
        for path in list_npz(tiny_npz, collection, "valid"):
            with np.load(path) as z:
                runtime = z["config_runtime"] / z.get("config_runtime_normalizers", 1)
            if m["per_graph"].get(path.stem) is None:
                continue
            ranking = rank_file(one, path)
            assert metric(ranking, runtime) == pytest.approx(m["seed_per_graph"][0][path.stem])
            assert not ranking.spread.any()
            assert metric(rank_file(every, path), runtime) == pytest.approx(
                m["per_graph"][path.stem])
            compared += 1
        assert compared >= 2
    saved = one.save(tmp_path / "tuner")
    assert len(CostModel.load(saved).trained.models["tile:xla"]) == 1
    with pytest.raises(ValueError, match="saved with seeds=1"):
        CostModel.load(saved, seeds=2)
    for bad in (0, seeds + 1, True):
        with pytest.raises(ValueError, match=f"seeds must be 1 .. {seeds}"):
            CostModel.load(trained_run, seeds=bad)


def test_random_best_is_the_mean_over_every_draw(rng):
    runtime = rng.integers(1, 9, size=9).astype(np.float64)       # ties included
    for k in (1, 3, 9):
        draws = [runtime[list(c)].min() for c in itertools.combinations(range(9), k)]
        assert random_best(runtime, k) == pytest.approx(np.mean(draws))


def test_a_pool_holds_each_config_once_and_no_search_measures_one_twice(trained_run, tiny_npz):
    """A file's repeated configs (a genetic search measures its default again and again) are
    one candidate of their mean runtime; the model's searches never pick a config twice."""
    path = list_npz(tiny_npz, "layout:xla:random", "valid")[0]
    g = read_candidates(path, "layout:xla:random")
    configs = g.node_config_feat[:3]
    assert len({c.tobytes() for c in configs}) == 3
    repeated = g._replace(node_config_feat=configs[[0, 1, 0, 2, 1, 0]])
    pool, runtime = distinct_pool(repeated, np.array([1.0, 2.0, 3.0, 4.0, 6.0, 5.0]))
    np.testing.assert_array_equal(pool.node_config_feat, configs)
    np.testing.assert_allclose(runtime, [3.0, 4.0, 4.0])
    # tile rows are floats (tile sizes to ~2e5): rows 256 apart are two configs, not one
    tile = read_candidates(list_npz(tiny_npz, "tile:xla", "valid")[0], "tile:xla")
    rows = tile.config_feat[:2].copy()
    rows[1] = rows[0]
    rows[1, 0] += 256.0
    pool, runtime = distinct_pool(tile._replace(config_feat=rows[[0, 1, 0]]),
                                  np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(pool.config_feat, rows)
    np.testing.assert_allclose(runtime, [2.0, 2.0])
    whole, runtime = distinct_pool(g, np.arange(1.0, 1.0 + g.node_config_feat.shape[0]))
    settings = SimSettings(budgets=(5, 12), round_size=4)
    for learn in (False, True):
        picks, scores = _picks(CostModel.load(trained_run), whole, runtime, settings, learn,
                               None)
        assert len(picks) == min(12, runtime.size) == len(set(picks.tolist()))
        assert scores.shape == runtime.shape


def test_the_near_best_check_scores_unmeasured_configs_near_the_searchs_best(trained_run,
                                                                             tiny_npz):
    """The learner's held-out check against a hand count: the configs it scores are the
    unmeasured ones within NEAR_STEPS slot groups of the ten best measured (or the 50 nearest),
    and a score that orders them as their runtimes has Kendall 1, its negative -1."""
    path = list_npz(tiny_npz, "layout:xla:random", "valid")[0]
    g = read_candidates(path, "layout:xla:random")
    runtime = np.arange(1.0, 1.0 + g.node_config_feat.shape[0])
    picks = np.arange(0, runtime.size, 3)[:15]
    check = near_best(g, runtime, picks, {"right": -runtime, "wrong": runtime})
    assert check["right"] == pytest.approx(1.0) and check["wrong"] == pytest.approx(-1.0)
    codes = group_codes(g.node_config_feat).reshape(runtime.size, -1)
    best = picks[np.argsort(runtime[picks])[:10]]
    unmeasured = [i for i in range(runtime.size) if i not in set(picks.tolist())]
    near = [i for i in unmeasured if min(int((codes[i] != codes[b]).sum()) for b in best)
            <= NEAR_STEPS]
    assert check["configs"] == (len(near) if len(near) >= 20 else min(50, len(unmeasured)))


def test_the_table_shows_families_worst_first_with_the_share_of_the_gap_closed():
    """Two families: the one whose updated search ends further from the pool's best is shown
    first; the share closed is (frozen - updated) / (frozen - 1) at the largest budget."""
    graph = lambda name, frozen, updated: {"graph": name, "frozen": frozen,
                                           "updated": updated, "random": frozen,
                                           "near_best": {"frozen": 0.1, "updated": 0.3}}
    graphs = [graph("resnet50_batch_8_train", [1.05, 1.02], [1.04, 1.01]),
              graph("mobilenet_v2_batch_8_train", [1.10, 1.08], [1.06, 1.02])]
    result = {"settings": {"budgets": [20, 100]},
              "collections": {"layout:xla:default": {
                  "graphs": graphs, "mean": {k: np.mean([g[k] for g in graphs], 0).tolist()
                                             for k in ("random", "frozen", "updated")}}}}
    text = format_table(result)
    body = text.split("per family, worst first")[1]
    assert body.index("mobilenet (1)") < body.index("resnet (1)")
    mobilenet = body.split("mobilenet (1)")[1].splitlines()[1]
    assert "75%" in mobilenet and "0.10 ->  0.30" in mobilenet   # (1.08 - 1.02) / 0.08
    assert "50%" in body.split("resnet (1)")[1].splitlines()[1]


def test_a_graph_of_one_distinct_config_is_left_out_of_tune_sim(trained_run, tiny_npz, tmp_path):
    """Nothing to choose between: the graph is named and left out, the others simulated."""
    files = list_npz(tiny_npz, "tile:xla", "valid")[:2]
    root = tmp_path / "npz" / "tile" / "xla" / "valid"
    root.mkdir(parents=True)
    for i, f in enumerate(files):
        with np.load(f) as z:
            arrays = dict(z)
        if i == 0:              # every row the first config, measured again and again
            for key in ("config_feat", "config_runtime", "config_runtime_normalizers"):
                arrays[key] = np.repeat(arrays[key][:1], len(arrays[key]), axis=0)
        np.savez(root / f.name, **arrays)
    said = []
    result = simulate(trained_run, tmp_path / "npz", ["tile:xla"], SimSettings(budgets=(1, 2)),
                      data="test", log=said.append)
    tile = result["collections"]["tile:xla"]
    assert tile["left_out"] == [files[0].stem]
    assert [g["graph"] for g in tile["graphs"]] == [files[1].stem]
    assert any(files[0].stem in line and "fewer than 2 distinct" in line for line in said)


@pytest.mark.slow
def test_tune_sim_measures_three_searches_on_validation_graphs(trained, trained_run, capsys):
    cache, common = trained
    data_dir = common[common.index("--data-dir") + 1]
    for collection in ("layout:xla:random", "tile:xla"):     # two calls: results accumulate
        assert pipeline.main(["tune-sim", "--data-dir", data_dir, "--cache-dir", str(cache),
                              "--run", str(trained_run), "--max-graphs", "1",
                              "--collections", collection]) == 0
    said = capsys.readouterr()
    assert "best runtime found / best of the pool" in said.out
    assert "over the draws" not in said.out         # one draw saved: nothing to summarise
    # The run was trained on the sample: said as a line, not as a warning's source listing
    assert "warning: " in said.err and "SampleTrainedWarning" not in said.err
    saved = json.loads((trained_run / "tune_sim.json").read_text())
    assert saved["settings"]["seed"] == 0 and saved["settings"]["drawn"] == 1
    for collection in ("tile:xla", "layout:xla:random"):
        result = saved["collections"][collection]
        for search in ("random", "frozen", "updated"):
            found = np.array(result["mean"][search])
            # Ratios to the file's best: never below 1, never worse with a larger budget
            assert np.all(found >= 1.0) and np.all(np.diff(found) <= 1e-12), (collection, search)
    # The report of the run shows the simulation: a section, its table and one panel per collection
    assert pipeline.main(["report", "--run", str(trained_run), "--cache-dir", str(cache)]) == 0
    page = (trained_run / "report" / "report.html").read_text()
    section = page.split("Autotuning simulation (tune-sim)")[1]
    assert "<img alt='tune_sim'" in section and "layout:xla:random" in section
    figure = tuning_curves(saved["collections"], saved["settings"]["budgets"])
    assert len(figure.axes) == 2
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ["random", "frozen",
                                                                         "updated"]
    # Another seed's draws are saved apart; then the gain over the draws saved with the same
    # settings is printed (not a result of other settings: here one of round size 3, and one
    # whose searches' references grew otherwise: a model of another Growth)
    other = {**saved, "settings": {**saved["settings"], "seed": 2, "round_size": 3}}
    (trained_run / "tune_sim_seed-2.json").write_text(json.dumps(other))
    grown_otherwise = {**saved, "settings": {**saved["settings"], "seed": 3},
                       "growth": {**saved["growth"], "steps": 0}}
    (trained_run / "tune_sim_seed-3.json").write_text(json.dumps(grown_otherwise))
    assert pipeline.main(["tune-sim", "--data-dir", data_dir, "--cache-dir", str(cache),
                          "--run", str(trained_run), "--max-graphs", "1", "--collections",
                          "layout:xla:random", "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert "the updates' gain over the draws of seeds 0, 1 (tune-sim --seed N)" in printed
    assert "layout:xla:random (1)    gain " in printed and "tile:xla (1)" not in printed
    assert json.loads((trained_run / "tune_sim_seed-1.json").read_text())["settings"]["seed"] == 1


def test_tune_sim_with_the_search_reference_scores_the_pool_as_tune_would(trained_run,
                                                                           tiny_npz):
    """--reference search: each graph's statistics fixed by the configs tune_graph draws, not by
    the pool; the saved Kendall is the fresh model's, ranking the pool with that reference."""
    from scipy.stats import kendalltau
    s = SimSettings(budgets=(1, 5), reference="search")
    assert s.result_name == "tune_sim_ref-search.json"
    result = simulate(trained_run, tiny_npz, ["layout:xla:random"], replace(s, max_graphs=1),
                      data="test", log=lambda line: None)
    graph = result["collections"]["layout:xla:random"]["graphs"][0]
    path = list_npz(tiny_npz, "layout:xla:random", "valid")[0]
    g, runtime = distinct_pool(read_candidates(path, "layout:xla:random"),
                               *[np.load(path)["config_runtime"].astype(np.float64)])
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids,
                                 TuneSettings().space)
    model = CostModel.load(trained_run)
    reference = model_reference(model, GraphArrays.of_graph(g), space, TuneSettings(), 0,
                                "layout:xla:random")
    ranking = model.rank(
        **{k: getattr(g, k) for k in GRAPH_KEYS}, node_config_feat=g.node_config_feat,
        reference=reference, collection="layout:xla:random")
    expected = kendalltau(ranking.scores, -runtime).statistic
    assert graph["graph"] == path.stem
    assert graph["pool_view"]["kendall"] == pytest.approx(expected, abs=1e-9)
    top = np.argsort(-ranking.scores, kind="stable")[:10]
    assert graph["pool_view"]["top10"] == pytest.approx(runtime[top].min() / runtime.min())
    assert "the model's Kendall on the pools" in format_table(result)


def test_the_draws_summary_averages_the_gains_of_draws_on_the_same_graphs(rng):
    def result(seed, frozen, updated, graphs=("a", "b")):
        c = {"graphs": [{"graph": g} for g in graphs],
             "mean": {"random": [1.5, 1.2], "frozen": frozen, "updated": updated}}
        return {"settings": {"budgets": [5, 20], "seed": seed},
                "collections": {"layout:xla:default": c, "layout:nlp:default": c}}
    frozen, updated = rng.uniform(1.0, 1.1, (3, 2)), rng.uniform(1.0, 1.1, (3, 2))
    draws = [result(i, f.tolist(), u.tolist()) for i, (f, u) in enumerate(zip(frozen, updated))]
    del draws[2]["collections"]["layout:nlp:default"]       # not searched by every draw
    text = format_draws(draws)
    lines = text.splitlines()
    assert lines[0].startswith("the updates' gain over the draws of seeds 0, 1, 2")
    [gain] = [i for i, line in enumerate(lines) if line.startswith("layout:xla:default (2)")]
    assert [float(v) for v in lines[gain].split()[3:5]] == pytest.approx(
        (frozen - updated).mean(axis=0), abs=6e-5)
    assert [float(v) for v in lines[gain + 1].split()[1:3]] == pytest.approx(
        (frozen - updated).std(axis=0, ddof=1), abs=6e-5)
    assert "layout:nlp:default" not in text
    other = result(3, [1.0, 1.0], [1.0, 1.0], graphs=("a", "c"))    # other graphs: not a draw
    assert "layout:xla:default" not in format_draws([draws[0], other])
    assert format_draws(draws[:1]) == ""


# first calls of 10 configs: the graphs' references are drawn, as they should be, and said
@pytest.mark.filterwarnings("ignore::models.api.DrawnReferenceWarning")
def test_measurements_survive_a_full_cache(trained_run, measured_graph):
    """Graphs with measurements are kept, and a new graph is not dropped the moment it comes."""
    graph, configs, runtime = measured_graph
    model = CostModel.load(trained_run, cache_size=1)
    other = {**graph, "node_feat": graph["node_feat"] * 1.5}
    model.update(**graph, node_config_feat=configs[:10], runtimes=runtime[:10])
    model.update(**other, node_config_feat=configs[:10], runtimes=runtime[:10])
    assert model.update(**other, node_config_feat=configs[10:12],
                        runtimes=runtime[10:12]).measurements == 12
    assert model.update(**graph, node_config_feat=configs[10:12],
                        runtimes=runtime[10:12]).measurements == 12


def test_invalid_references_and_measurements_are_refused(trained_run, measured_graph):
    graph, configs, runtime = measured_graph
    bad = configs[:10].copy()
    bad[:, 0, :6] = 5                                  # no tensor has six dims named 5
    model = CostModel.load(trained_run)
    with pytest.raises(InvalidLayoutError):
        model.rank(**graph, node_config_feat=configs[:10], reference=bad)
    with pytest.raises(InvalidLayoutError):
        model.update(**graph, node_config_feat=bad, runtimes=runtime[:10])


def test_candidates_beyond_the_reference_are_warned_about(trained_run, measured_graph):
    graph, configs, _ = measured_graph
    reference = configs[:60].copy()
    reference[:, :, :6] = -1                        # never sets an output layout
    assert distinct(reference) >= 20
    model = CostModel.load(trained_run)
    with pytest.warns(ReferenceCoverageWarning, match="the 60 configs passed as reference="):
        model.rank(**graph, node_config_feat=configs[:10], reference=reference)


def test_a_tiny_first_call_gets_a_drawn_reference_whatever_came_first(trained_run,
                                                                      measured_graph):
    """A first call of one candidate used to become the graph's reference: that call scored 0
    and later calls scored against one config, differently for each first candidate. Now the
    graph gets layouts drawn from its own space, the same whichever call came first, and a
    warning says so."""
    graph, configs, _ = measured_graph
    later = []
    for first in (0, 5):
        model = CostModel.load(trained_run)
        with pytest.warns(DrawnReferenceWarning, match="first call brought 1 distinct config"):
            alone = model.rank(**graph, node_config_feat=configs[[first]])
        assert alone.scores[0] != 0
        later.append(model.rank(**graph, node_config_feat=configs[:80]).scores)
    np.testing.assert_array_equal(later[0], later[1])


def test_too_small_a_reference_is_an_error_saying_what_to_pass(trained_run, measured_graph,
                                                               tiny_npz):
    graph, configs, _ = measured_graph
    model = CostModel.load(trained_run)
    with pytest.raises(ValueError, match="reference= holds 3 distinct config.*pass at least 20"):
        model.rank(**graph, node_config_feat=configs[:50], reference=configs[:3])
    with np.load(list_npz(tiny_npz, "tile:xla", "test")[0]) as z:
        tile = {k: z[k] for k in ("node_feat", "node_opcode", "edge_index")}
        tiles = z["config_feat"]
    with pytest.raises(ValueError, match="first call .* holds 1 distinct config.*pass "
                                         "reference= with at least 2 distinct candidate tiles"):
        model.rank(**tile, config_feat=tiles[:1])
    assert model.rank(**tile, config_feat=tiles[:1], reference=tiles).order.tolist() == [0]


def test_update_says_what_became_of_the_measurements(trained_run, measured_graph):
    graph, configs, runtime = measured_graph
    model = CostModel.load(trained_run)
    model.rank(**graph, node_config_feat=configs)
    few = EffectsParams().min_measurements - 1
    result = model.update(**graph, node_config_feat=configs[:few], runtimes=runtime[:few])
    assert (result.measurements, result.used, result.weight) == (few, 0, 0.0)
    assert result.learner == "none" and result.reason.startswith("set aside: fewer than")
    result = model.update(**graph, node_config_feat=configs[few:40], runtimes=runtime[few:40])
    assert (result.measurements, result.used, result.learner) == (40, 40, "node effects")
    assert 0 < result.weight <= 1 and "weight" in result.reason


def test_the_genetic_row_is_the_stand_ins_runtime_of_the_files_fastest_measured_config(
        tmp_path):
    """What the dataset's search returned is the config the FILE measured fastest, judged by
    the stand-in (here: runtime = 1 + number of set slots), over the default's."""
    configs = np.full((4, 3, 18), -1, np.int8)
    configs[1, 0, :2], configs[2, :, :1], configs[3, 1, :4] = 0, 0, 0   # 2, 3, 4 slots set
    path = tmp_path / "g.npz"
    np.savez(path, node_config_feat=configs, config_runtime=np.array([9, 5, 1, 7]))

    class StandIn:
        default_runtime = 1.0

        def runtime(self, c):
            return 1.0 + (c >= 0).sum(axis=(1, 2))

    assert genetic_best(StandIn(), path) == 4.0      # the file's fastest (row 2), not row 1


def test_the_stand_ins_quirks_are_a_fixed_normal_effect_per_set_node_group_and_layout():
    """Each (node, slot group, layout) a config sets adds its own N(0, sd^2) log runtime, the
    same every time; the compiler default adds nothing; effects of disjoint groups add."""
    nc, sd, key = 400, 0.01, np.uint64(12345)
    default = np.full((1, nc, 18), -1, np.int8)
    assert quirk_sum(default, sd, key)[0] == 0.0
    one = np.full((3 * nc, nc, 18), -1, np.int8)          # each config sets one group alone
    for i in range(3 * nc):
        one[i, i // 3, 6 * (i % 3):6 * (i % 3) + 2] = (1, 0)
    effects = quirk_sum(one, sd, key)
    assert abs(effects.mean()) < 4 * sd / np.sqrt(effects.size)
    assert 0.9 < effects.std() / sd < 1.1
    assert 0.03 < np.mean(np.abs(effects) > 1.96 * sd) < 0.07      # normal tails, not uniform
    assert np.corrcoef(effects, quirk_sum(one, sd, np.uint64(54321)))[0, 1] < 0.15
    swapped = one.copy()
    swapped[swapped == 1], swapped[one == 0] = 0, 1        # the same groups, another layout
    assert np.corrcoef(effects, quirk_sum(swapped, sd, key))[0, 1] < 0.15
    both = np.maximum(one[:1], one[5:6])                   # node 0's output, node 1's kernel
    assert quirk_sum(both, sd, key)[0] == pytest.approx(effects[0] + effects[5])
    np.testing.assert_array_equal(quirk_sum(one, sd, key), effects)


def test_the_stand_in_measures_configs_beyond_its_files_without_warning(trained_run, tiny_npz,
                                                                          tmp_path):
    """Its tables follow its file's configs by design, and a search sets sections they never
    set: the coverage warning a user's own reference deserves is noise in every live-search
    log. Here the file's configs never set node 0's output layout; the search's do."""
    source = list_npz(tiny_npz, "layout:xla:default", "valid")[0]
    with np.load(source) as z:
        arrays = dict(z)
    arrays["node_config_feat"][:, 0, :6] = -1
    path = tmp_path / "layout" / "xla" / "default" / "valid" / source.name
    path.parent.mkdir(parents=True)
    np.savez(path, **arrays)
    model = CostModel.load(trained_run)
    hw = Hardware(model, path)
    space = LayoutSpace.of_graph(*(getattr(hw.graph, k) for k in GRAPH_KEYS[:4]))
    searched = space.random(np.random.default_rng(0), 30)
    assert (searched[:, 0, :6] >= 0).any()
    with pytest.warns(ReferenceCoverageWarning):      # the same configs through the model itself
        model.rank(**hw.graph.kwargs(), node_config_feat=searched,
                   reference=hw.parts[0].reference, collection=hw.parts[0].collection)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReferenceCoverageWarning)
        assert np.isfinite(hw.runtime(searched)).all()


def test_a_quirked_stand_in_adds_its_quirks_to_the_same_stand_ins_runtime(trained_run, tiny_npz,
                                                                          tmp_path, capsys):
    """The quirks shift the stand-in's log runtime by their sum, drawn anew for another
    quirk seed or graph; `measure --quirks` prints the quirked runtimes."""
    path, other = list_npz(tiny_npz, "layout:xla:default", "valid")[:2]
    with np.load(path) as z:
        configs = z["node_config_feat"][:20].astype(np.int8)
    model = CostModel.load(trained_run)
    plain = Hardware(model, path)
    quirked = Hardware(model, path, quirks=0.02, quirk_seed=3)
    shift = np.log(quirked.runtime(configs) / plain.runtime(configs))
    np.testing.assert_allclose(shift, quirk_sum(configs, 0.02, quirked.quirk_key), atol=1e-9)
    assert np.abs(shift).max() > 0.005
    keys = {quirked.quirk_key, plain.quirk_key,
            Hardware(model, path, quirks=0.02, quirk_seed=-4).quirk_key,
            Hardware(model, other, quirks=0.02, quirk_seed=3).quirk_key}
    assert len(keys) == 4
    np.save(tmp_path / "c.npy", configs)
    assert hardware_main(["measure", "--run", str(trained_run), "--graph", str(path), "--noise",
                          "0", "--quirks", "0.02", "--quirk-seed", "3",
                          str(tmp_path / "c.npy")]) == 0
    printed = np.array(capsys.readouterr().out.split(), float)
    np.testing.assert_allclose(printed, quirked.runtime(configs), rtol=1e-5)


def test_a_live_search_refuses_an_unwritable_out_before_searching(tmp_path, capsys):
    """--out under a file is one line and exit 2 before anything is loaded (the runs named
    here do not exist: reaching them would be another error)."""
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "r.json"
    code = pipeline.main(["live-search", "--run", str(tmp_path / "no-run"), "--hardware",
                          str(tmp_path), "--data-dir", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"cannot write {out}" in err and "is a file" in err


@pytest.mark.parametrize("what", ["run", "hardware", "data"])
def test_a_live_search_names_a_missing_input_in_one_line(what, trained_run, tmp_path, capsys):
    """A run that is not one, or a data directory with no TpuGraphs tree: one line naming it
    and exit 2, before any search (a stale run is refused the same way, by CostModel.load)."""
    given = {"run": trained_run, "hardware": trained_run, "data": trained_run.parent}
    given[what] = tmp_path / "nothing"
    code = pipeline.main(["live-search", "--run", str(given["run"]), "--hardware",
                          str(given["hardware"]), "--data-dir", str(given["data"])])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: ") and str(tmp_path / "nothing") in err


@pytest.mark.slow
def test_the_live_searchs_budgets_and_bound_are_judged_by_the_stand_in(trained_run, tiny_npz):
    """At a budget below the whole, a search counts the best measured among its first N
    measurements, at the whole budget its confirmed best, each as the stand-in's noiseless
    runtime over the default's; the bound's model is the stand-in's own runtime; the held-out
    check scores unmeasured configs only, frozen and updated alike."""
    from features.graph.layout_space import config_keys
    from models.evaluation.live_search import (Exact, found_at, near_check, near_configs,
                                               one_search, scored)
    path = list_npz(tiny_npz, "layout:xla:default", "valid")[0]
    model = CostModel.load(trained_run)
    hw = Hardware(model, path)
    settings = TuneSettings()
    configs = LayoutSpace.of_graph(*(getattr(hw.graph, k) for k in GRAPH_KEYS[:4])).random(
        np.random.default_rng(1), 12)
    scores, spread = Exact(hw).score(configs)
    np.testing.assert_allclose(scores, -np.log(hw.runtime(configs)), rtol=1e-9)
    assert (spread == 0).all()
    result, taught = one_search(model, hw, "updated", 16, 0, "layout:xla:default", settings)
    found = found_at(hw, result, [5, 10, 16])
    for n, value in zip((5, 10), found):
        first = result.configs[int(np.argmin(result.runtimes[:n]))]
        assert value == pytest.approx(hw.runtime(first[None])[0] / hw.default_runtime)
    assert found[2] == pytest.approx(hw.runtime(result.best[None])[0] / hw.default_runtime)
    assert taught is not None
    near = near_check(model, taught, hw, result, "layout:xla:default", 0, settings)
    space = LayoutSpace.of_graph(*(getattr(hw.graph, k) for k in GRAPH_KEYS[:4]))
    configs = near_configs(space, result, 0)
    assert near["configs"] == len(configs) >= 20
    assert not set(config_keys(configs)) & set(config_keys(result.configs))
    faster = -np.log(hw.runtime(configs))
    # the reference tune_graph gave the search (for this CNN graph, grown by the model's own
    # search): the frozen model's view is scored with it
    reference = model_reference(CostModel.load(trained_run), hw.graph, space, settings, 0,
                                "layout:xla:default")
    by = {}
    for name, m in (("frozen", CostModel.load(trained_run)), ("updated", taught)):
        by[name] = m.rank(**hw.graph.kwargs(), node_config_feat=configs, reference=reference,
                          collection="layout:xla:default").scores
        assert near[name] == pytest.approx(kendall_tau_b(by[name], faster))
        np.testing.assert_allclose(scored(m, hw, configs, reference, "layout:xla:default"),
                                   by[name], rtol=1e-12)
    assert not np.allclose(by["frozen"], by["updated"])     # what the search taught counts
    bound, none = one_search(model, hw, "bound", 16, 0, "layout:xla:default", settings)
    assert none is None and len(bound.runtimes) <= 16


def test_the_live_searchs_model_kendall_is_the_models_order_of_the_files_configs(trained_run,
                                                                               tiny_npz):
    """Before any measurement: Kendall of the tuner's scores of the file's configs against the
    stand-in's runtimes, 1 when the tuner's model is the stand-in's own."""
    from features.graph.layout_space import reference_configs
    from models.evaluation.live_search import FILE_CONFIGS, file_configs, model_kendall
    path = list_npz(tiny_npz, "layout:xla:default", "valid")[0]
    model = CostModel.load(trained_run)
    hw = Hardware(model, path)
    with np.load(path) as z:
        configs = z["node_config_feat"].astype(np.int8)
    scores = model.rank(**hw.graph.kwargs(), node_config_feat=configs,
                        collection="layout:xla:default").scores
    assert np.array_equal(file_configs(path), configs[:FILE_CONFIGS])
    value = model_kendall(model, hw, file_configs(path), "layout:xla:default")
    assert value == pytest.approx(kendall_tau_b(scores, -np.log(hw.runtime(configs))))
    # the stand-in from one collection's model alone is that model's order, recalibrated
    default = model.trained.models["layout:xla:default"]
    alone = CostModel(replace(model.trained, models={"layout:xla:default": default}))
    assert model_kendall(alone, Hardware(alone, path), configs, "layout:xla:default") == \
        pytest.approx(1.0)
    space = LayoutSpace.of_graph(*(getattr(hw.graph, k) for k in GRAPH_KEYS[:4]))
    reference = reference_configs(space, TuneSettings().reference, 0)   # any reference
    searched = fresh(model).rank(**hw.graph.kwargs(), node_config_feat=configs,
                                 reference=reference, collection="layout:xla:default").scores
    assert model_kendall(model, hw, configs, "layout:xla:default", reference) == \
        pytest.approx(kendall_tau_b(searched, -np.log(hw.runtime(configs))))
    assert not np.allclose(searched, scores)       # the reference sets the graph's statistics


def test_a_live_search_whose_fold_rows_cannot_be_built_ends_in_one_line(trained_run, tiny_npz,
                                                                        tmp_path, capsys):
    """--folds builds the train graphs' rows under --cache-dir: a cache directory under a file
    is one line naming it and exit 2, nothing written, no traceback."""
    (tmp_path / "file").write_text("x")
    out = tmp_path / "r.json"
    code = pipeline.main(["live-search", "--run", str(trained_run), "--hardware",
                          str(trained_run), "--data-dir", str(tiny_npz), "--folds", "2",
                          "--cache-dir", str(tmp_path / "file" / "cache"), "--budget", "3",
                          "--seeds", "0", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out.exists()
    assert err.startswith("error: ") and str(tmp_path / "file") in err


def test_a_live_search_counts_the_kept_defaults_by_why():
    """Each search's kept defaults, counted by Verdict.cause over graphs and seeds, in the
    summary and its table; a search whose record has no causes (older results) shows '-'."""
    from models.evaluation.live_search import summarise
    from models.reporting.live_search_table import format_table
    graphs = [{"family": "bert", "genetic": 0.9, "updated": [1.0, 0.95],
               "updated_kept": ["mispredicted", None]},
              {"family": "bert", "genetic": 0.9, "updated": [1.0, 1.0],
               "updated_kept": ["unconfirmed", "mispredicted"]}]
    summary = summarise(graphs, [0, 1], ["updated"])
    assert summary["updated"]["kept_default"] == {"unconfirmed": 1, "mispredicted": 2,
                                                  "none predicted": 0}
    table = format_table({"budget": 100, "seeds": [0, 1], "searches": ["updated"],
                          "families": {"bert": {**summary, "graphs": graphs}}})
    row = next(line for line in table.splitlines() if line.startswith("bert (2)"))
    assert row.endswith("1 / 2 / 0") and "kept default" in table
    del summary["updated"]["kept_default"]
    table = format_table({"budget": 100, "seeds": [0, 1], "searches": ["updated"],
                          "families": {"bert": {**summary, "graphs": graphs}}})
    assert next(line for line in table.splitlines() if line.startswith("bert (2)")).endswith("-")
