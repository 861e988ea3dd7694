"""What a run keeps for its report (`pipeline.py report`), written at training time.

Per collection directory: valid_predictions.parquet (every validation row: graph, config, runtime,
ensemble score, whether it is the compiler's default config) and diagnostics.json (the validation
metric per boosting round of every seed, gain per feature). run.json gets the per-graph reference
scores and the wall time of each stage.

"Compiler default first", the reference next to random order:
  layout: the configs that leave every slot at -1 (the compiler's own layouts) first, then the
          rest in file order, which is the search's own order. A graph whose validation rows hold
          no all-default config (usual in the random collections) is ranked in plain file order.
  tile:   the compiler's default tile alone. Its runtime is the graph's normalizer, so its
          runtime / normalizer is 1 and its score 2 - 1 / (best runtime / normalizer); above 1
          when no candidate beats the default.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from features import FeatureSet
from features.rows.feature_set import graph_slices
from features.schema import is_tile

from models import metrics
from models.training import memory

HISTORY_POINTS = 50   # validation scores computed per seed along the boosting rounds
# ... on the first validation graphs up to this many rows: each point is a LightGBM predict call,
# which parses every row's columns again (6.4 s of a 10.8 s tile collection in a 760-file check
# run, where the fit took 3.9 s; on the full download's ~1 M tile valid rows it would be minutes)
HISTORY_ROWS = 20_000


class Stopwatch:
    """Wall seconds per named stage, summed over repeated entries, and the process's peak
    resident MB within each (where Linux lets the peak be reset; else none)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.peak_mb: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str):
        start, resets = time.perf_counter(), memory.reset_peak()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start
            peak = memory.stage_peak_mb() if resets else None
            if peak is not None:
                self.peak_mb[stage] = max(self.peak_mb.get(stage, 0.0), peak)


def default_first_per_graph(data: FeatureSet, is_default: np.ndarray | None) -> np.ndarray:
    """(n_graphs,) score of 'compiler default first' (module docstring); NaN if not known."""
    if is_tile(data.collection):
        return np.array([2.0 - 1.0 / data.runtime[rows].min() for rows in graph_slices(data.ptr)])
    if is_default is None:
        return np.full(data.n_graphs, np.nan)
    # Higher = predicted faster: defaults above everything, then earlier in the file first.
    scores = 2.0 * is_default - data.config_idx / (data.config_idx.max(initial=0) + 1.0)
    return metrics.per_graph_scores(data.collection, scores, data.runtime, data.ptr)


def metric_by_round(models, valid: FeatureSet) -> list[dict]:
    """Per seed: the validation metric after evenly spaced numbers of boosting rounds, on the
    first validation graphs within HISTORY_ROWS rows (at least one); none without validation
    rows (a run trained with --allow-no-valid)."""
    out = []
    if valid.X.shape[0] == 0:
        return out
    n_graphs = max(1, int(np.searchsorted(valid.ptr, HISTORY_ROWS, side="right")) - 1)
    valid = valid.take_graphs(np.arange(min(n_graphs, valid.n_graphs)))
    for seed, model in enumerate(models):
        rounds, scores = model.round_scores(valid, HISTORY_POINTS)
        values = [metrics.collection_score(metrics.per_graph_scores(
            valid.collection, s, valid.runtime, valid.ptr)) for s in scores]
        out.append({"seed": seed, "rounds": rounds, "score": _json_floats(values),
                    "best_iteration": int(model.best_iteration_), "graphs": valid.n_graphs})
    return out


def mean_gain(models, columns) -> dict[str, float]:
    """Share of the total split gain per feature, averaged over seeds; largest first."""
    share = np.zeros(len(columns))
    for model in models:
        gain = model.gain_importance()
        share += gain / gain.sum() if gain.sum() > 0 else 0.0
    share /= len(models)
    order = np.argsort(-share, kind="stable")
    return {columns[i]: float(share[i]) for i in order if share[i] > 0}


def save(out_dir: Path, models, valid: FeatureSet, head: FeatureSet | None, scores: np.ndarray,
         is_default: np.ndarray | None, columns) -> None:
    """Write valid_predictions.parquet and diagnostics.json into a collection's run directory.
    valid: the valid rows' targets and graphs; head: its first graphs with their features (the
    metric by round; None: no valid rows); columns: the models' feature names (an empty valid
    split has none)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({
        "graph_id": np.repeat(np.array(valid.graph_ids, dtype=str), valid.group_sizes),
        "config_idx": valid.config_idx, "runtime": valid.runtime, "score": scores,
        "is_default": np.zeros(scores.size, bool) if is_default is None else is_default,
    }).write_parquet(out_dir / "valid_predictions.parquet")
    payload = {"history": metric_by_round(models, head) if head is not None else [],
               "gain_share": mean_gain(models, columns),
               "default_known": is_default is not None}
    (out_dir / "diagnostics.json").write_text(json.dumps(payload, indent=1))


def read(collection_dir: Path) -> tuple[pl.DataFrame, dict]:
    """(validation rows, diagnostics) of a collection directory written by `save`."""
    preds, diag = collection_dir / "valid_predictions.parquet", collection_dir / "diagnostics.json"
    if not preds.exists() or not diag.exists():
        raise FileNotFoundError(f"{collection_dir}: no report data (valid_predictions.parquet, "
                                f"diagnostics.json); the run predates `pipeline.py report`, "
                                f"retrain it")
    return pl.read_parquet(preds), json.loads(diag.read_text())


def _json_floats(values) -> list:
    return [float(v) if np.isfinite(v) else None for v in values]
