"""What every ranker shares: the sign convention, labels, groups and native save/load.

SIGN CONVENTION: a ranker's `predict` returns scores where higher = predicted faster. Metrics,
seed averaging and the submission writer all rely on it (tests/test_models.py checks it).
"""
from __future__ import annotations

import json
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from features import FeatureSet
from features.rows.feature_set import graph_slices, map_graphs

MAX_LGBM_GROUP = 10_000  # LightGBM's lambdarank refuses larger query groups


class Ranker(Protocol):
    params: object

    def fit(self, train: FeatureSet, valid: FeatureSet | None = None) -> "Ranker": ...
    def predict(self, data: FeatureSet) -> np.ndarray: ...
    def save(self, directory: Path) -> None: ...
    def gain_importance(self) -> np.ndarray: ...
    def round_scores(self, data: FeatureSet, points: int) -> tuple[list[int], list[np.ndarray]]: ...


def within_graph_rank(runtime: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """(n,) float64 in [0, 1): 0 for the fastest config of each graph, ties averaged."""
    def rank(r: np.ndarray) -> np.ndarray:
        order = np.argsort(r, kind="stable")
        ranks = np.empty(r.size)
        ranks[order] = np.arange(r.size)
        _, inverse = np.unique(r, return_inverse=True)
        return np.bincount(inverse, ranks)[inverse] / np.bincount(inverse)[inverse] / r.size
    return map_graphs(rank, runtime, ptr)


def runtime_to_grade(runtime: np.ndarray, ptr: np.ndarray, n_grades: int) -> np.ndarray:
    """(n,) int32 relevance in 0..n_grades-1, highest for the fastest configs of each graph."""
    if n_grades < 2:
        raise ValueError(f"n_grades must be at least 2, got {n_grades}")
    pct = within_graph_rank(runtime, ptr)
    return (n_grades - 1 - np.floor(pct * n_grades)).clip(0, n_grades - 1).astype(np.int32)


def standardized_log_runtime(runtime: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """-(log runtime - graph mean) / graph std: a pointwise target where higher = faster."""
    def standardized(r: np.ndarray) -> np.ndarray:
        x = np.log(r)
        sd = x.std()
        return -(x - x.mean()) / (sd if sd > 0 else 1.0)
    return map_graphs(standardized, runtime, ptr)


def split_groups(ptr: np.ndarray, max_size: int, rng: np.random.Generator):
    """Split every group larger than max_size into random near-equal sub-groups.

    Returns (row order, new group sizes): X[order] keeps each sub-group contiguous and every
    row is kept once, so no config is lost to LightGBM's group-size limit."""
    order, sizes = [], []
    for g in graph_slices(ptr):
        rows = np.arange(g.start, g.stop)
        n = rows.size
        if n <= max_size:
            order.append(rows)
            sizes.append(n)
            continue
        parts = np.array_split(rng.permutation(rows), -(-n // max_size))
        order += parts
        sizes += [p.size for p in parts]
    return np.concatenate(order) if order else np.zeros(0, np.int64), np.array(sizes, np.int64)


def qid_from_ptr(ptr: np.ndarray) -> np.ndarray:
    """(n,) int64 query id per row, as XGBoost's `qid` wants."""
    return np.repeat(np.arange(ptr.size - 1), np.diff(ptr))


def normalize_per_graph(scores: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Min-max scale scores within each graph, so models of different scales can be averaged."""
    def scaled(s: np.ndarray) -> np.ndarray:
        span = s.max() - s.min()
        return (s - s.min()) / span if span > 0 else np.zeros(s.size)
    return map_graphs(scaled, scores, ptr)


def round_grid(total: int, points: int, also: int) -> list[int]:
    """About `points` evenly spaced round counts in 1..total, plus total and `also` (the round
    predict() stops at) when it lies in 1..total."""
    if total <= 0:
        return []
    step = max(1, -(-total // max(points, 1)))
    grid = set(range(step, total + 1, step)) | {total}
    if 1 <= also <= total:
        grid.add(also)
    return sorted(grid)


def apply_overrides(params, overrides: dict[str, object]):
    """dataclasses.replace with a clear error for keys the params class does not have."""
    known = {f.name for f in fields(params)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown} for {type(params).__name__}; "
                         f"known: {sorted(known)}")
    return replace(params, **overrides)


def write_params(directory: Path, params, extra: dict | None = None) -> None:
    payload = {"class": type(params).__name__, "params": asdict(params), **(extra or {})}
    (directory / "params.json").write_text(json.dumps(payload, indent=1))


def read_params(directory: Path, params_cls):
    payload = json.loads((Path(directory) / "params.json").read_text())
    return params_cls(**payload["params"]), payload
