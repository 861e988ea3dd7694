"""The competition's metrics, per graph: pure functions of (scores, runtime, ptr).

Scores mean "higher = predicted faster" (models/training/base.py). A graph's predicted order is the
stable descending sort of its scores, exactly the order `submit` writes.
  tile:   2 - min(runtime of the first min(5, c) predicted) / min(all runtimes)
  layout: Kendall tau-b between predicted position (0 = fastest) and runtime
A graph with fewer than two distinct runtimes (one config, or all equal) has no order to get
right: it is unscored (NaN) under both metrics and counted apart, not averaged in.
The collection score is the mean over scored graphs; the final score the mean of the collections.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from features.rows.feature_set import graph_slices
from features.schema import is_tile

TILE_TOP_K = 5
# What a per-graph score is called in tables and figures, by collection kind.
METRIC_NAME = {"tile": f"top-{TILE_TOP_K} score", "layout": "Kendall tau"}


def predicted_order(scores: np.ndarray) -> np.ndarray:
    """Indices from predicted fastest to slowest (stable, so ties keep file order)."""
    return np.argsort(-np.asarray(scores, np.float64), kind="stable")


@njit(cache=True)
def _count_inversions(y):
    """Sort y in place (bottom-up merge sort); return the number of pairs out of order.

    Iterative on purpose: a recursive cached Numba function segfaults when loaded back from
    the cache (numba/numba#6061)."""
    n = y.size
    tmp = np.empty_like(y)
    swaps = 0
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if y[j] < y[i]:
                    tmp[k] = y[j]
                    swaps += mid - i
                    j += 1
                else:
                    tmp[k] = y[i]
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = y[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = y[j]
                j += 1
                k += 1
        y, tmp = tmp, y
        width *= 2
    return swaps, y


@njit(cache=True)
def _tied_pairs(v):
    """Pairs with equal values in sorted v."""
    total, run = 0, 1
    for i in range(1, v.size):
        if v[i] == v[i - 1]:
            run += 1
        else:
            total += run * (run - 1) // 2
            run = 1
    return total + run * (run - 1) // 2


@njit(cache=True)
def _kendall_sorted(x, y):
    """tau-b for x sorted ascending (ties in x broken by y ascending); O(n log n) (Knight)."""
    n = x.size
    n0 = n * (n - 1) // 2
    n1 = _tied_pairs(x)
    n3, run = 0, 1
    for i in range(1, n):
        if x[i] == x[i - 1] and y[i] == y[i - 1]:
            run += 1
        else:
            n3 += run * (run - 1) // 2
            run = 1
    n3 += run * (run - 1) // 2
    swaps, y_sorted = _count_inversions(y.copy())
    n2 = _tied_pairs(y_sorted)
    denom = np.sqrt(float(n0 - n1) * float(n0 - n2))
    if denom == 0.0:
        return np.nan
    return (n0 - n1 - n2 + n3 - 2 * swaps) / denom


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau-b of two 1-D arrays (scipy.stats.kendalltau's default variant)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    if x.size < 2:
        return float("nan")
    order = np.lexsort((y, x))
    return float(_kendall_sorted(x[order], y[order]))


def kendall_per_graph(scores: np.ndarray, runtime: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """(n_graphs,) tau-b of predicted position vs runtime; NaN for graphs that cannot be ranked."""
    out = np.full(ptr.size - 1, np.nan)
    for g, rows in enumerate(graph_slices(ptr)):
        position = np.empty(rows.stop - rows.start)
        position[predicted_order(scores[rows])] = np.arange(position.size)
        out[g] = kendall_tau_b(position, runtime[rows])
    return out


def topk_score_per_graph(scores: np.ndarray, runtime: np.ndarray, ptr: np.ndarray,
                         k: int = TILE_TOP_K) -> np.ndarray:
    """(n_graphs,) 2 - best runtime among the first min(k, c) predicted / best runtime overall.

    In one compiled pass: early stopping scores every watched kernel after every round, and
    a sort per kernel in Python cost more than the round's training on 500-row kernels."""
    return _topk_per_graph(np.asarray(scores, np.float64), np.asarray(runtime, np.float64),
                           np.asarray(ptr, np.int64), k)


@njit(cache=True)
def _precedes(scores, a, b):
    """Row a comes before row b in predicted_order (a < b): higher score first, NaN last
    (where argsort puts it), ties in file order."""
    na, nb = np.isnan(scores[a]), np.isnan(scores[b])
    if na or nb:
        return nb and not na
    return scores[a] >= scores[b]


@njit(cache=True)
def _topk_per_graph(scores, runtime, ptr, k):
    out = np.empty(ptr.size - 1)
    top = np.empty(k, np.int64)
    for g in range(ptr.size - 1):
        lo, hi = ptr[g], ptr[g + 1]
        m = min(k, hi - lo)
        held, best = 0, np.inf
        for i in range(lo, hi):   # rows in file order: an earlier row keeps its place on ties
            best = min(best, runtime[i])
            if held < m:
                pos = held
                held += 1
            elif _precedes(scores, top[m - 1], i):
                continue
            else:
                pos = m - 1
            while pos > 0 and not _precedes(scores, top[pos - 1], i):
                top[pos] = top[pos - 1]
                pos -= 1
            top[pos] = i
        best_top = np.inf
        for j in range(m):
            best_top = min(best_top, runtime[top[j]])
        out[g] = 2.0 - best_top / best
    return out


@njit(cache=True)
def _scorable(runtime, ptr):
    out = np.zeros(ptr.size - 1, np.bool_)
    for g in range(ptr.size - 1):
        lo, hi = ptr[g], ptr[g + 1]
        if hi - lo < 2:
            continue
        low, high = runtime[lo], runtime[lo]
        for i in range(lo, hi):
            if np.isnan(runtime[i]):   # as min() < max() would have it: never scorable
                low = high = np.nan
                break
            low, high = min(low, runtime[i]), max(high, runtime[i])
        out[g] = low < high
    return out


def scorable(runtime: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """(n_graphs,) bool: the graph has at least two distinct runtimes."""
    return _scorable(np.asarray(runtime, np.float64), np.asarray(ptr, np.int64))


def per_graph_scores(collection: str, scores: np.ndarray, runtime: np.ndarray,
                     ptr: np.ndarray) -> np.ndarray:
    """The collection's metric for every graph; NaN where the graph cannot be scored."""
    if is_tile(collection):
        out = topk_score_per_graph(scores, runtime, ptr)
    else:
        out = kendall_per_graph(scores, runtime, ptr)
    out[~scorable(runtime, ptr)] = np.nan
    return out


def collection_score(per_graph: np.ndarray) -> float:
    """Mean over the graphs that have a score."""
    valid = per_graph[np.isfinite(per_graph)]
    return float(valid.mean()) if valid.size else float("nan")


def stopping_metric(watched) -> tuple[str, object]:
    """What every ranker early-stops on: (name, score(preds)), the collection's own metric of
    the watched graphs (a FeatureSet), higher = better."""
    def score(preds: np.ndarray) -> float:
        return collection_score(per_graph_scores(watched.collection, preds, watched.runtime,
                                                 watched.ptr))
    return ("top5" if is_tile(watched.collection) else "kendall"), score


def final_score(by_collection: dict[str, float]) -> float:
    """Unweighted mean over the collections that have a score, as the leaderboard averages its
    five; NaN if none has."""
    values = np.array(list(by_collection.values()), np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def seed_spread(seed_means) -> float:
    """The spread of a run's per-seed mean scores, the one figure `train` and `compare` print:
    their sample standard deviation (ddof=1, numpy's std with ddof=1), since the seeds are a
    sample of the seeds one might draw and `compare` weighs a gain against it; 0.0 with one seed
    (no spread shown), NaN where a seed has no score."""
    x = np.asarray(seed_means, np.float64)
    return float(x.std(ddof=1)) if x.size > 1 else 0.0
