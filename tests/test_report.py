"""`report` and the data a run keeps for it: HTML, images, references, per-round history, gain."""
from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib import image
from scipy import stats

import features
import pipeline
from features import FeatureConfig, FeatureSet
from features.npz.find import list_npz
from features.schema import collection_slug
from models.training import RANKERS, diagnostics
from models import metrics
from models.training.base import apply_overrides
from models.training.diagnostics import default_first_per_graph
from models.training.lgbm import LambdaRank
from models.reporting import figures
from models.reporting import report as report_module
from models.training.run_record import RunRecord

from .conftest import make_ranking


def _decode(png: bytes) -> np.ndarray:
    return image.imread(io.BytesIO(png), format="png")


@pytest.fixture(scope="module")
def report(trained, trained_run, tmp_path_factory):
    cache, _ = trained
    out = tmp_path_factory.mktemp("report")
    assert pipeline.main(["report", "--run", str(trained_run), "--out", str(out),
                          "--cache-dir", str(cache)]) == 0
    return out, (out / "report.html").read_text(), json.loads(
        (trained_run / "run.json").read_text())


def test_report_images_are_embedded_and_decode(report):
    out, html, _ = report
    embedded = re.findall(r"<img [^>]*src='([^']*)'", html)
    files = sorted(out.glob("*.png"))
    assert len(embedded) == len(files) >= 1 + 5 * 3
    assert all(src.startswith("data:image/png;base64,") for src in embedded)
    on_disk = {f.read_bytes() for f in files}
    for src in embedded:
        png = base64.b64decode(src.split(",", 1)[1])
        assert png in on_disk
        pixels = _decode(png)
        assert pixels.ndim == 3 and min(pixels.shape[:2]) > 100 and np.ptp(pixels) > 0.5
    assert json.loads((out / "report.json").read_text())["files"][0] == "report.html"


def test_report_tables_list_every_collection_with_the_run_scores(report):
    _, html, record = report
    summary = html[html.index("<table>"):html.index("</table>")]
    rows = re.findall(r"<tr><td><a href='#([^']+)'>.*?</tr>", summary)
    assert rows == list(record["metrics"])
    for collection, m in record["metrics"].items():
        row = re.search(rf"<tr><td><a href='#{collection}'>.*?</tr>", summary).group(0)
        cells = re.findall(r"<td>([^<]*)</td>", row)
        assert cells[1:4] == [str(m["n_scored"]), str(len(m["unscored"])), f"{m['mean']:.3f}"]
        assert f"<h2 id='{collection}'>" in html


@pytest.mark.slow
def test_a_failing_graph_is_flagged_and_listed_first(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run, ignore=shutil.ignore_patterns("report"))
    record = json.loads((run / "run.json").read_text())
    per_graph = record["metrics"]["layout:xla:random"]["per_graph"]
    victim = max(per_graph, key=per_graph.get)
    per_graph[victim] = -0.5
    (run / "run.json").write_text(json.dumps(record))
    assert pipeline.main(["report", "--run", str(run), "--cache-dir", str(tmp_path)]) == 0
    html = (run / "report" / "report.html").read_text()
    section = html[html.index("<h2 id='layout:xla:random'>"):]
    first = re.search(r"<tr class='([^']*)'><td>([^<]*)</td><td class='name'>([^<]*)</td>",
                      section)
    assert first.groups() == ("fail", "1", victim)
    row = re.search(r"<tr><td><a href='#layout:xla:random'>.*?</tr>", html).group(0)
    assert re.findall(r"<td>([^<]*)</td>", row)[6] == "1"


