"""Row orders LightGBM needs (held-out families last, a graph's random sub-groups contiguous),
made in the matrix's own memory for as long as a Dataset is built from it.

`X[order]` would copy the matrix: on a tile train matrix that copy was the largest memory cost of
`train` (the bench measured a fit's peak at 2.96x its matrix). Moving rows along the cycles of the
permutation needs one row of scratch, and moving them back restores X exactly.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from numba import njit


@njit(cache=True)
def _move_rows(X, order):
    """X[i] <- old X[order[i]] for every i, following each cycle of the permutation once."""
    done = np.zeros(order.size, np.bool_)
    scratch = np.empty(X.shape[1], X.dtype)
    for start in range(order.size):
        if done[start]:
            continue
        scratch[:] = X[start]
        i = start
        while order[i] != start:
            X[i] = X[order[i]]
            done[i] = True
            i = order[i]
        X[i] = scratch
        done[i] = True


def is_permutation(order: np.ndarray, n: int) -> bool:
    if order.shape != (n,):
        return False
    if n == 0:
        return True
    return bool(order.min() >= 0 and order.max() < n
                and np.all(np.bincount(order, minlength=n) == 1))


@contextmanager
def rows_in_order(X: np.ndarray, order: np.ndarray | None):
    """Yields X holding X[order] (a permutation of its rows) in its own memory; on exit, also on
    error, X holds its rows as before. Nothing else may read X inside the block. order None: X
    as it is. A read-only X is copied instead, as X[order] would."""
    if order is None:
        yield X
        return
    order = np.asarray(order, np.int64)
    if not is_permutation(order, X.shape[0]):
        raise ValueError(f"order must be a permutation of the {X.shape[0]} rows")
    if not X.flags.writeable:
        yield X[order]
        return
    try:    # numba code runs to its end once started: X is moved whole or not at all
        _move_rows(X, order)
        yield X
    finally:
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        _move_rows(X, inverse)
