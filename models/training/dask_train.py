"""Training on a Dask cluster: the final fit of a model whose rounds are already chosen.

The rows go to the workers in one partition per worker, each a run of whole query groups (a
group split across partitions would be two groups to LightGBM's lambdarank, and XGBoost joins
a worker's partitions without reordering them). LightGBM (`lightgbm.dask`) and XGBoost
(`xgboost.dask`) train data-parallel on those partitions; the booster they return is put into
the ranker object, whose `save` writes the same native file as a local fit, so `submit`, `rank`
and `report` read it unchanged. Labels, groups and parameters are the ranker's own
(`training_rows`, `lgb_params`, `target`, `xgb_params`).
"""
from __future__ import annotations

import warnings

import numpy as np
import dask.array as da
from dask import delayed
from lightgbm.dask import DaskLGBMRanker, DaskLGBMRegressor

import xgboost.dask as dxgb

from features import FeatureSet

from models.training.base import qid_from_ptr
from models.training.binned import BinnedRows
from models.training.lgbm import LambdaRank, safe_names
from models.training.xgb import XGBoostRank


def cluster_fit(client):
    """fit(model, train) -> model for models/training/family_split.py: the model trained on
    `client`'s cluster for its params.n_estimators rounds (no early stopping there: see
    family_split.py)."""
    def fit(model, train: FeatureSet | BinnedRows):
        train = train.matrix if isinstance(train, BinnedRows) else train
        if isinstance(model, XGBoostRank):
            _fit_xgboost(client, model, train)
        else:
            _fit_lightgbm(client, model, train)
        return model
    fit.needs_matrix = True    # the rows go to the workers: runs.fit_source keeps them whole
    return fit


def partition_bounds(group_sizes: np.ndarray, n_parts: int) -> np.ndarray:
    """Indices into the groups where partitions start and end (0, ..., n_groups): at most
    n_parts runs of whole groups with about equal rows, none empty."""
    ends = np.cumsum(group_sizes)
    if ends.size == 0:
        return np.zeros(1, np.int64)
    targets = ends[-1] * np.arange(1, n_parts) / n_parts
    i = np.searchsorted(ends, targets)       # the group that reaches each target
    before = np.where(i > 0, ends[np.maximum(i - 1, 0)], 0)
    cuts = np.where(targets - before < ends[i] - targets, i, i + 1)   # the nearer of its ends
    return np.unique(np.concatenate([[0], cuts.clip(1, ends.size), [ends.size]]))


def _scatter_parts(client, group_sizes: np.ndarray, *columns: np.ndarray, groups=None):
    """Dask arrays of `columns` (row-aligned) and of `groups`, one partition per worker pinned
    to it, partitions cut between groups."""
    workers = sorted(client.scheduler_info()["workers"])
    bounds = partition_bounds(group_sizes, len(workers))
    row_bounds = np.concatenate([[0], np.cumsum(group_sizes)])[bounds]
    out = [[] for _ in range(len(columns) + (groups is not None))]
    for p, worker in enumerate(workers[:bounds.size - 1]):
        rows = slice(row_bounds[p], row_bounds[p + 1])
        pieces = [c[rows] for c in columns]
        if groups is not None:
            pieces.append(groups[bounds[p]:bounds[p + 1]])
        for i, piece in enumerate(pieces):
            # Unhashed keys: a key made from the data is shared by the next fit of the same rows
            # (the seeds' refits), and released under it when this fit's futures go.
            future = client.scatter(piece, workers=[worker], hash=False)
            out[i].append(da.from_delayed(delayed(future), piece.shape, piece.dtype))
    return [da.concatenate(parts) for parts in out]


def _fit_lightgbm(client, model, train: FeatureSet) -> None:
    order, y, group = model.training_rows(train)
    X = train.X if order is None else train.X[order]
    # Groups of the rows as trained (sub-groups of split graphs), or whole graphs where the
    # objective has none: a pointwise fit does not care, but cutting there costs nothing.
    sizes = group if group is not None else train.group_sizes
    params = model.lgb_params()
    # lightgbm.dask gives each worker as many threads as Dask does; a value here is ignored.
    params.pop("num_threads")
    if isinstance(model, LambdaRank):
        X_d, y_d, group_d = _scatter_parts(client, sizes, X, y, groups=sizes)
        dask_model, fit_args = DaskLGBMRanker(client=client, **params), {"group": group_d}
    else:
        X_d, y_d = _scatter_parts(client, sizes, X, y)
        dask_model, fit_args = DaskLGBMRegressor(client=client, **params), {}
    dask_model.set_params(n_estimators=model.params.n_estimators)
    with warnings.catch_warnings():
        # The scikit-learn wrapper always passes n_jobs, which lightgbm.dask then replaces by
        # the workers' threads, as intended here.
        warnings.filterwarnings("ignore", message="Parameter n_jobs will be ignored")
        dask_model.fit(X_d, y_d, feature_name=safe_names(train.columns), **fit_args)
    model.booster_ = dask_model.booster_
    model.best_iteration_ = model.booster_.current_iteration()


def _fit_xgboost(client, model: XGBoostRank, train: FeatureSet) -> None:
    X_d, y_d, qid_d = _scatter_parts(client, train.group_sizes, train.X, model.target(train),
                                     qid_from_ptr(train.ptr))
    params = model.xgb_params()
    # xgboost.dask sets every worker's threads to its Dask threads.
    params.pop("nthread")
    matrix = dxgb.DaskDMatrix(client, X_d, y_d, qid=qid_d)
    out = dxgb.train(client, params, matrix, num_boost_round=model.params.n_estimators,
                     verbose_eval=False)
    model.booster_ = out["booster"]
    model.best_iteration_ = model.booster_.num_boosted_rounds()
