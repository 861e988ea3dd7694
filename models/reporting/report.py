"""`pipeline.py report`: a trained run as one self-contained HTML page plus its PNG figures.

Per collection: every scored validation graph's score next to random order and 'compiler
default first' (defined in models/training/diagnostics.py), numbered from the model's worst and
named in full in the tables, on an axis spanning the model's scores (references beyond it are
drawn on its edge); the unscored graphs by name; predicted score vs measured runtime of the best
and the worst graph; the features with the most gain; the validation metric per boosting round,
with the graphs it is scored on and whether the round cap ended training; and, for the whole run,
where the time went. Every subset and cap is stated where it applies. Written atomically to
<run>/report/ with report.json saying what it was made from.
"""
from __future__ import annotations

import base64
import html
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from features.cache.store import atomic_dir
from features.outputs import check_dir
from features.schema import collection_kind, collection_slug

from models.training import diagnostics
from models.reporting import figures
from models import metrics
from models.metrics import METRIC_NAME
from models.training.run_record import RunRecord
from models.training.runs import N_RANDOM_ORDERS

WORST_ROWS = 15   # graph table rows shown per collection; the rest fold out, the figure has all
TOP_FEATURES = 20


@dataclass
class Section:
    collection: str
    graphs: pl.DataFrame    # scored graphs: graph_id, model, random, default_first, failing;
                            # the model's worst first, numbered 1.. in that order
    unscored: list[str]     # graphs without a score (one config or equal runtimes)
    predictions: pl.DataFrame
    diag: dict
    summary: dict
    params: dict            # the ranker's settings for this collection (run.json "params")
    settings: dict          # the feature settings (run.json features.settings)

    @property
    def kind(self) -> str:
        return collection_kind(self.collection)

    @property
    def limits(self) -> tuple[float, float]:
        """The per-graph figure's y-axis: the model's scores, not the references'."""
        g = self.graphs
        return figures.model_span(g["model"].to_numpy(), np.r_[g["random"].to_numpy(),
                                                              g["default_first"].to_numpy()])


def gather(run_dir: Path, collection: str, record: RunRecord) -> Section:
    summary = record.metrics[collection]
    preds, diag = diagnostics.read(Path(run_dir) / collection_slug(collection))
    ids = list(summary["per_graph"])
    default = summary.get("default_per_graph") or {}
    graphs = pl.DataFrame({
        "graph_id": ids,
        "model": _floats(summary["per_graph"][g] for g in ids),
        "random": _floats(summary["random_per_graph"][g] for g in ids),
        "default_first": _floats(default.get(g) for g in ids)})
    best_ref = np.fmax(graphs["random"].to_numpy(), graphs["default_first"].to_numpy())
    # Strictly below: a tile model whose pick ties a default tile that is itself the best is fine.
    graphs = graphs.with_columns(failing=pl.Series(graphs["model"].to_numpy() < best_ref))
    scored = graphs.filter(pl.col("model").is_not_nan()).sort("model")
    return Section(collection, scored.with_row_index("number", offset=1),
                   graphs.filter(pl.col("model").is_nan())["graph_id"].to_list(), preds, diag,
                   summary, record.params[collection], record.features.settings)


def _floats(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], np.float64)


def section_figures(s: Section) -> dict[str, Figure]:
    g, metric = s.graphs, METRIC_NAME[s.kind]
    out = {"per_graph": figures.per_graph_scores(
        g["model"].to_numpy(), g["random"].to_numpy(), g["default_first"].to_numpy(),
        g["failing"].to_numpy(), metric, s.limits)}
    if g.height:
        picks = [("best", g[-1]), ("worst", g[0])]
        out["predicted_vs_measured"] = figures.predicted_vs_measured(
            [_panel(s, label, row) for label, row in picks],
            "runtime / normalizer" if s.kind == "tile" else "measured runtime")
    if s.diag["gain_share"]:
        out["top_features"] = figures.top_features(s.diag["gain_share"], TOP_FEATURES)
    if s.diag["history"]:
        capped = [seed for seed, rounds in enumerate(s.summary["rounds"])
                  if _cap_ended(rounds, s.params)]
        out["metric_by_round"] = figures.metric_by_round(
            s.diag["history"], metric, _history_graphs(s), s.params["n_estimators"], capped)
    return out


