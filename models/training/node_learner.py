"""The node learner: LightGBM scores node rows (features/rows/node_rows.py), a config scores the sum
of its nodes' row scores (higher = predicted faster).

Its loss is the within-graph squared error of the config sums against standardised log runtime
(the regression ranker's target), both centred per graph, each graph weighing alike; a custom
objective spreads each config's gradient over its node rows. A row's Hessian is scaled by how
many nodes of its graph share its group and context: a leaf moves every such node of a config
at once, and the plain diagonal would overshoot by about that many.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np
from numba import njit, prange

from features import FeatureSet
from features.rows.feature_set import graph_slices
from features.rows.node_rows import (NODE_ROW_COLLECTIONS, NodeRows, NodeSet, sample_configs,
                                     stack)
from models.overrides import at_least, fractions, positive

from models.training.base import read_params, standardized_log_runtime, write_params
from models.training.forest import raw_scores


# The collections a run gives a node learner: those whose builds make node rows (see there why)
NODE_COLLECTIONS = NODE_ROW_COLLECTIONS


@dataclass(frozen=True)
class NodeParams:
    n_estimators: int = 600
    learning_rate: float = 0.2
    num_leaves: int = 31
    min_data_in_leaf: int = 100
    feature_fraction: float = 0.8
    bagging_fraction: float = 0.8
    bagging_freq: int = 1
    lambda_l2: float = 1.0
    num_threads: int = 2
    seed: int = 0
    train_configs: int = 200    # configs per train graph whose node rows are fit

    def __post_init__(self):
        at_least(self, n_estimators=1, num_leaves=2, min_data_in_leaf=0, bagging_freq=0,
                 num_threads=1, seed=0, lambda_l2=0, train_configs=2)
        positive(self, "learning_rate")
        fractions(self, "feature_fraction", "bagging_fraction")


def objective(data: NodeSet):
    """LightGBM's fobj(preds, dataset) -> (grad, hess) per node row of `data`."""
    sizes = np.diff(data.ptr).astype(np.float64)
    graph = np.repeat(np.arange(sizes.size), np.diff(data.ptr))
    target = standardized_log_runtime(data.runtime, data.ptr)
    weight = (2.0 / sizes[graph])[data.pair_config]        # d(loss) / d(error) per pair
    hess = np.bincount(data.pair_row, weights=weight, minlength=data.X.shape[0]) * data.bucket
    # every config's pairs are contiguous (node_rows.stack); the rows' pairs, once sorted
    by_row = np.argsort(data.pair_row, kind="stable")
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(data.pair_row,
                                                         minlength=data.X.shape[0]))])
    config_ptr = np.concatenate([[0], np.cumsum(np.bincount(data.pair_config,
                                                            minlength=data.n_configs))])

    def fobj(preds, _):
        s = _segment_sums(preds, data.pair_row, config_ptr)
        error = s - (np.bincount(graph, weights=s) / sizes)[graph] - target
        return _row_gradients(error, weight, data.pair_config, by_row, row_ptr), hess
    return fobj


@njit(cache=True, parallel=True)
def _segment_sums(preds, pair_row, config_ptr):
    """(configs,) the sum of preds over each config's pairs, config_ptr[c]:config_ptr[c + 1]."""
    out = np.zeros(config_ptr.size - 1)
    for c in prange(out.size):
        for j in range(config_ptr[c], config_ptr[c + 1]):
            out[c] += preds[pair_row[j]]
    return out


@njit(cache=True, parallel=True)
def _row_gradients(error, weight, pair_config, by_row, row_ptr):
    """(rows,) each row's sum of weight x its config's error over its pairs (by_row sorted)."""
    out = np.zeros(row_ptr.size - 1)
    for u in prange(out.size):
        for j in range(row_ptr[u], row_ptr[u + 1]):
            p = by_row[j]
            out[u] += weight[p] * error[pair_config[p]]
    return out


