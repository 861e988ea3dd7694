"""A LightGBM booster's trees as flat arrays, scored by a Numba kernel: the rankers' and the node
learner's predictions, a tuner round's main cost (models/records/README.md, "Node rows scored by
Numba").

LightGBM's own predict walks one row at a time through every tree, each step waiting on the
last; here blocks of rows walk each tree in step (leaves loop to themselves), so a core works on
many rows' loads at once: 16 against 35-40 microseconds a node row of a 600-tree learner, one
thread, and 1.3-1.6x as fast on a ranker's 650-column rows. The scores are LightGBM's raw scores
to the bit (tests/test_forest.py).
"""
from __future__ import annotations

import weakref

import lightgbm as lgb
import numpy as np
from numba import njit, prange

# LightGBM's decision_type bits (its tree.h): categorical, then the missing type in bits 2-3
_CATEGORICAL, _MISSING = 1, 12
_BLOCK = 64                                     # rows walking a tree together
# booster -> {iterations: its Forest}, gone with the booster
_FORESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def raw_scores(booster: lgb.Booster, X: np.ndarray, iterations: int | None = None) -> np.ndarray:
    """booster.predict(X, raw_score=True, num_iteration=iterations), each booster's trees read
    once."""
    forests = _FORESTS.setdefault(booster, {})
    if iterations not in forests:
        forests[iterations] = Forest.of(booster, iterations)
    return forests[iterations].predict(X)


class Forest:
    """A booster's trees, each tree's nodes in breadth-first order, a node's two children side by
    side (the right one after the left), a leaf its own child with an infinite threshold.
    Trees this does not walk (categorical splits, linear leaves, several outputs, a missing-value
    rule: none of the node learner's) go to LightGBM's predict instead."""

    def __init__(self, booster: lgb.Booster, arrays: tuple | None, iterations: int | None = None):
        self.booster, self.arrays, self.iterations = booster, arrays, iterations

    @classmethod
    def of(cls, booster: lgb.Booster, iterations: int | None = None) -> "Forest":
        """The trees predict(raw_score=True, num_iteration=iterations) uses."""
        header, trees = _tree_texts(booster.model_to_string(num_iteration=iterations))
        parts = [_flat_tree(t) for t in trees]
        if int(header.get("num_tree_per_iteration", 1)) != 1 or any(p is None for p in parts):
            return cls(booster, None, iterations)
        at = np.cumsum([0] + [p[0].size for p in parts])
        columns = [np.concatenate([p[k] for p in parts]) for k in range(3)]
        child = np.concatenate([p[3] + a for p, a in zip(parts, at)])
        return cls(booster, (columns[0].astype(np.int32), columns[1], child.astype(np.int32),
                             columns[2], at[:-1].astype(np.int32),
                             np.array([p[4] for p in parts], np.int32)), iterations)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """(rows,) the sum of the trees' leaf values for each row of X (rows, features)."""
        if self.arrays is None:
            return self.booster.predict(X, raw_score=True, num_iteration=self.iterations)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.booster.num_feature():
            raise ValueError(f"the model splits {self.booster.num_feature()} features; rows of "
                             f"shape {X.shape} given")
        if X.dtype not in (np.float32, np.float64) or np.isnan(X).any():
            X = np.nan_to_num(X.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
        return _forest_scores(np.ascontiguousarray(X), *self.arrays)


def _tree_texts(model: str) -> tuple[dict, list[dict]]:
    """The model text's header and each tree's key=value lines, as dicts of strings."""
    blocks = model.split("end of trees")[0].split("\nTree=")
    header = dict(line.split("=", 1) for line in blocks[0].splitlines() if "=" in line)
    trees = [dict(line.split("=", 1) for line in b.splitlines()[1:] if "=" in line)
             for b in blocks[1:]]
    return header, trees


def _flat_tree(tree: dict) -> tuple | None:
    """One tree's (feature, threshold, leaf value, child, depth) breadth-first (Forest); None
    for a tree with splits other than plain numerical ones (a NaN there goes left as a 0)."""
    leaves = np.array(tree["leaf_value"].split(), np.float64)
    if int(tree.get("is_linear", 0)):
        return None
    if leaves.size == 1:
        return np.zeros(1, np.int64), np.full(1, np.inf), leaves, np.zeros(1, np.int64), 0
    get = lambda key, dtype: np.array(tree[key].split(), dtype)
    decision = get("decision_type", np.int64)
    if (decision & (_CATEGORICAL | _MISSING)).any():
        return None
    split_feature, threshold = get("split_feature", np.int64), get("threshold", np.float64)
    left, right = get("left_child", np.int64), get("right_child", np.int64)
    # LightGBM's child k >= 0 is internal node k, k < 0 leaf ~k; order[s] is what slot s holds
    order, kids, depth, level = [0], {}, 0, [0]
    while any(k >= 0 for k in level):
        depth, nxt = depth + 1, []
        for k in (k for k in level if k >= 0):
            kids[k] = len(order)
            order += [left[k], right[k]]
            nxt += [left[k], right[k]]
        level = nxt
    n = len(order)
    feature, thr, value, child = np.zeros(n, np.int64), np.full(n, np.inf), np.zeros(n), \
        np.arange(n)
    for s, k in enumerate(order):
        if k < 0:
            value[s] = leaves[~k]
        else:
            feature[s], thr[s], child[s] = split_feature[k], threshold[k], kids[k]
    return feature, thr, value, child, depth


@njit(cache=True, parallel=True)
def _forest_scores(X, feature, threshold, child, leaf_value, root, depth):
    n = X.shape[0]
    out = np.empty(n)
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        lo, hi = b * _BLOCK, min(n, (b + 1) * _BLOCK)
        at, total = np.empty(hi - lo, np.int32), np.zeros(hi - lo)
        for t in range(root.size):
            at[:] = root[t]
            for _ in range(depth[t]):
                for r in range(hi - lo):
                    i = at[r]
                    at[r] = child[i] + (np.float64(X[lo + r, feature[i]]) > threshold[i])
            for r in range(hi - lo):
                total[r] += leaf_value[at[r]]
        out[lo:hi] = total
    return out
