"""The report's figures, each returned as PNG bytes. Built on matplotlib's Figure directly, not
pyplot, which keeps every figure open in a global registry until it is closed."""
from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure

MODEL, RANDOM, DEFAULT, FAIL = "#1f77b4", "#999999", "#ff7f0e", "#d62728"


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def per_graph_scores(graph_ids, model, random, default, failing, metric: str) -> bytes:
    """Graphs left to right from the model's worst to its best; failing ones in red."""
    n = len(graph_ids)
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax = fig.subplots()
    x = np.arange(n)
    ax.plot(x, random, "x", color=RANDOM, label="random order")
    floor = _floor(np.r_[model, random])
    low = default < floor
    if np.isfinite(default).any():
        ax.plot(x[~low], default[~low], "^", color=DEFAULT, label="compiler default first",
                alpha=0.8)
    if low.any():  # e.g. a tile default many times slower than the best tile: keep the scale
        ax.plot(x[low], np.full(low.sum(), floor), "v", color=DEFAULT,
                label=f"compiler default first, below {floor:.2f}")
    ax.plot(x, model, "o-", color=MODEL, label="model", lw=1)
    ax.plot(x[failing], model[failing], "o", color=FAIL, ms=9, mfc="none", mew=2,
            label="model below a reference")
    ax.set_xlabel("validation graphs, model's worst first")
    ax.set_ylabel(metric)
    if n <= 40:
        ax.set_xticks(x, [g[:10] for g in graph_ids], rotation=60, ha="right", fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)


def _floor(values: np.ndarray) -> float:
    """A lower axis limit a little under the finite values (-inf if there are none)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return -np.inf
    return float(finite.min() - 0.3 * max(finite.max() - finite.min(), 0.1))


def predicted_vs_measured(panels, runtime_label: str) -> bytes:
    """panels: [(title, predicted score, measured runtime, is_default)], one subplot each."""
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, score, runtime, is_default) in zip(axes, panels):
        ax.scatter(score[~is_default], runtime[~is_default], s=8, alpha=0.6, color=MODEL,
                   label="configs")
        if is_default.any():
            ax.scatter(score[is_default], runtime[is_default], s=30, marker="^",
                       color=DEFAULT, label="compiler default")
            ax.legend(fontsize=8)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("predicted score (higher = faster)")
        ax.set_ylabel(runtime_label)
        ax.grid(alpha=0.3)
    return _png(fig)


def top_features(gain_share: dict[str, float], k: int = 20) -> bytes:
    names = list(gain_share)[:k][::-1]
    fig = Figure(figsize=(10, 0.25 * len(names) + 1.0), layout="constrained")
    ax = fig.subplots()
    ax.barh(np.arange(len(names)), [gain_share[n] for n in names], color=MODEL)
    ax.set_yticks(np.arange(len(names)), names, fontsize=8)
    ax.set_xlabel("share of the total split gain (mean over seeds)")
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def metric_by_round(history: list[dict], metric: str) -> bytes:
    """One line per seed; a dashed line where that seed's saved model stops."""
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    ax = fig.subplots()
    for h in history:
        score = np.array([np.nan if v is None else v for v in h["score"]], float)
        line, = ax.plot(h["rounds"], score, lw=1.5, label=f"seed {h['seed']}")
        ax.axvline(h["best_iteration"], color=line.get_color(), ls="--", lw=1)
    ax.set_xlabel("boosting rounds (dashed: rounds the saved model keeps)")
    graphs = history[0].get("graphs") if history else None
    ax.set_ylabel(f"validation {metric}" + (f"\n({graphs} graphs)" if graphs else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def stage_times(stages: dict[str, dict[str, float]]) -> bytes:
    """Stacked horizontal bars: one bar per collection, one segment per stage."""
    collections = list(stages)[::-1]
    names = list(dict.fromkeys(s for c in collections for s in stages[c]))
    fig = Figure(figsize=(10, 0.45 * len(collections) + 1.5), layout="constrained")
    ax = fig.subplots()
    left = np.zeros(len(collections))
    for name in names:
        width = np.array([stages[c].get(name) or 0.0 for c in collections])
        ax.barh(np.arange(len(collections)), width, left=left, label=name)
        left += width
    ax.set_yticks(np.arange(len(collections)), collections, fontsize=8)
    ax.set_xlabel("wall seconds")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, ncol=3, loc="lower right")
    return _png(fig)