class NodeModel:
    def __init__(self, params: NodeParams | None = None):
        self.params = params or NodeParams()
        self.booster: lgb.Booster | None = None

    def row_scores(self, X: np.ndarray) -> np.ndarray:
        """(rows,) the booster's raw score of each node row."""
        return raw_scores(self.booster, X)

    def lgb_params(self) -> dict:
        p = self.params
        return dict(learning_rate=p.learning_rate, num_leaves=p.num_leaves,
                    min_data_in_leaf=p.min_data_in_leaf, feature_fraction=p.feature_fraction,
                    bagging_fraction=p.bagging_fraction, bagging_freq=p.bagging_freq,
                    lambda_l2=p.lambda_l2, num_threads=p.num_threads, seed=p.seed,
                    deterministic=True, force_col_wise=True, verbose=-1)

    def fit(self, train: FeatureSet) -> "NodeModel":
        """Fit on the node rows of train_configs configs of each train graph (train.nodes)."""
        rng = np.random.default_rng(self.params.seed)
        graphs, runtimes = [], []
        for nodes, rows in zip(_nodes_of(train), graph_slices(train.ptr)):
            sampled, picked = sample_configs(nodes, self.params.train_configs, rng)
            graphs.append(sampled)
            runtimes.append(train.runtime[rows][picked])
        data = stack(graphs, runtimes)
        params = {**self.lgb_params(), "objective": objective(data)}
        self.booster = lgb.train(params, lgb.Dataset(data.X, free_raw_data=True),
                                 num_boost_round=self.params.n_estimators)
        return self

    def predict(self, data: FeatureSet) -> np.ndarray:
        """(rows,) score of each row's config (higher = predicted faster)."""
        nodes = _nodes_of(data)
        at = np.cumsum([0] + [n.X.shape[0] for n in nodes])
        scores = self.row_scores(np.vstack([n.X for n in nodes])) if at[-1] else np.zeros(0)
        return np.concatenate([n.config_scores(scores[lo:hi])
                               for n, lo, hi in zip(nodes, at[:-1], at[1:])] + [np.zeros(0)])

    def predict_graph(self, nodes: NodeRows, seen: "RowScores") -> np.ndarray:
        """(configs,) predict's scores of one graph's configs, scoring only the node rows
        `seen` has not scored (and adding them to it)."""
        return nodes.config_scores(seen.scores(self, nodes))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(directory / "model.txt"))
        write_params(directory, self.params)

    @classmethod
    def load(cls, directory: Path) -> "NodeModel":
        params, _ = read_params(directory, NodeParams)
        model = cls(params)
        model.booster = lgb.Booster(model_file=str(Path(directory) / "model.txt"))
        return model


class RowScores:
    """One node learner's scores of the node rows of one graph seen so far, by row key: an
    autotuner's candidates share most node rows from call to call, and scoring the rows is
    most of the learner's cost, even walked by Numba (docs/records/README.md, "Node rows
    scored by Numba")."""

    def __init__(self):
        self.keys, self.values = np.zeros(0, np.uint64), np.zeros(0)

    def scores(self, model: NodeModel, nodes: NodeRows) -> np.ndarray:
        at = np.minimum(np.searchsorted(self.keys, nodes.key), max(self.keys.size - 1, 0))
        hit = (self.keys[at] == nodes.key) if self.keys.size else np.zeros(nodes.key.size, bool)
        out = np.empty(nodes.key.size)
        out[hit] = self.values[at[hit]]
        if not hit.all():
            out[~hit] = model.row_scores(nodes.X[~hit])
            keys = np.concatenate([self.keys, nodes.key[~hit]])
            order = np.argsort(keys, kind="stable")
            self.keys, self.values = keys[order], np.concatenate([self.values, out[~hit]])[order]
        return out


def _nodes_of(data: FeatureSet) -> tuple:
    if data.nodes is None:
        raise ValueError(f"{data.collection}: the node learner needs node rows (built with "
                         f"'full' rows of features.rows.node_rows.NODE_ROW_COLLECTIONS)")
    return data.nodes