def _panel(s: Section, label: str, row: pl.DataFrame):
    gid, value = row["graph_id"][0], row["model"][0]
    rows = s.predictions.filter(pl.col("graph_id") == gid)
    return (f"{label} graph #{row['number'][0]} {gid} ({METRIC_NAME[s.kind]} {value:.3f}, "
            f"{rows.height} configs)", rows["score"].to_numpy(), rows["runtime"].to_numpy(),
            rows["is_default"].to_numpy())


def _cap_ended(rounds: int, params: dict) -> bool:
    """Whether the round cap, not early stopping, ended the fit that chose `rounds`: stopping
    takes `early_stopping` rounds without gain after the best, which did not fit under it."""
    return rounds + params["early_stopping"] > params["n_estimators"]


def _history_graphs(s: Section) -> str:
    """Which validation graphs the per-round curve is scored on."""
    shown, total = s.diag["history"][0]["graphs"], len(s.summary["per_graph"])
    if shown >= total:
        return f"all {total} validation graphs"
    return (f"the first {shown} of {total} validation graphs (file order; as many as fit in "
            f"{diagnostics.HISTORY_ROWS:,} rows, since every point predicts them again)")


def stage_seconds(record: RunRecord) -> dict[str, dict[str, float]]:
    """Per collection: feature builds (of the cache entries used) and the training stages."""
    build = record.features.build_seconds
    return {c: {"features train": (build.get(c) or {}).get("train"),
                "features valid": (build.get(c) or {}).get("valid"), **m.get("stages", {})}
            for c, m in record.metrics.items()}