def test_compiler_default_first_reference():
    # Layout: default configs (rows 1 and 3) first, then file order.
    data = FeatureSet(X=np.zeros((5, 1), np.float32), runtime=np.array([5., 1., 4., 2., 3.]),
                      config_idx=np.array([0, 2, 5, 7, 9]), dup_count=np.ones(5, np.int32),
                      ptr=np.array([0, 5]), graph_ids=("g",), collection="layout:xla:default",
                      columns=("f",))
    is_default = np.array([False, True, False, True, False])
    position = np.array([2, 0, 3, 1, 4])
    want = stats.kendalltau(position, data.runtime).statistic
    assert default_first_per_graph(data, is_default)[0] == pytest.approx(want)
    assert np.isnan(default_first_per_graph(data, None)[0])
    # Tile: the default's runtime / normalizer is 1; the best candidate here is 0.8.
    tile = FeatureSet(X=np.zeros((3, 1), np.float32), runtime=np.array([1.2, 0.8, 2.0]),
                      config_idx=np.arange(3), dup_count=np.ones(3, np.int32),
                      ptr=np.array([0, 3]), graph_ids=("t",), collection="tile:xla",
                      columns=("f",))
    assert default_first_per_graph(tile, None)[0] == pytest.approx(2 - 1 / 0.8)


@pytest.mark.parametrize("split", ["train", "valid"])
def test_default_rows_are_the_all_minus_one_configs_of_the_files(trained, tiny_npz, split):
    cache, _ = trained
    entry, _ = features.build_entry(tiny_npz, "layout:xla:default", split, FeatureConfig(), cache)
    data, got = features.load_entry(entry), features.default_config_rows(entry)
    for g, f in enumerate(list_npz(tiny_npz, "layout:xla:default", split)):
        with np.load(f) as z:
            ncf = z["node_config_feat"]
        rows = slice(data.ptr[g], data.ptr[g + 1])
        want = (ncf[data.config_idx[rows]] == -1).all(axis=(1, 2))
        np.testing.assert_array_equal(got[rows], want)
    assert got.sum() > 0


def test_tile_rows_are_never_default(trained, tiny_npz):
    cache, _ = trained
    entry, _ = features.build_entry(tiny_npz, "tile:xla", "valid", FeatureConfig(), cache)
    got = features.default_config_rows(entry)
    assert got.shape == (features.load_entry(entry).X.shape[0],) and not got.any()


def test_history_and_gain_agree_with_the_saved_models(trained_run):
    record = json.loads((trained_run / "run.json").read_text())
    for collection, m in record["metrics"].items():
        folder = trained_run / collection_slug(collection)
        diag = json.loads((folder / "diagnostics.json").read_text())
        h = diag["history"][0]
        at_best = h["score"][h["rounds"].index(h["best_iteration"])]
        # the ranker's own rounds: its score before a node learner is averaged in
        assert at_best == pytest.approx(m["ranker_seed_means"][0], abs=1e-9)
        boosters = [LambdaRank.load(folder / f"seed-{i}").booster_
                    for i in range(record["train_config"]["seeds"])]
        share = np.mean([b.feature_importance("gain") / b.feature_importance("gain").sum()
                         for b in boosters], axis=0)   # each seed's shares, averaged
        names = [n.replace("__", ".") for n in boosters[0].feature_name()]
        want = {n: g for n, g in zip(names, share) if g > 0}
        assert diag["gain_share"] == pytest.approx(want)
        assert list(diag["gain_share"]) == sorted(want, key=lambda n: -want[n])


def test_history_is_scored_on_the_first_whole_graphs_within_its_row_budget(rng, monkeypatch):
    train, valid = make_ranking(rng, [80] * 6), make_ranking(rng, [60, 50, 70, 40])
    model = LambdaRank(apply_overrides(RANKERS["lambdarank"][1]["layout"],
                                       {"n_estimators": 20, "early_stopping": 5})).fit(train, valid)
    monkeypatch.setattr(diagnostics, "HISTORY_ROWS", 130)     # graphs of 60 + 50 rows fit
    h = diagnostics.metric_by_round([model], valid)[0]
    first = valid.take_graphs(np.arange(2))
    final = metrics.collection_score(metrics.per_graph_scores(
        first.collection, model.predict(first), first.runtime, first.ptr))
    assert h["graphs"] == 2 and h["score"][h["rounds"].index(model.best_iteration_)] == \
        pytest.approx(final, abs=1e-9)
    monkeypatch.setattr(diagnostics, "HISTORY_ROWS", 10)      # never fewer than one graph
    assert diagnostics.metric_by_round([model], valid)[0]["graphs"] == 1


