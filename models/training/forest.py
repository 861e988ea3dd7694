"""A LightGBM booster's trees as flat arrays, scored by a Numba kernel: the rankers' and the node
learner's predictions, a tuner round's main cost (docs/records/README.md, "Node rows scored by
Numba").

LightGBM's own predict walks one row at a time through every tree, each step waiting on the
last; here blocks of rows walk each tree in step (leaves loop to themselves), so a core works on
many rows' loads at once. The scores are LightGBM's raw scores to the bit (tests/test_forest.py).
"""
from __future__ import annotations

import weakref
from typing import NamedTuple

import lightgbm as lgb
import numpy as np
from numba import njit, prange

# LightGBM's decision_type bits (its tree.h): categorical, then the missing type in bits 2-3
_CATEGORICAL, _MISSING = 1, 12
# LightGBM's kZeroThreshold (1e-35f): its predict reads a value this close to 0, or NaN, as 0
_ZERO = float(np.float32(1e-35))
_BLOCK = 64                                     # rows walking a tree together
# booster -> {iterations: its Forest, or None where LightGBM's predict scores it}; the values
# hold no reference to the booster, so an entry goes with it
_FORESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Forest(NamedTuple):
    """Every tree's nodes, each tree's breadth-first from its root: a node's right child right
    after its left one (child[i] + 1), a leaf its own child under an infinite threshold."""
    feature: np.ndarray      # (nodes,) int32 the feature a node splits on
    threshold: np.ndarray    # (nodes,) float64 left when value <= threshold
    child: np.ndarray        # (nodes,) int32 the left child
    leaf_value: np.ndarray   # (nodes,) float64 (0 at splits)
    root: np.ndarray         # (trees,) int32
    depth: np.ndarray        # (trees,) int32 splits on a tree's longest path
    n_features: int

    def predict(self, X: np.ndarray) -> np.ndarray:
        """(rows,) the sum of the trees' leaf values for each row of X (rows, features)."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"the model splits {self.n_features} features; rows of shape "
                             f"{X.shape} given")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float32)           # as LightGBM's predict converts them
        return _forest_scores(np.ascontiguousarray(X), *self[:-1])


def raw_scores(booster: lgb.Booster, X: np.ndarray, iterations: int | None = None) -> np.ndarray:
    """booster.predict(X, raw_score=True, num_iteration=iterations), each booster's trees read
    once (about 0.2 s for 600)."""
    k = booster.best_iteration if iterations is None else iterations   # predict's own default
    forests = _FORESTS.setdefault(booster, {})
    if k not in forests:
        forests[k] = walkable(booster, k)
    if forests[k] is None:
        return booster.predict(X, raw_score=True, num_iteration=k)
    return forests[k].predict(X)


def walkable(booster: lgb.Booster, iterations: int) -> Forest | None:
    """The trees predict(raw_score=True, num_iteration=iterations) uses, or None where the walk
    does not cover them: categorical splits, a missing-value rule, linear leaves, several
    outputs (none of the node learner's or the rankers')."""
    header, texts = _tree_texts(booster.model_to_string(num_iteration=iterations))
    trees = [_flat_tree(t) for t in texts]
    if int(header.get("num_tree_per_iteration", 1)) != 1 or any(t is None for t in trees):
        return None
    at = np.cumsum([0] + [t.feature.size for t in trees])
    join = lambda key, dtype: np.concatenate([getattr(t, key) for t in trees]).astype(dtype)
    return Forest(join("feature", np.int32), join("threshold", np.float64),
                  np.concatenate([t.child + a for t, a in zip(trees, at)]).astype(np.int32),
                  join("leaf_value", np.float64), at[:-1].astype(np.int32),
                  np.array([t.depth for t in trees], np.int32), booster.num_feature())


class _Tree(NamedTuple):
    feature: np.ndarray
    threshold: np.ndarray
    child: np.ndarray
    leaf_value: np.ndarray
    depth: int


def _tree_texts(model: str) -> tuple[dict, list[dict]]:
    """The model text's header and each tree's key=value lines, as dicts of strings."""
    blocks = model.split("end of trees")[0].split("\nTree=")
    header = dict(line.split("=", 1) for line in blocks[0].splitlines() if "=" in line)
    trees = [dict(line.split("=", 1) for line in b.splitlines()[1:] if "=" in line)
             for b in blocks[1:]]
    return header, trees


def _flat_tree(tree: dict) -> _Tree | None:
    """One tree breadth-first (Forest), or None unless its splits are plain numerical ones and
    its leaves constants."""
    leaves = np.array(tree["leaf_value"].split(), np.float64)
    if int(tree.get("is_linear", 0)):
        return None
    if leaves.size == 1:
        return _Tree(np.zeros(1), np.full(1, np.inf), np.zeros(1), leaves, 0)
    decision = np.array(tree["decision_type"].split(), np.int64)
    if (decision & (_CATEGORICAL | _MISSING)).any():
        return None
    left, right = (np.array(tree[k].split(), np.int64) for k in ("left_child", "right_child"))
    order, depth = _breadth_first(left, right)
    internal = order >= 0
    split = order[internal]
    feature, threshold = np.zeros(order.size), np.full(order.size, np.inf)
    feature[internal] = np.array(tree["split_feature"].split(), np.int64)[split]
    threshold[internal] = np.array(tree["threshold"].split(), np.float64)[split]
    child = np.arange(order.size)
    # internal node k's children were placed together, in the order the nodes were visited
    child[internal] = 1 + 2 * np.arange(split.size)
    value = np.zeros(order.size)
    value[~internal] = leaves[~order[~internal]]
    return _Tree(feature, threshold, child, value, depth)


def _breadth_first(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, int]:
    """LightGBM's node numbers in breadth-first order from the root (k >= 0 a split, k < 0 leaf
    ~k), each split's two children side by side; and the depth in splits."""
    order, level, depth = [0], [0], 0
    while level:
        depth += 1
        level = [c for k in level for c in (left[k], right[k])]
        order += level
        level = [k for k in level if k >= 0]
    return np.array(order, np.int64), depth


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
                    v = np.float64(X[lo + r, feature[i]])
                    v = v if abs(v) > _ZERO else 0.0     # NaN too: abs(NaN) > x is false
                    # a comparison, not a branch: the rows of a block go on without waiting
                    at[r] = child[i] + (v > threshold[i])
            for r in range(hi - lo):
                total[r] += leaf_value[at[r]]
        out[lo:hi] = total
    return out