def write_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """Write report.html, its PNGs and report.json; returns the HTML file's path."""
    run_dir = Path(run_dir)
    out_dir = check_dir(Path(out_dir) if out_dir else run_dir / "report", replaced=True)
    record = RunRecord.read(run_dir)
    sections = [gather(run_dir, c, record) for c in record.collections]
    images = {"stage_times": figures.png(figures.stage_times(stage_seconds(record)))}
    for s in sections:
        images.update({f"{collection_slug(s.collection)}-{k}": figures.png(fig)
                       for k, fig in section_figures(s).items()})
    tuning = _tune_sim(run_dir)
    if tuning:
        images["tune_sim"] = figures.png(figures.tuning_curves(tuning["collections"],
                                                               tuning["settings"]["budgets"]))
    with atomic_dir(out_dir) as tmp:
        for name, png in images.items():
            (tmp / f"{name}.png").write_bytes(png)
        (tmp / "report.html").write_text(render(run_dir, record, sections, images, tuning))
        (tmp / "report.json").write_text(json.dumps(
            {"run": str(run_dir), "run_created": record.created,
             "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             "files": ["report.html"] + [f"{n}.png" for n in images]}, indent=1))
    return out_dir / "report.html"


# ---------------------------------------------------------------- HTML

CSS = """body{font-family:sans-serif;max-width:1060px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child,.name{text-align:left}
tr.fail td{background:#fde2e2}img{max-width:100%}h2{border-top:2px solid #ddd;padding-top:.6em}
.note{color:#555;font-size:90%}"""


def _tune_sim(run_dir: Path) -> dict | None:
    """The run's tune_sim.json (pipeline.py tune-sim), if it was simulated."""
    path = run_dir / "tune_sim.json"
    result = json.loads(path.read_text()) if path.is_file() else None
    return result if result and result["collections"] else None


def _tune_sim_html(tuning: dict | None, images: dict) -> str:
    if tuning is None:
        return ""
    from models.reporting.tune_sim_table import format_table
    return "\n".join([
        "<h2>Autotuning simulation (tune-sim)</h2>", _img(images, "tune_sim"),
        f"<pre>{html.escape(format_table(tuning))}</pre>",
        f"<p class='note'>Rounds of {tuning['settings']['round_size']} measurements, the model "
        f"updated after each; random = the exact mean over all draws; data: "
        f"{html.escape(tuning['data'])}.</p>"])


def render(run_dir: Path, record: RunRecord, sections: list[Section], images: dict,
           tuning: dict | None = None) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Run report: "
             f"{html.escape(run_dir.name)}</title><style>{CSS}</style></head><body>",
             f"<h1>Run {html.escape(run_dir.name)}</h1>", _run_facts(record),
             "<h2>Validation by collection</h2>", _summary_table(sections),
             _default_note(record),
             "<h2>Where the time went</h2>", _img(images, "stage_times"),
             "<p class='note'>Feature builds are those of the cache entries this run used, "
             "possibly made by an earlier command.</p>"]
    for s in sections:
        parts += _section_html(s, images)
    return "\n".join(parts + [_tune_sim_html(tuning, images), "</body></html>"])


def _run_facts(record: RunRecord) -> str:
    sample = " (the generated sample)" if record.features.sample else ""
    return (f"<p>ranker <b>{html.escape(record.ranker)}</b>, seeds {record.seeds}, trained "
            f"{html.escape(record.created)}, git {html.escape(str(record.git))}; data "
            f"{html.escape(record.trained_on or '?')}{sample}"
            f"<br>final score (mean of collections): <b>{record.final:.4f}</b></p>")


def _default_note(record: RunRecord) -> str:
    sample = (" On the generated sample a tile file's normalizer is one random config's "
              "runtime, so there the 'default' tile is a random config."
              if record.features.sample else "")
    return ("<p class='note'>Compiler default first: layout, the configs that leave every slot "
            "at the compiler's default first, then file order (plain file order where a graph "
            "has no such config); tile, the default tile picked alone (runtime / normalizer = "
            "1: the normalizer is the default tile's runtime), scored 2 - (its runtime / the "
            "fastest config's), so a default 40&times; slower than the fastest scores -38; "
            f"tile cells give that ratio beside the score.{sample} A graph fails when the model "
            "scores below either reference.</p>")


def _default_cell(kind: str, x) -> str:
    """A 'compiler default first' cell; tile's adds the default's runtime over the fastest's,
    which its score (2 - that ratio) hides once the ratio is large (-292.9: 294.9x)."""
    if kind != "tile" or x is None or not np.isfinite(x):
        return _fmt(x)
    return f"{_fmt(x)} <span class='note'>({2 - x:.3g}&times; the fastest)</span>"


def _summary_table(sections: list[Section]) -> str:
    rows = ["<table><tr><th>collection</th><th>metric</th><th>graphs scored</th>"
            "<th>unscored</th><th>model</th><th>random order</th><th>compiler default first</th>"
            "<th>graphs failing</th><th>train s</th></tr>"]
    for s in sections:
        g = s.graphs
        rows.append(
            f"<tr><td><a href='#{s.collection}'>{s.collection}</a></td>"
            f"<td>{METRIC_NAME[s.kind]}</td><td>{g.height}</td><td>{len(s.unscored)}</td>"
            f"<td>{_fmt(metrics.collection_score(g['model'].to_numpy()))}</td>"
            f"<td>{_fmt(metrics.collection_score(g['random'].to_numpy()))}</td>"
            f"<td>{_default_cell(s.kind, _mean(g['default_first']))}</td>"
            f"<td>{int(g['failing'].sum())}</td><td>{s.summary['seconds']:.1f}</td></tr>")
    return "\n".join(rows + ["</table>"])


def _section_html(s: Section, images: dict) -> list[str]:
    key = collection_slug(s.collection)
    g = s.graphs
    out = [f"<h2 id='{s.collection}'>{s.collection}</h2>",
           f"<p>{g.height + len(s.unscored)} validation graphs: {g.height} scored, "
           f"{len(s.unscored)} unscored; {s.predictions.height:,} rows, {_rows_rule(s)}. "
           f"{int(g['failing'].sum())} failing; {_default_fact(s)}.</p>",
           _img(images, f"{key}-per_graph"), _per_graph_note(s),
           _graph_table(g.head(WORST_ROWS), f"{min(g.height, WORST_ROWS)} worst of {g.height}",
                        s.kind)]
    if g.height > WORST_ROWS:
        out.append(f"<details><summary>all {g.height} scored graphs</summary>"
                   f"{_graph_table(g, 'model worst first', s.kind)}</details>")
    out.append(_unscored_html(s))
    notes = {"predicted_vs_measured": ("Best and worst validation graph",
                                       "Each point is one of the graph's validation configs."),
             "top_features": ("Top features by gain", _features_note(s)),
             "metric_by_round": ("Validation metric per boosting round", _rounds_note(s))}
    for name, (title, note) in notes.items():
        if f"{key}-{name}" in images:
            out += [f"<h3>{title}</h3>", _img(images, f"{key}-{name}"),
                    f"<p class='note'>{note}</p>"]
    return out


def _rows_rule(s: Section) -> str:
    cap = s.settings.get("max_valid_configs")
    if s.kind == "tile" or not cap:
        return "every config of every graph"
    return (f"at most {cap:,} configs per graph, sampled like the test files "
            f"(--feature max_valid_configs={cap})")


def _per_graph_note(s: Section) -> str:
    lo, hi = s.limits
    beyond = {name: int(((s.graphs[col] < lo) | (s.graphs[col] > hi)).sum())
              for name, col in (("random-order", "random"), ("compiler-default", "default_first"))}
    edge = " and ".join(f"{n} {name}" for name, n in beyond.items() if n) or "no"
    return (f"<p class='note'>Every scored graph, numbered from the model's worst as in the "
            f"tables; random order is the mean of {N_RANDOM_ORDERS} random orders of the graph. "
            f"The axis spans the model's scores ({lo:.3f} to {hi:.3f}): {edge} reference "
            f"scores lie beyond it and are drawn as open triangles on its edge (their values are "
            f"in the tables).</p>")


def _unscored_html(s: Section) -> str:
    if not s.unscored:
        return "<p class='note'>Every validation graph has a score.</p>"
    names = ", ".join(html.escape(g) for g in s.unscored)
    return (f"<p>Unscored ({len(s.unscored)}; one config or equal runtimes, not in the mean): "
            f"{names}</p>")


def _features_note(s: Section) -> str:
    share = s.diag["gain_share"]
    return (f"The {min(TOP_FEATURES, len(share))} of the {len(share)} features with any gain; "
            f"share of the total gain, mean over {len(s.summary['seed_means'])} seed(s).")


def _rounds_note(s: Section) -> str:
    cap, patience = s.params["n_estimators"], s.params["early_stopping"]
    seeds = []
    for seed, rounds in enumerate(s.summary["rounds"]):
        seeds.append(f"seed {seed} was best at round {rounds}, less than {patience} rounds "
                     f"before the cap of {cap}: the cap, not early stopping, ended it, and more "
                     f"rounds may help (--set n_estimators=N)" if _cap_ended(rounds, s.params)
                     else f"seed {seed} stopped early, keeping {rounds} of at most {cap} rounds")
    return (f"Scored on {_history_graphs(s)}, at {len(s.diag['history'][0]['rounds'])} round "
            f"counts. The rounds were chosen by early stopping (patience {patience}) on held-out "
            f"train families, not on this curve: {'; '.join(seeds)}.{_partner_note(s)}")


def _partner_note(s: Section) -> str:
    """Where each seed also averages in a partner, which the curve and gains leave out."""
    alone, blended = s.summary.get("ranker_seed_means") or [], s.summary["seed_means"]
    if not alone or alone == blended:
        return ""
    return (f" The curve and the feature gains are the ranker's alone; each seed's score also "
            f"averages in a partner (README 'Rankers'): valid mean of the rankers alone "
            f"{_fmt(float(np.mean(alone)))}, with their partners "
            f"{_fmt(float(np.mean(blended)))}.")


def _default_fact(s: Section) -> str:
    by_graph = s.predictions.group_by("graph_id").agg(pl.col("is_default").any(),
                                                      pl.col("runtime").min())
    if s.kind == "tile":
        n = int((by_graph["runtime"] >= 1.0).sum())
        return f"in {n} no candidate is faster than the compiler's default tile"
    n = int(by_graph["is_default"].sum())
    return f"{n} hold a compiler-default config among their validation rows"


def _graph_table(g: pl.DataFrame, order: str, kind: str) -> str:
    rows = [f"<table><tr><th>#</th><th class='name'>graph ({order})</th><th>model</th>"
            "<th>random order</th><th>compiler default first</th><th>model - best reference</th>"
            "</tr>"]
    for r in g.iter_rows(named=True):
        margin = r["model"] - np.fmax(r["random"], r["default_first"])
        rows.append(f"<tr class='{'fail' if r['failing'] else ''}'><td>{r['number']}</td>"
                    f"<td class='name'>{html.escape(r['graph_id'])}</td><td>{_fmt(r['model'])}"
                    f"</td><td>{_fmt(r['random'])}</td>"
                    f"<td>{_default_cell(kind, r['default_first'])}</td>"
                    f"<td>{_fmt(margin)}</td></tr>")
    return "\n".join(rows + ["</table>"])


def _mean(column: pl.Series) -> float:
    return metrics.collection_score(column.to_numpy())


def _img(images: dict, name: str) -> str:
    data = base64.b64encode(images[name]).decode("ascii")
    return f"<img alt='{name}' src='data:image/png;base64,{data}'>"


def _fmt(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"