@pytest.mark.parametrize("ranker", sorted(RANKERS))
def test_round_scores_at_the_stopping_round_rank_like_predict(ranker, rng):
    cls, defaults = RANKERS[ranker]
    train, valid = make_ranking(rng, [80] * 6), make_ranking(rng, [60] * 3)
    model = cls(apply_overrides(defaults["layout"], {"n_estimators": 40,
                                                     "early_stopping": 5})).fit(train, valid)
    rounds, scores = model.round_scores(valid, points=7)
    assert rounds[-1] >= model.best_iteration_ and len(rounds) <= 9
    at_best = scores[rounds.index(model.best_iteration_)]
    # XGBoost's block sums repeat its base score: equal up to one shift, as the metric sees.
    shift = at_best - model.predict(valid)
    np.testing.assert_allclose(shift, shift.mean(), atol=1e-5)
    gain = model.gain_importance()
    assert gain.shape == (train.X.shape[1],) and gain[:2].sum() > gain[2:].sum()


def _edited_run(trained_run, tmp_path, edit_record=None, edit_diag=None) -> Path:
    """A copy of the trained run with its run.json (and a collection's diagnostics.json)
    changed, the way another run's data would read."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run, ignore=shutil.ignore_patterns("report"))
    record = json.loads((run / "run.json").read_text())
    if edit_record:
        edit_record(record)
    (run / "run.json").write_text(json.dumps(record))
    for collection, edit in (edit_diag or {}).items():
        path = run / collection_slug(collection) / "diagnostics.json"
        diag = json.loads(path.read_text())
        edit(diag)
        path.write_text(json.dumps(diag))
    return run


def _section(run, collection):
    return report_module.gather(run, collection, RunRecord.read(run))


LONG = "inception_v3_batch_8_train_"   # > 100 dev tile kernels share this prefix


def _tile_like_spread(record):
    """tile:xla as on the dev set: the model within 0.94-1.0, references down to -7, and
    graph names that share a long prefix."""
    m = record["metrics"]["tile:xla"]
    renamed = {g: f"{LONG}{i:016x}" for i, g in enumerate(m["per_graph"])}
    for key in ("per_graph", "random_per_graph", "default_per_graph"):
        m[key] = {renamed[g]: v for g, v in m[key].items()}
    graphs = list(renamed.values())
    m["per_graph"] = dict(zip(graphs, np.linspace(0.94, 1.0, len(graphs)).tolist()))
    m["random_per_graph"] = dict(zip(graphs, [-7.0] + [0.97] * (len(graphs) - 1)))
    m["default_per_graph"] = dict(zip(graphs, [0.99] + [-6.5] * (len(graphs) - 1)))
    m["unscored"] = []
    return renamed


def _renamed_predictions(run, renamed):
    path = run / "tile-xla" / "valid_predictions.parquet"
    preds = pl.read_parquet(path)
    preds.with_columns(pl.col("graph_id").replace(renamed)).write_parquet(path)


@pytest.mark.slow
def test_the_per_graph_axis_spans_the_model_with_references_on_its_edge(trained_run,
                                                                        tmp_path):
    renamed = {}
    run = _edited_run(trained_run, tmp_path, lambda r: renamed.update(_tile_like_spread(r)))
    _renamed_predictions(run, renamed)
    s = _section(run, "tile:xla")
    ax = report_module.section_figures(s)["per_graph"].axes[0]
    lo, hi = ax.get_ylim()
    assert 0.9 < lo < 0.94 and 1.0 < hi < 1.02   # the model's 0.94-1.0, not the -7 reference
    lines = {line.get_label(): line for line in ax.get_lines()}
    n = len(renamed)
    below_random = next(v for k, v in lines.items() if k.startswith("random order: 1 below"))
    below_default = next(v for k, v in lines.items()
                         if k.startswith(f"compiler default first: {n - 1} below"))
    assert list(below_random.get_ydata()) == [lo] and list(below_random.get_xdata()) == [1]
    assert list(below_default.get_ydata()) == [lo] * (n - 1)
    assert list(lines["model"].get_ydata()) == pytest.approx(np.linspace(0.94, 1.0, n))
    # Numbered as in the table, where every graph has its full name.
    assert pipeline.main(["report", "--run", str(run), "--cache-dir", str(tmp_path)]) == 0
    html = (run / "report" / "report.html").read_text()
    section = html[html.index("<h2 id='tile:xla'>"):html.index("<h2 id='layout")]
    rows = re.findall(r"<tr class='[^']*'><td>(\d+)</td><td class='name'>([^<]*)</td>", section)
    assert rows[:n] == [(str(i + 1), g) for i, g in enumerate(renamed.values())]
    assert "1 random-order and " + str(n - 1) + " compiler-default reference scores lie " \
        "beyond it" in section


def test_best_and_worst_titles_carry_full_graph_names(trained_run, tmp_path):
    renamed = {}
    run = _edited_run(trained_run, tmp_path, lambda r: renamed.update(_tile_like_spread(r)))
    _renamed_predictions(run, renamed)
    fig = report_module.section_figures(_section(run, "tile:xla"))["predicted_vs_measured"]
    titles = [" ".join(ax.get_title().split()) for ax in fig.axes]
    graphs = list(renamed.values())
    assert titles[0].startswith(f"best graph #{len(graphs)} {graphs[-1]} (top-5 score 1.000, ")
    assert titles[1].startswith(f"worst graph #1 {graphs[0]} (top-5 score 0.940, ")


@pytest.mark.slow
def test_unscored_graphs_are_listed_apart_from_the_scored(trained_run, tmp_path):
    def unscore(record):
        m = record["metrics"]["layout:xla:random"]
        victim = next(iter(m["per_graph"]))
        m["per_graph"][victim] = None
        m["unscored"] = [victim]
        unscored.append(victim)
    unscored = []
    run = _edited_run(trained_run, tmp_path, unscore)
    assert pipeline.main(["report", "--run", str(run), "--cache-dir", str(tmp_path)]) == 0
    html = (run / "report" / "report.html").read_text()
    section = html[html.index("<h2 id='layout:xla:random'>"):]
    section = section[:section.index("<h2", 5)]
    assert (f"Unscored (1; one config or equal runtimes, not in the mean): {unscored[0]}</p>"
            in section)
    assert f"<td class='name'>{unscored[0]}</td>" not in section
    row = re.search(r"<tr><td><a href='#layout:xla:random'>.*?</tr>", html).group(0)
    assert re.findall(r"<td>([^<]*)</td>", row)[2] == "1"


@pytest.mark.parametrize("rounds, capped", [(35, True), (20, False)])
@pytest.mark.slow
def test_the_round_curve_states_its_graphs_and_whether_the_cap_stopped_it(
        trained_run, tmp_path, rounds, capped):
    collection = "layout:nlp:random"

    def set_rounds(record):
        record["metrics"][collection]["rounds"] = [rounds]
        record["params"][collection].update(n_estimators=40, early_stopping=10)

    def first_graph_only(diag):
        diag["history"][0]["graphs"] = 1
    run = _edited_run(trained_run, tmp_path, set_rounds, {collection: first_graph_only})
    s = _section(run, collection)
    total = len(s.summary["per_graph"])
    assert total > 1
    ax = report_module.section_figures(s)["metric_by_round"].axes[0]
    assert ax.get_title() == f"scored on the first 1 of {total} validation graphs (file " \
                             f"order; as many as fit in 20,000 rows, since every point " \
                             f"predicts them again)"
    cap_line = next(line for line in ax.get_lines() if "round cap" in line.get_label())
    if capped or len(cap_line.get_xdata()):     # drawn where it ended training or is near
        assert list(cap_line.get_xdata()) == [40, 40]
    else:
        assert "beyond the last round shown" in cap_line.get_label()
    assert cap_line.get_label().endswith("ended seed 0") == capped
    assert pipeline.main(["report", "--run", str(run), "--cache-dir", str(tmp_path)]) == 0
    html = " ".join((run / "report" / "report.html").read_text().split())
    assert f"Scored on the first 1 of {total} validation graphs" in html
    said = ("seed 0 was best at round 35, less than 10 rounds before the cap of 40: the cap, "
            "not early stopping, ended it" if capped else
            "seed 0 stopped early, keeping 20 of at most 40 rounds")
    assert said in html


def test_every_sample_size_is_stated(report):
    _, html, record = report
    html = " ".join(html.split())
    for collection, m in record["metrics"].items():
        section = html[html.index(f"<h2 id='{collection}'>"):]
        n = len(m["per_graph"])
        assert f"{n} validation graphs: {m['n_scored']} scored, {len(m['unscored'])} unscored" \
            in section
        rule = ("every config of every graph" if collection == "tile:xla" else
                "at most 1,000 configs per graph, sampled like the test files")
        assert rule in section.split("</p>")[0]
        assert "random order is the mean of 5 random orders of the graph" in section
        assert re.search(r"The \d+ of the \d+ features with any gain", section)


def _legend_overlaps_axes(fig) -> bool:
    fig.canvas.draw()
    boxes = [legend.get_window_extent() for legend in fig.legends + [
        ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]]
    return any(box.overlaps(ax.get_window_extent()) for box in boxes for ax in fig.axes)


def test_the_time_legend_covers_no_bar(trained_run):
    """It sat inside the axes, over the longest (last) bar: layout:nlp:random's."""
    fig = figures.stage_times(report_module.stage_seconds(RunRecord.read(trained_run)))
    assert fig.legends and not _legend_overlaps_axes(fig)


