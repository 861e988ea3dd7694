"""The `bench` stage that prices LightGBM LambdaRank training for the projection.

A fit costs, per round, a fixed part, a part per row and column (histograms), a part per pair
of rows LambdaRank weighs (each row against up to truncation_level others of its group: 10 for
tile, the whole sub-group of up to 125 rows for layout), and while early stopping watches
held-out graphs, a part per watched row (their prediction and the metric in Python). Four fits of the same rounds
separate them: all train graphs; all of them weighing whole groups; a tenth of them; and the
unwatched graphs watching the rest, as `train`'s probe does (models/training/selection.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import feature_stages as fb
from features import load_entry

from models.training.base import split_groups
from models.training.lgbm import LAMBDARANK_DEFAULTS, LambdaRank
from models.training.selection import early_stop_split, fit_and_watched

ROUNDS = 200   # every fit runs all of them: early stopping is set beyond the last round


@dataclass(frozen=True)
class TrainCosts:
    """Seconds per round, per (row x round x column), per (row pair x round), per (watched row x
    round), per (predicted row x round)."""
    round: float
    row: float
    pair: float
    watched: float
    predict: float


def pairs(group_sizes: np.ndarray, truncation: int) -> int:
    """Row pairs LambdaRank weighs per round: each row against min(group, truncation) rows of
    its group, after groups above max_group_size are split as training splits them."""
    ptr = np.concatenate([[0], np.cumsum(group_sizes, dtype=np.int64)])
    n = split_groups(ptr, LAMBDARANK_DEFAULTS["tile"].max_group_size, np.random.default_rng(0))[1]
    return int((n * np.minimum(n, truncation)).sum())


def _fit(data, watch=None, **change) -> tuple[float, LambdaRank]:
    params = replace(LAMBDARANK_DEFAULTS["tile"], n_estimators=ROUNDS, early_stopping=ROUNDS + 1,
                     **change)
    start = time.perf_counter()
    model = LambdaRank(params).fit(data, watch)
    return time.perf_counter() - start, model


def _probe(data) -> tuple[float, float]:
    """The early-stopping probe as `train` fits it: its seconds, and its peak in MB over the
    process before it."""
    before = fb.reset_peak_rss()
    fit_idx, watch_idx = early_stop_split(data, 0)
    with fit_and_watched(data, fit_idx, watch_idx) as (fit, watched):
        seconds, _ = _fit(fit, watched)
    return seconds, fb.peak_rss_mb() - before


def train_stage(entry: Path) -> dict:
    """Runs in a bench child: the four fits and one prediction on a tile entry, and the memory
    of loading it and of the probe on a tenth of its graphs and on all of them (after a probe
    on a hundredth, so neither pays what a first fit loads once, and before the other fits, so
    what they leave allocated does not count)."""
    start_mb = fb.reset_peak_rss()
    start = time.perf_counter()
    data = load_entry(entry)
    t_load = time.perf_counter() - start
    load_peak_mb = fb.peak_rss_mb()
    loaded_mb = fb.reset_peak_rss()
    fit_idx, watch_idx = early_stop_split(data, 0)
    _probe(data.take_graphs(np.arange(0, data.n_graphs, 100)))   # what a first fit loads once
    small = data.take_graphs(np.arange(0, data.n_graphs, 10))
    _, small_fit_mb = _probe(small)
    t_watch, fit_mb = _probe(data)
    t_all, model = _fit(data)
    start = time.perf_counter()
    model.predict(data)
    t_predict = time.perf_counter() - start
    whole = LAMBDARANK_DEFAULTS["tile"].max_group_size   # no sub-group is larger
    t_whole, _ = _fit(data, truncation_level=whole)
    t_small, _ = _fit(small)
    trunc = LAMBDARANK_DEFAULTS["tile"].truncation_level
    sizes = data.group_sizes
    start = time.perf_counter()
    load_entry(entry, list(data.columns[:1]))
    t_one_column = time.perf_counter() - start
    return {"rows": data.X.shape[0], "small_rows": small.X.shape[0],
            "fit_rows": int(sizes[fit_idx].sum()), "watched_rows": int(sizes[watch_idx].sum()),
            "pairs": pairs(sizes, trunc), "whole_pairs": pairs(sizes, whole),
            "small_pairs": pairs(small.group_sizes, trunc),
            "fit_pairs": pairs(sizes[fit_idx], trunc),
            "columns": data.X.shape[1], "all_s": t_all, "whole_s": t_whole, "small_s": t_small,
            "watch_s": t_watch, "predict_s": t_predict, "load_s": t_load,
            "one_column_load_s": t_one_column,
            "x_mb": data.X.nbytes / 2**20, "small_x_mb": small.X.nbytes / 2**20,
            "start_mb": start_mb, "load_peak_mb": load_peak_mb, "loaded_mb": loaded_mb,
            "fit_mb": fit_mb, "small_fit_mb": small_fit_mb}


def train_costs(m: dict) -> TrainCosts:
    """The unit costs that explain the four fits (each part at least zero)."""
    cols = m["columns"]
    pair = max(m["whole_s"] - m["all_s"], 0.0) / (ROUNDS * max(m["whole_pairs"] - m["pairs"], 1))
    row = max((m["all_s"] - m["small_s"]) / ROUNDS - pair * (m["pairs"] - m["small_pairs"]),
              0.0) / (cols * (m["rows"] - m["small_rows"]))
    per_round = max(m["all_s"] / ROUNDS - row * m["rows"] * cols - pair * m["pairs"], 0.0)
    plain_watch = ROUNDS * (per_round + row * m["fit_rows"] * cols + pair * m["fit_pairs"])
    watched = max(m["watch_s"] - plain_watch, 0.0) / (ROUNDS * max(m["watched_rows"], 1))
    return TrainCosts(per_round, row, pair, watched, m["predict_s"] / (ROUNDS * m["rows"]))


def load_costs(m: dict) -> tuple[float, float]:
    """Seconds per (row x column) and per entry of reading an entry back, from the tile entry
    read whole and with one column (older bench.json: all of it per value, none per entry)."""
    rows, cols = m["rows"], m["columns"]
    if "one_column_load_s" not in m or cols < 2:
        return m["load_s"] / (rows * cols), 0.0
    per_value = max(m["load_s"] - m["one_column_load_s"], 0.0) / (rows * (cols - 1))
    return per_value, max(m["one_column_load_s"] - rows * per_value, 0.0)


def memory_costs(m: dict) -> dict[str, float]:
    """UnitCosts' memory fields, per MB of a matrix: the peak of its load and what stays
    resident after it (both with the fixed cost of a first load and the part being read on top:
    upper bounds for larger entries of more parts), and what the probe adds, split by its extra
    on a tenth of the graphs and on all of them into a part that grows with the rows and one
    that does not (LightGBM bins every row, but samples at most 200,000 rows to find the bins
    and allocates its histograms once)."""
    per_mb = max(m["fit_mb"] - m["small_fit_mb"], 0.0) / (m["x_mb"] - m["small_x_mb"])
    return {"load_memory": (m["load_peak_mb"] - m["start_mb"]) / m["x_mb"],
            "matrix_memory": (m["loaded_mb"] - m["start_mb"]) / m["x_mb"],
            "fit_extra": per_mb, "fit_fixed_mb": max(m["fit_mb"] - per_mb * m["x_mb"], 0.0)}


LAYOUT_ROUNDS = 100   # 50 rounds on 10,000 and 30,000 rows gave 1.60-2.09 us in four runs
LAYOUT_ROWS = (10_000, 50_000)


def layout_stage(entry: Path) -> dict:
    """Runs in a bench child: LambdaRank with the layout defaults (whole sub-groups of 125 rows, 64
    grades) on the first LAYOUT_ROWS rows of a one-graph layout entry, LAYOUT_ROUNDS rounds
    each: what a layout row costs per round."""
    data = load_entry(entry)
    params = replace(LAMBDARANK_DEFAULTS["layout"], n_estimators=LAYOUT_ROUNDS)
    out = {}
    for key, n in zip(("small", "large"), LAYOUT_ROWS):
        part = _first_rows(data, n)
        start = time.perf_counter()
        LambdaRank(params).fit(part)
        out[f"{key}_s"], out[f"{key}_rows"] = time.perf_counter() - start, part.X.shape[0]
    return out


def _first_rows(data, n: int):
    """The first n rows of a one-graph FeatureSet, as one graph."""
    n = min(n, data.X.shape[0])
    return replace(data, X=data.X[:n], runtime=data.runtime[:n], config_idx=data.config_idx[:n],
                   dup_count=data.dup_count[:n], ptr=np.array([0, n], np.int64),
                   graph_ids=data.graph_ids[:1])


def layout_row_cost(m: dict) -> float:
    """Seconds per (layout row x round), from the two fits' difference."""
    r1, r2, t1, t2 = m["small_rows"], m["large_rows"], m["small_s"], m["large_s"]
    if r2 <= r1:   # a file too small for two sizes (bench --quick): the average, fixed part in
        return t2 / (LAYOUT_ROUNDS * max(r2, 1))
    return max(t2 - t1, 0.0) / (LAYOUT_ROUNDS * (r2 - r1))


def layout_round_cost(m: dict) -> float:
    """Seconds per layout round whatever its rows: what the smaller fit costs beyond its rows
    (0 where the two fits could not be told apart: layout_row_cost holds it all)."""
    if m["large_rows"] <= m["small_rows"]:
        return 0.0
    return max(m["small_s"] / LAYOUT_ROUNDS - layout_row_cost(m) * m["small_rows"], 0.0)
