"""The report's figures, each a matplotlib Figure (what it plots can be inspected; `png` turns it
into the bytes the report embeds). Built on Figure directly, not pyplot, which keeps every
figure open in a global registry until it is closed."""
from __future__ import annotations

import io
import textwrap

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

MODEL, RANDOM, DEFAULT, FAIL = "#1f77b4", "#999999", "#ff7f0e", "#d62728"


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def per_graph_scores(model, random, default, failing, metric: str,
                     limits: tuple[float, float]) -> Figure:
    """Graphs numbered 1.. left to right from the model's worst to its best; failing ones in
    red. The y-axis spans `limits` (model_span): a reference beyond them is drawn on the edge
    it passes (a tile reference can sit at -7 while the model spans 0.94-1)."""
    n = len(model)
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(1, n + 1)
    lo, hi = limits
    _reference(ax, x, random, (lo, hi), dict(marker="x", color=RANDOM), "random order")
    _reference(ax, x, default, (lo, hi), dict(marker="^", color=DEFAULT, alpha=0.8),
               "compiler default first")
    ax.plot(x, model, "o-", color=MODEL, label="model", lw=1)
    ax.plot(x[failing], model[failing], "o", color=FAIL, ms=9, mfc="none", mew=2,
            label="model below a reference")
    ax.set_ylim(lo, hi)
    ax.set_xlim(0.5 - 0.01 * n, n + 0.5 + 0.01 * n)
    ax.set_xlabel("validation graphs, model's worst first (numbered as in the table below)")
    ax.set_ylabel(metric)
    if n <= 40:
        ax.set_xticks(x, [str(i) for i in x], fontsize=7)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", ncol=3)
    return fig


def model_span(model: np.ndarray, references: np.ndarray) -> tuple[float, float]:
    """y-limits a little beyond the model's finite scores (the references' if it has none)."""
    finite = model[np.isfinite(model)]
    if not finite.size:
        finite = references[np.isfinite(references)]
    if not finite.size:
        return -1.0, 1.0
    low, high = float(finite.min()), float(finite.max())
    pad = 0.1 * max(high - low, 0.02)
    return low - pad, high + pad


def _reference(ax, x, values, limits, style: dict, label: str) -> None:
    """Points within the limits where they are; beyond them, open triangles on the edge."""
    lo, hi = limits
    inside = (values >= lo) & (values <= hi)
    if inside.any():
        ax.plot(x[inside], values[inside], ls="none", label=label, **style)
    for beyond, edge, marker, side in ((values < lo, lo, "v", "below"),
                                       (values > hi, hi, "^", "above")):
        if beyond.any():
            ax.plot(x[beyond], np.full(beyond.sum(), edge), ls="none", clip_on=False,
                    **{**style, "marker": marker, "mfc": "none"},
                    label=f"{label}: {beyond.sum()} {side} {edge:.2f}, drawn at the edge")


def predicted_vs_measured(panels, runtime_label: str) -> Figure:
    """panels: [(title, predicted score, measured runtime, is_default)], one subplot each;
    titles are wrapped, never cut (graph names share long prefixes)."""
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, score, runtime, is_default) in zip(axes, panels):
        ax.scatter(score[~is_default], runtime[~is_default], s=8, alpha=0.6, color=MODEL,
                   label="configs")
        if is_default.any():
            ax.scatter(score[is_default], runtime[is_default], s=30, marker="^",
                       color=DEFAULT, label="compiler default")
            ax.legend(fontsize=8)
        ax.set_yscale("log")
        ax.set_title("\n".join(textwrap.wrap(title, 60, break_long_words=False)), fontsize=9)
        ax.set_xlabel("predicted score (higher = faster)")
        ax.set_ylabel(runtime_label)
        ax.grid(alpha=0.3)
    return fig


def top_features(gain_share: dict[str, float], k: int) -> Figure:
    names = list(gain_share)[:k][::-1]
    fig = Figure(figsize=(10, 0.25 * len(names) + 1.0), layout="constrained")
    ax = fig.subplots()
    ax.barh(np.arange(len(names)), [gain_share[n] for n in names], color=MODEL)
    ax.set_yticks(np.arange(len(names)), names, fontsize=8)
    ax.set_xlabel("share of the total split gain (mean over seeds)")
    ax.grid(alpha=0.3, axis="x")
    return fig


def metric_by_round(history: list[dict], metric: str, scored_on: str, cap: int,
                    capped: list[int]) -> Figure:
    """One line per seed, a dashed line where that seed's saved model stops, and a dotted one
    at the round cap, naming the seeds whose training the cap ended (`capped`)."""
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    ax = fig.subplots()
    for h in history:
        score = np.array([np.nan if v is None else v for v in h["score"]], float)
        line, = ax.plot(h["rounds"], score, lw=1.5, label=f"seed {h['seed']}")
        ax.axvline(h["best_iteration"], color=line.get_color(), ls="--", lw=1)
    end = max([r for h in history for r in h["rounds"]] + [h["best_iteration"] for h in history])
    cap_text = f"round cap (n_estimators={cap})" + (
        f": it, not early stopping, ended seed {', '.join(map(str, capped))}" if capped else "")
    if cap <= 1.2 * end:
        ax.axvline(cap, color="black", ls=":", lw=1.5, label=cap_text)
        end = cap
    else:   # the axis ends where the curves do; a line at a far cap would squash them
        ax.plot([], [], " ", label=f"{cap_text}, beyond the last round shown ({end})")
    ax.set_xlim(0, 1.03 * end + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("boosting rounds (dashed: rounds the saved model keeps)")
    ax.set_ylabel(f"validation {metric}")
    ax.set_title(f"scored on {scored_on}", fontsize=9)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", ncol=len(history) + 1)
    return fig


def stage_times(stages: dict[str, dict[str, float]]) -> Figure:
    """Stacked horizontal bars: one bar per collection, one segment per stage."""
    collections = list(stages)[::-1]
    names = list(dict.fromkeys(s for c in collections for s in stages[c]))
    ncol = min(len(names), 5)
    legend_rows = -(-len(names) // ncol) if names else 0
    fig = Figure(figsize=(10, 0.45 * len(collections) + 1.5 + 0.25 * legend_rows),
                 layout="constrained")
    ax = fig.subplots()
    left = np.zeros(len(collections))
    for name in names:
        width = np.array([stages[c].get(name) or 0.0 for c in collections])
        ax.barh(np.arange(len(collections)), width, left=left, label=name)
        left += width
    ax.set_yticks(np.arange(len(collections)), collections, fontsize=8)
    ax.set_xlabel("wall seconds")
    ax.grid(alpha=0.3, axis="x")
    # below the axes, not inside: inside, it covered the longest (bottom) bar
    fig.legend(fontsize=8, ncol=ncol, loc="outside lower center")
    return fig


def tuning_curves(collections: dict[str, dict], budgets: list[int]) -> Figure:
    """tune-sim's best runtime found / the pool's best against measurements, one panel per
    collection, one line per search."""
    fig = Figure(figsize=(3.2 * len(collections) + 0.5, 3.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(collections), sharey=False))
    styles = {"random": dict(color=RANDOM, ls=":"), "frozen": dict(color=DEFAULT, ls="--"),
              "updated": dict(color=MODEL)}
    for ax, (collection, result) in zip(axes, collections.items()):
        for search, style in styles.items():
            ax.plot(budgets, result["mean"][search], marker="o", ms=3, label=search, **style)
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_title(f"{collection} ({len(result['graphs'])} graphs)", fontsize=9)
        ax.set_xlabel("measurements")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("best found / best of the pool")
    axes[0].legend(fontsize=8)
    return fig
