"""`pipeline.py report`: a trained run as one self-contained HTML page plus its PNG figures.

Per collection: every validation graph's score next to random order and 'compiler default first'
(defined in models/training/diagnostics.py), worst graphs first; predicted score vs measured runtime of the
best and the worst graph; the features with the most gain; the validation metric per boosting
round; and, for the whole run, where the time went. Written atomically to <run>/report/ with
report.json saying what it was made from.
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

from features.cache import atomic_dir
from features.schema import collection_kind, collection_slug

from models.training import diagnostics
from . import figures
from models import metrics
from models.serving.predict import read_run

WORST_ROWS = 15   # graph table rows per collection; the sorted figure shows every graph
METRIC = {"tile": "top-5 score", "layout": "Kendall tau"}


@dataclass
class Section:
    collection: str
    graphs: pl.DataFrame    # graph_id, model, random, default_first, failing; model's worst first
    predictions: pl.DataFrame
    diag: dict
    summary: dict

    @property
    def kind(self) -> str:
        return collection_kind(self.collection)


def gather(run_dir: Path, collection: str, summary: dict) -> Section:
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
    return Section(collection, graphs.sort("model"), preds,  # NaN (unrankable) sorts last
                   diag, summary)


def _floats(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], np.float64)


def section_figures(s: Section) -> dict[str, bytes]:
    g, metric = s.graphs, METRIC[s.kind]
    out = {"per_graph": figures.per_graph_scores(
        g["graph_id"].to_list(), g["model"].to_numpy(), g["random"].to_numpy(),
        g["default_first"].to_numpy(), g["failing"].to_numpy(), metric)}
    ranked = g.filter(pl.col("model").is_not_nan())
    if ranked.height:
        picks = [("best", ranked[-1]), ("worst", ranked[0])]
        out["predicted_vs_measured"] = figures.predicted_vs_measured(
            [_panel(s, label, row) for label, row in picks],
            "runtime / normalizer" if s.kind == "tile" else "measured runtime")
    if s.diag["gain_share"]:
        out["top_features"] = figures.top_features(s.diag["gain_share"])
    if s.diag["history"]:
        out["metric_by_round"] = figures.metric_by_round(s.diag["history"], metric)
    return out


def _panel(s: Section, label: str, row: pl.DataFrame):
    gid, value = row["graph_id"][0], row["model"][0]
    rows = s.predictions.filter(pl.col("graph_id") == gid)
    return (f"{label} graph {gid[:24]} ({METRIC[s.kind]} {value:.3f})", rows["score"].to_numpy(),
            rows["runtime"].to_numpy(), rows["is_default"].to_numpy())


def stage_seconds(record: dict) -> dict[str, dict[str, float]]:
    """Per collection: feature builds (of the cache entries used) and the training stages."""
    build = record["features"].get("build_seconds", {})
    return {c: {"features train": (build.get(c) or {}).get("train"),
                "features valid": (build.get(c) or {}).get("valid"), **m.get("stages", {})}
            for c, m in record["metrics"].items()}


def write_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """Write report.html, its PNGs and report.json; returns the HTML file's path."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir else run_dir / "report"
    record = read_run(run_dir)
    sections = [gather(run_dir, c, m) for c, m in record["metrics"].items()]
    images = {"stage_times": figures.stage_times(stage_seconds(record))}
    for s in sections:
        images.update({f"{collection_slug(s.collection)}-{k}": png
                       for k, png in section_figures(s).items()})
    with atomic_dir(out_dir) as tmp:
        for name, png in images.items():
            (tmp / f"{name}.png").write_bytes(png)
        (tmp / "report.html").write_text(render(run_dir, record, sections, images))
        (tmp / "report.json").write_text(json.dumps(
            {"run": str(run_dir), "run_created": record.get("created"),
             "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             "files": ["report.html"] + [f"{n}.png" for n in images]}, indent=1))
    return out_dir / "report.html"


# ---------------------------------------------------------------- HTML

CSS = """body{font-family:sans-serif;max-width:1060px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
tr.fail td{background:#fde2e2}img{max-width:100%}h2{border-top:2px solid #ddd;padding-top:.6em}
.note{color:#555;font-size:90%}"""


def render(run_dir: Path, record: dict, sections: list[Section], images: dict) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Run report: "
             f"{html.escape(run_dir.name)}</title><style>{CSS}</style></head><body>",
             f"<h1>Run {html.escape(run_dir.name)}</h1>", _run_facts(record),
             "<h2>Validation by collection</h2>", _summary_table(sections),
             "<p class='note'>Compiler default first: layout, the configs that leave every "
             "slot at the compiler's default first, then file order (plain file order where "
             "a graph has no such config); tile, the default tile alone (runtime / normalizer "
             "= 1). A graph fails when the model scores below either reference.</p>",
             "<h2>Where the time went</h2>", _img(images, "stage_times"),
             "<p class='note'>Feature builds are those of the cache entries this run used, "
             "possibly made by an earlier command.</p>"]
    for s in sections:
        parts += _section_html(s, images)
    return "\n".join(parts + ["</body></html>"])


def _run_facts(record: dict) -> str:
    data = record["features"].get("data", "?")
    sample = " (the generated sample)" if record["features"].get("sample") else ""
    return (f"<p>ranker <b>{html.escape(record['ranker'])}</b>, seeds "
            f"{record['train_config']['seeds']}, trained {html.escape(record['created'])}, "
            f"git {html.escape(str(record.get('git')))}; data {html.escape(str(data))}{sample}"
            f"<br>final score (mean of collections): <b>{record['final']:.4f}</b></p>")


def _summary_table(sections: list[Section]) -> str:
    rows = ["<table><tr><th>collection</th><th>metric</th><th>graphs</th><th>model</th>"
            "<th>random order</th><th>compiler default first</th><th>graphs failing</th>"
            "<th>train s</th></tr>"]
    for s in sections:
        g = s.graphs
        rows.append(
            f"<tr><td><a href='#{s.collection}'>{s.collection}</a></td><td>{METRIC[s.kind]}</td>"
            f"<td>{g.height}</td><td>{_fmt(metrics.collection_score(g['model'].to_numpy()))}</td>"
            f"<td>{_fmt(metrics.collection_score(g['random'].to_numpy()))}</td>"
            f"<td>{_fmt(metrics.collection_score(g['default_first'].to_numpy()))}</td>"
            f"<td>{int(g['failing'].sum())}</td><td>{s.summary['seconds']:.1f}</td></tr>")
    return "\n".join(rows + ["</table>"])


def _section_html(s: Section, images: dict) -> list[str]:
    key = collection_slug(s.collection)
    g = s.graphs
    out = [f"<h2 id='{s.collection}'>{s.collection}</h2>",
           f"<p>{g.height} validation graphs, {int(g['failing'].sum())} failing; "
           f"{_default_fact(s)}.</p>", _img(images, f"{key}-per_graph"), _graph_table(g, s.kind)]
    for name, title in (("predicted_vs_measured", "Best and worst validation graph"),
                        ("top_features", "Top features by gain"),
                        ("metric_by_round", "Validation metric per boosting round")):
        if f"{key}-{name}" in images:
            out += [f"<h3>{title}</h3>", _img(images, f"{key}-{name}")]
    return out


def _default_fact(s: Section) -> str:
    by_graph = s.predictions.group_by("graph_id").agg(pl.col("is_default").any(),
                                                      pl.col("runtime").min())
    if s.kind == "tile":
        n = int((by_graph["runtime"] >= 1.0).sum())
        return f"in {n} no candidate is faster than the compiler's default tile"
    n = int(by_graph["is_default"].sum())
    return f"{n} hold a compiler-default config among their validation rows"


def _graph_table(g: pl.DataFrame, kind: str) -> str:
    rows = ["<table><tr><th>graph (model's worst first)</th><th>model</th><th>random order</th>"
            "<th>compiler default first</th><th>model - best reference</th></tr>"]
    for r in g.head(WORST_ROWS).iter_rows(named=True):
        margin = r["model"] - np.fmax(r["random"], r["default_first"])
        rows.append(f"<tr class='{'fail' if r['failing'] else ''}'>"
                    f"<td>{html.escape(r['graph_id'])}</td><td>{_fmt(r['model'])}</td>"
                    f"<td>{_fmt(r['random'])}</td><td>{_fmt(r['default_first'])}</td>"
                    f"<td>{_fmt(margin)}</td></tr>")
    rest = g.height - min(g.height, WORST_ROWS)
    more = f"<p class='note'>{rest} better graphs not listed (the figure has all).</p>" \
        if rest else ""
    return "\n".join(rows + ["</table>", more])


def _img(images: dict, name: str) -> str:
    data = base64.b64encode(images[name]).decode("ascii")
    return f"<img alt='{name}' src='data:image/png;base64,{data}'>"


def _fmt(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"
