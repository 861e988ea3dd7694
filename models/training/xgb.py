"""XGBoost pairwise ranker: the second opinion next to LightGBM LambdaRank.

`rank:pairwise` with continuous targets (within-graph rank percentile, so every pair of distinct
runtimes is a training pair regardless of how the grades would bin) and the `mean` pair method
(random pairs per row, which treats the whole list alike — what Kendall tau scores). Pick it to
cross-check LambdaRank or to ensemble with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xgboost as xgb

from features import FeatureSet
from models.overrides import at_least, fractions, positive

from models import metrics
from models.training.round_bars import XGBoostProgress, rounds_bar
from models.training.base import (qid_from_ptr, read_params, round_grid, within_graph_rank,
                                  write_params)


@dataclass(frozen=True)
class XGBoostParams:
    n_estimators: int = 300         # as LightGBM's (models/training/lgbm.py TreeParams)
    learning_rate: float = 0.1
    max_depth: int = 6
    min_child_weight: float = 1.0
    subsample: float = 0.8
    colsample_bytree: float = 0.7
    reg_lambda: float = 1.0
    pairs_per_sample: int = 8
    early_stopping: int = 30
    num_threads: int = 2
    seed: int = 0

    def __post_init__(self):
        at_least(self, n_estimators=1, max_depth=1, min_child_weight=0, reg_lambda=0,
                 pairs_per_sample=1, early_stopping=1, num_threads=1, seed=0)
        positive(self, "learning_rate")
        fractions(self, "subsample", "colsample_bytree")


# Family CV on the dev layout collections: 0.005 below LambdaRank's (docs/records/).
XGBOOST_DEFAULTS = {"layout": XGBoostParams(), "tile": XGBoostParams()}


class XGBoostRank:
    """XGBoost rank:pairwise over per-graph query ids. predict(): higher = faster."""

    params_cls = XGBoostParams

    def __init__(self, params: XGBoostParams):
        self.params = params
        self.booster_: xgb.Booster | None = None
        self.best_iteration_ = 0

    def xgb_params(self) -> dict:
        """XGBoost's parameters for these settings (shared by local and Dask training)."""
        p = self.params
        return {"objective": "rank:pairwise", "lambdarank_pair_method": "mean",
                "lambdarank_num_pair_per_sample": p.pairs_per_sample, "eta": p.learning_rate,
                "max_depth": p.max_depth, "min_child_weight": p.min_child_weight,
                "subsample": p.subsample, "colsample_bytree": p.colsample_bytree,
                "lambda": p.reg_lambda, "nthread": p.num_threads, "seed": p.seed,
                "tree_method": "hist", "disable_default_eval_metric": 1}

    @staticmethod
    def target(data: FeatureSet) -> np.ndarray:
        """(n_rows,) training target: 1 for the fastest config of each graph, towards 0 for
        the slowest (shared by local and Dask training)."""
        return 1.0 - within_graph_rank(data.runtime, data.ptr)

    def _matrix(self, data: FeatureSet, with_label: bool) -> xgb.DMatrix:
        label = self.target(data) if with_label else None
        return xgb.DMatrix(data.X, label=label, qid=qid_from_ptr(data.ptr))

    def fit(self, train: FeatureSet, valid: FeatureSet | None = None) -> "XGBoostRank":
        evals, kwargs = [], {}
        if valid is not None and valid.n_graphs:
            evals = [(self._matrix(valid, with_label=False), "valid")]
            kwargs = {"custom_metric": self._metric(valid), "maximize": True,
                      "early_stopping_rounds": self.params.early_stopping}
        with rounds_bar(self.params.n_estimators, train.collection) as bar:
            self.booster_ = xgb.train(self.xgb_params(), self._matrix(train, with_label=True),
                                      num_boost_round=self.params.n_estimators, evals=evals,
                                      verbose_eval=False, callbacks=[XGBoostProgress(bar)],
                                      **kwargs)
        best = getattr(self.booster_, "best_iteration", None)
        self.best_iteration_ = (best if best is not None
                                else self.booster_.num_boosted_rounds() - 1) + 1
        return self

    @staticmethod
    def _metric(valid: FeatureSet):
        name, score = metrics.stopping_metric(valid)
        return lambda preds, _dmatrix: (name, score(preds))

    def predict(self, data: FeatureSet) -> np.ndarray:
        """Scores, higher = predicted faster."""
        if data.X.shape[0] == 0:
            return np.zeros(0)
        return self.booster_.predict(xgb.DMatrix(data.X),
                                     iteration_range=(0, self.best_iteration_))

    def gain_importance(self) -> np.ndarray:
        """(n_features,) total split gain per feature of the trees predict() uses."""
        gain = self.booster_[:self.best_iteration_].get_score(importance_type="total_gain")
        out = np.zeros(self.booster_.num_features())
        for name, value in gain.items():  # unnamed columns are called f0, f1, ...
            out[int(name[1:])] = value
        return out

    def round_scores(self, data: FeatureSet, points: int) -> tuple[list[int], list[np.ndarray]]:
        """Scores after about `points` evenly spaced numbers of trained rounds, adding block by
        block; each block's margin repeats the base score, a shift no within-graph metric sees."""
        rounds = round_grid(self.booster_.num_boosted_rounds(), points, self.best_iteration_)
        matrix = xgb.DMatrix(data.X)
        total, done, out = np.zeros(data.X.shape[0]), 0, []
        for r in rounds:
            total = total + self.booster_.predict(matrix, iteration_range=(done, r),
                                                  output_margin=True)
            done = r
            out.append(total)
        return rounds, out

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.booster_.save_model(str(directory / "model.json"))
        write_params(directory, self.params, {"best_iteration": self.best_iteration_})

    @classmethod
    def load(cls, directory: Path) -> "XGBoostRank":
        params, payload = read_params(directory, XGBoostParams)
        model = cls(params)
        model.booster_ = xgb.Booster(model_file=str(Path(directory) / "model.json"))
        model.best_iteration_ = payload["best_iteration"]
        return model
