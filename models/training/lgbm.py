"""LightGBM rankers: LambdaRank (the main one) and a pointwise regression reference.

LambdaRank: labels are per-graph runtime ranks binned into `n_grades` levels with a matching
`label_gain`; graphs over LightGBM's 10,000-row limit are split into random sub-groups (all
used each round, or sampled per boosting bag with `oversize="bag"`); gains
and truncation follow the metric (full list for layout's Kendall, top-heavy for tile's top-5);
early stopping watches the competition metric, not NDCG, on the graphs `fit` is given to watch
(models/training/family_split.py passes held-out train families, never the graphs a score is
reported on).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import lightgbm as lgb
import numpy as np

from features import FeatureSet
from models.overrides import at_least, fractions, positive

from models import metrics
from models.training.round_bars import lightgbm_callback, rounds_bar
from models.training.binned import BinnedRows, bin_rows, safe_names
from models.training.forest import raw_scores
from models.training.base import (MAX_LGBM_GROUP, read_params, round_grid, runtime_to_grade,
                                  split_groups, standardized_log_runtime, write_params)


@dataclass(frozen=True)
class TreeParams:
    """Settings every LightGBM objective here shares."""

    n_estimators: int = 300         # the settings every dev CV ran at (docs/records/)
    learning_rate: float = 0.1
    num_leaves: int = 31
    min_data_in_leaf: int = 20
    feature_fraction: float = 0.7
    bagging_fraction: float = 0.8
    bagging_freq: int = 1
    lambda_l2: float = 1.0
    early_stopping: int = 30
    num_threads: int = 2
    seed: int = 0

    def __post_init__(self):
        at_least(self, n_estimators=1, num_leaves=2, min_data_in_leaf=0, bagging_freq=0,
                 early_stopping=1, num_threads=1, seed=0, lambda_l2=0)
        positive(self, "learning_rate")
        fractions(self, "feature_fraction", "bagging_fraction")


@dataclass(frozen=True)
class LambdaRankParams(TreeParams):
    CHOICES: ClassVar[dict] = {"gain": ("linear", "exponential"), "oversize": ("split", "bag")}
    n_grades: int = 31
    gain: str = "linear"            # "linear": every level counts alike; "exponential": 2^l - 1
    truncation_level: int = 10_000  # pairs considered per query; >= group size = whole list
    max_group_size: int = 500       # larger graphs are split into random sub-groups ...
    oversize: str = "split"         # ... all used every round ("split"), or a bagging_fraction
                                    # of sub-groups drawn per boosting bag ("bag")

    def __post_init__(self):
        super().__post_init__()
        at_least(self, n_grades=2, truncation_level=1)
        if not 0 < self.max_group_size <= MAX_LGBM_GROUP:
            raise ValueError(f"max_group_size must be in 1..{MAX_LGBM_GROUP}, "
                             f"got {self.max_group_size}")
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class RegressionParams(TreeParams):
    """Pointwise L2 on within-graph standardised log runtime: no extra settings."""


# Per collection kind: layout is scored on the whole order (every pair counts: linear gains, no
# truncation, small sub-groups keep the pairs cheap), tile on its top 5. Chosen by family CV on
# the dev set; the runs and their numbers are in docs/records/.
LAMBDARANK_DEFAULTS = {
    "layout": LambdaRankParams(n_grades=64, max_group_size=125),
    "tile": LambdaRankParams(gain="exponential", truncation_level=10, min_data_in_leaf=100,
                             feature_fraction=0.4),
}
REGRESSION_DEFAULTS = {"layout": RegressionParams(), "tile": RegressionParams()}


# Column-wise histograms: built only for the features a tree samples (10-20% less per round on
# dev rows, docs/records/). No pre-filter of the features min_data_in_leaf cannot split: rows
# streamed into bins (binned.py) are binned without min_data_in_leaf (LightGBM passes only its
# dataset parameters there), so with it the streamed and in-memory bins would differ.
def _common(p) -> dict:
    return {"learning_rate": p.learning_rate, "num_leaves": p.num_leaves,
            "min_data_in_leaf": p.min_data_in_leaf, "feature_fraction": p.feature_fraction,
            "bagging_fraction": p.bagging_fraction, "bagging_freq": p.bagging_freq,
            "lambda_l2": p.lambda_l2, "num_threads": p.num_threads, "seed": p.seed,
            "deterministic": True, "force_col_wise": True, "verbosity": -1, "metric": "None",
            "feature_pre_filter": False}


def metric_feval(valid: FeatureSet):
    """LightGBM feval: the collection's own metric on the validation graphs (higher = better)."""
    name, score = metrics.stopping_metric(valid)
    return lambda preds, _dataset: (name, score(preds), True)