def test_the_round_axis_ends_where_the_curves_do():
    """Curves ending by round 25 under a cap of 300 were squashed into a twelfth of the axis."""
    history = [{"seed": s, "rounds": list(range(1, 26)), "score": [0.5] * 25,
                "best_iteration": 19 + s, "graphs": 12} for s in range(3)]
    fig = figures.metric_by_round(history, "top-5 score", "all 12 graphs", 300, [])
    ax = fig.axes[0]
    assert 25 <= ax.get_xlim()[1] < 30 and not _legend_overlaps_axes(fig)
    cap = next(line for line in ax.get_lines() if "round cap" in line.get_label())
    assert "n_estimators=300" in cap.get_label() and "beyond" in cap.get_label()
    fig = figures.metric_by_round(history, "top-5 score", "all 12 graphs", 28, [1])
    assert fig.axes[0].get_xlim()[1] >= 28                    # a cap in reach is drawn


def test_the_tile_default_column_says_what_its_numbers_are(report):
    """Tile 'compiler default first' scores of -37.6 or -292.9 beside a best of 1: each cell
    gives the default's runtime over the fastest's, and the note says how the score follows."""
    _, html, _ = report
    section = html[html.index("<h2 id='tile:xla'>"):html.index("<h2 id='layout:")]
    cells = re.findall(r"<td>(-?\d+\.\d+) <span class='note'>\(([\d.e+]+)&times; the fastest\)",
                       section)
    assert cells and all(float(ratio) == pytest.approx(2 - float(score), rel=2e-3, abs=2e-3)
                         for score, ratio in cells)
    assert "scored 2 - (its runtime / the fastest config's)" in " ".join(html.split())

