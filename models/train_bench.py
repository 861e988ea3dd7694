"""The `bench` stage that prices LightGBM LambdaRank training for the projection.

A fit costs, per round, a fixed part (trees, gradients per query group) plus a part per row and
column, and while early stopping watches held-out graphs, a part per watched row (their
prediction and the Kendall metric in Python). Three fits of the same rounds separate them: all
train graphs, a tenth of them, and the unwatched graphs watching the rest, as `train`'s probe
does (models/selection.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from features import load_entry

from .lgbm import LAMBDARANK_DEFAULTS, LambdaRank
from .selection import early_stop_split

ROUNDS = 200   # every fit runs all of them: early stopping is set beyond the last round


@dataclass(frozen=True)
class TrainCosts:
    """Seconds per round, per (row x round x column), per (watched row x round), per
    (predicted row x round)."""
    round: float
    row: float
    watched: float
    predict: float


def _fit(data, watch=None) -> tuple[float, LambdaRank]:
    params = replace(LAMBDARANK_DEFAULTS["tile"], n_estimators=ROUNDS, early_stopping=ROUNDS + 1)
    start = time.perf_counter()
    model = LambdaRank(params).fit(data, watch)
    return time.perf_counter() - start, model


def train_stage(entry: Path) -> dict:
    """Runs in a bench child: the three fits and one prediction on a tile entry."""
    data = load_entry(entry)
    fit_idx, watch_idx = early_stop_split(data, 0)
    small = data.take_graphs(np.arange(0, data.n_graphs, 10))
    t_all, model = _fit(data)
    start = time.perf_counter()
    model.predict(data)
    t_predict = time.perf_counter() - start
    t_small, _ = _fit(small)
    t_watch, _ = _fit(data.take_graphs(fit_idx), data.take_graphs(watch_idx))
    return {"rows": data.X.shape[0], "small_rows": small.X.shape[0],
            "fit_rows": int(data.group_sizes[fit_idx].sum()),
            "watched_rows": int(data.group_sizes[watch_idx].sum()),
            "columns": data.X.shape[1], "all_s": t_all, "small_s": t_small, "watch_s": t_watch,
            "predict_s": t_predict}


def train_costs(m: dict) -> TrainCosts:
    """The unit costs that explain the three fits (each part at least zero)."""
    cols = m["columns"]
    row = max(m["all_s"] - m["small_s"], 0.0) / (ROUNDS * cols * (m["rows"] - m["small_rows"]))
    per_round = max(m["all_s"] / ROUNDS - row * m["rows"] * cols, 0.0)
    plain_watch = ROUNDS * (per_round + row * m["fit_rows"] * cols)
    watched = max(m["watch_s"] - plain_watch, 0.0) / (ROUNDS * max(m["watched_rows"], 1))
    return TrainCosts(per_round, row, watched, m["predict_s"] / (ROUNDS * m["rows"]))