class LightGBMRanker:
    """Shared fit/predict/save for the LightGBM objectives; subclasses say what to fit."""

    params_cls: type
    booster_: lgb.Booster | None = None

    def __init__(self, params):
        self.params = params
        self.best_iteration_ = 0

    def labels(self, data: FeatureSet) -> np.ndarray:
        """(n,) the target of each of data's rows, in data's order."""
        raise NotImplementedError

    def grouping(self, data: FeatureSet) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(row order, or None for the rows as they are; query group sizes in that order, or
        None): the order permutes rows within their graphs only."""
        return None, None

    def training_rows(self, data: FeatureSet):
        """(row order or None; target per row in that order; group sizes or None): what
        LightGBM trains on, here or on a cluster."""
        order, group = self.grouping(data)
        y = self.labels(data)
        return order, (y if order is None else y[order]), group

    def lgb_params(self) -> dict:
        """LightGBM's parameters for these settings (shared by local and Dask training)."""
        raise NotImplementedError

    def fit(self, train: FeatureSet, valid: FeatureSet | None = None):
        """valid: graphs to early-stop on; train and valid may be views of one matrix
        (family_split.fit_and_watched), so valid is binned here, while it holds its rows."""
        binned = bin_rows(train, list(train.columns), self.grouping, self.labels,
                          self.lgb_params())
        watched = None
        if valid is not None and valid.n_graphs:
            watched = (lgb.Dataset(valid.X, reference=binned.dataset,
                                   params=self.lgb_params()).construct(), valid)
        return self._train(binned.dataset, watched, train.collection)

    def fit_binned(self, binned: BinnedRows, graphs: np.ndarray | None = None,
                   watched: np.ndarray | None = None):
        """Fit the given graph positions of rows binned once (None: all of them), early-stopping
        on the `watched` ones (None or empty: no early stopping)."""
        watch = None
        if watched is not None and watched.size:
            watch = (binned.graph_set(watched, self.labels(binned.rows)),
                     binned.rows.take_graphs(np.sort(watched)))
        train_set = binned.graph_set(graphs, self.labels(binned.rows))
        return self._train(train_set, watch, binned.rows.collection)

    def _train(self, train_set: lgb.Dataset, watched, collection: str):
        """watched: (its Dataset, its rows' targets and graphs) or None."""
        callbacks, valid_sets, feval = [], [], None
        if watched is not None:
            valid_sets, feval = [watched[0]], metric_feval(watched[1])
            callbacks.append(lgb.early_stopping(self.params.early_stopping, verbose=False))
        with rounds_bar(self.params.n_estimators, collection) as bar:
            self.booster_ = lgb.train(self.lgb_params(), train_set,
                                      num_boost_round=self.params.n_estimators,
                                      valid_sets=valid_sets, feval=feval,
                                      callbacks=callbacks + [lightgbm_callback(bar)])
        self.booster_.free_dataset()    # the bins of a subset go with it
        self.best_iteration_ = self.booster_.best_iteration or self.booster_.current_iteration()
        return self

    def predict(self, data: FeatureSet) -> np.ndarray:
        """Scores, higher = predicted faster."""
        if data.X.shape[0] == 0:
            return np.zeros(0)
        # lambdarank's and regression's predict are their raw scores
        return raw_scores(self.booster_, data.X, self.best_iteration_)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.booster_.save_model(str(directory / "model.txt"), num_iteration=self.best_iteration_)
        write_params(directory, self.params, {"best_iteration": self.best_iteration_})

    def gain_importance(self) -> np.ndarray:
        """(n_features,) total split gain per feature of the trees predict() uses."""
        return self.booster_.feature_importance("gain", iteration=self.best_iteration_)

    def round_scores(self, data: FeatureSet, points: int) -> tuple[list[int], list[np.ndarray]]:
        """Scores after about `points` evenly spaced numbers of the rounds the booster holds
        (after early stopping LightGBM keeps those up to the best), adding block by block."""
        rounds = round_grid(self.booster_.current_iteration(), points, self.best_iteration_)
        total, done, out = np.zeros(data.X.shape[0]), 0, []
        for r in rounds:
            total = total + self.booster_.predict(data.X, start_iteration=done,
                                                  num_iteration=r - done)
            done = r
            out.append(total)
        return rounds, out

    @classmethod
    def load(cls, directory: Path):
        params, payload = read_params(directory, cls.params_cls)
        model = cls(params)
        model.booster_ = lgb.Booster(model_file=str(Path(directory) / "model.txt"))
        model.best_iteration_ = payload["best_iteration"]
        return model


class LambdaRank(LightGBMRanker):
    """LightGBM lambdarank over per-graph groups. Pick it by default: it optimises the order."""

    params_cls = LambdaRankParams

    def lgb_params(self) -> dict:
        p = self.params
        gains = (np.arange(p.n_grades) if p.gain == "linear"
                 else 2.0 ** np.arange(p.n_grades) - 1)
        return {**_common(p), "objective": "lambdarank", "label_gain": gains.tolist(),
                "lambdarank_truncation_level": p.truncation_level,
                "bagging_by_query": p.oversize == "bag"}

    def labels(self, data: FeatureSet) -> np.ndarray:
        return runtime_to_grade(data.runtime, data.ptr, self.params.n_grades)

    def grouping(self, data: FeatureSet):
        sizes = data.group_sizes
        if sizes.size and sizes.max() <= self.params.max_group_size:
            return None, sizes    # no graph needs splitting: the rows as they are
        return split_groups(data.ptr, self.params.max_group_size,
                            np.random.default_rng(self.params.seed))


class Regression(LightGBMRanker):
    """Pointwise LightGBM on within-graph standardised log runtime: the cheap reference."""

    params_cls = RegressionParams

    def lgb_params(self) -> dict:
        return {**_common(self.params), "objective": "regression"}

    def labels(self, data: FeatureSet) -> np.ndarray:
        return standardized_log_runtime(data.runtime, data.ptr)


class RegressionPartner(Regression):
    """A regression fitted beside a seed's lambdarank and averaged with it (runs.py's
    REGRESSION_PARTNER_COLLECTIONS): the same model, its own type so a run tells it apart."""
