"""A distribution over a graph's layouts learnt from the model's scores (the cross-entropy
method): each searched slot group is set with its own probability, to a permutation drawn from
its own categorical; after each batch of draws the distribution moves towards its best-scored
draws.

Why beside the evolution (search.py): the model's score has valleys a step at a time cannot
cross. On a dev transformer, the file config the model likes best sets 56 groups, and 50 of
them, set alone from the compiler default, lower the score: mutations from the default stall a
few groups out (score 1.15 against the file's 1.18), while draws that set many groups at once,
refit to the best, pass it (1.24 in 8,000 scores). docs/records/tuner_stand_in.md.
"""
from __future__ import annotations

import numpy as np

from features.graph.layout_space import PERM_COUNT, LayoutSpace


class LayoutSampler:
    """The distribution (see the module doc) over the searched groups of one space; kept for a
    whole search, so later rounds start where earlier ones left it."""

    def __init__(self, space: LayoutSpace, start_set: float):
        self.space, self.slots = space, space.slots
        self.count = PERM_COUNT[space.ranks[self.slots[:, 0], self.slots[:, 1]]]
        width = int(self.count.max()) if len(self.slots) else 1
        self.p_set = np.full(len(self.slots), float(start_set))
        self.p_perm = np.where(np.arange(width)[None] < self.count[:, None],
                               1.0 / np.maximum(self.count[:, None], 1), 0.0)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(configs (n, nc, 18), choice (n, groups)): n draws, and each group's permutation
        index in them (-1: left to the compiler)."""
        configs, choice = self.space.default(n), np.full((n, len(self.slots)), -1, np.int64)
        rows, cols = np.nonzero(rng.random(choice.shape) < self.p_set)
        # inverse CDF in one search over every group's cumulative sums, group g's shifted by g
        # (no (draws x permutations) temporary: 720 permutations of a rank-6 group)
        cum = np.cumsum(self.p_perm, axis=1)
        width = cum.shape[1]
        shifted = (cum / np.maximum(cum[:, -1:], 1e-300) + np.arange(len(cum))[:, None]).ravel()
        at = np.searchsorted(shifted, cols + rng.random(cols.size)) - cols * width
        pick = np.clip(at, 0, self.count[cols] - 1)
        choice[rows, cols] = pick
        self.space.set_groups(configs, rows, self.slots[cols], pick)
        return configs, choice

    def fit(self, choice: np.ndarray, scores: np.ndarray, elite: float, rate: float) -> None:
        """Move `rate` of the way towards the frequencies among the best `elite` share of the
        draws (higher score = better); a group no elite draw sets keeps its permutations."""
        if not len(choice):
            return
        keep = max(1, int(elite * len(choice)))
        best = choice[np.argsort(-np.asarray(scores), kind="stable")[:keep]]
        is_set = best >= 0
        self.p_set += rate * (is_set.mean(axis=0) - self.p_set)
        counts = np.zeros_like(self.p_perm)
        rows, cols = np.nonzero(is_set)
        np.add.at(counts, (cols, best[rows, cols]), 1.0)
        total = counts.sum(axis=1, keepdims=True)
        seen = total[:, 0] > 0
        self.p_perm[seen] += rate * (counts[seen] / total[seen] - self.p_perm[seen])
