"""models/training/forest.py: a booster's trees walked by Numba score as LightGBM's predict does,
to the bit, and what the walk does not cover goes to LightGBM itself."""
import gc
import weakref

import lightgbm as lgb
import numpy as np
import pytest

from models.training.forest import raw_scores, walkable
from models.training.lgbm import LambdaRank, LambdaRankParams, Regression, RegressionParams


def _booster(X, y, rounds=40, **params) -> lgb.Booster:
    params = {"objective": "regression", "num_leaves": 15, "min_data_in_leaf": 5, "verbose": -1,
              "learning_rate": 0.3, "seed": 0, "deterministic": True, **params}
    return lgb.train(params, lgb.Dataset(X, y), num_boost_round=rounds)


def _lightgbm(booster, rows, k=None):
    return booster.predict(rows, raw_score=True, num_iteration=k)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 8)).astype(np.float32)
    X[:, 3] = rng.integers(0, 4, 600)           # ties on a few values: thresholds between them
    X[rng.random(600) < 0.3, 5] = 0.0
    y = X[:, 0] * 2 + np.sin(3 * X[:, 1]) + (X[:, 3] == 2) - X[:, 5] + rng.normal(0, 0.1, 600)
    return X, y


@pytest.mark.slow
def test_the_walk_scores_as_lightgbm_to_the_bit(data):
    X, y = data
    booster = _booster(X, y)
    assert walkable(booster, 0) is not None        # walked by the kernel, not handed back
    # the training rows sit right at the thresholds' sides; fresh rows, float64, beyond range
    fresh = np.random.default_rng(1).normal(0, 3, size=(257, 8))
    for rows in (X, fresh, fresh.astype(np.float32), X[:1], X[:0]):
        np.testing.assert_array_equal(raw_scores(booster, rows), _lightgbm(booster, rows))


def test_nan_and_tiny_values_are_read_as_lightgbm_reads_them(data):
    # trained without NaN, the trees have no missing-value rule: LightGBM reads NaN, and any
    # value within 1e-35 of 0, as 0 (zeros split off at +-1e-35)
    X, y = data
    booster = _booster(X, y)
    rows = X[:60].astype(np.float64)
    rows[::3, 0], rows[::4, 5], rows[1, :] = np.nan, np.nan, np.nan
    tiny = np.vstack([X[:60], X[:60]]).astype(np.float64)
    tiny[:60, 5], tiny[60:, 5] = -1.0000000180025095e-35, 1e-36    # a split sits at -1e-35
    for r in (rows, tiny):
        np.testing.assert_array_equal(raw_scores(booster, r), _lightgbm(booster, r))


def test_integer_rows_are_read_as_float32_as_lightgbm_reads_them():
    # 2**24 + 1 is no float32: LightGBM reads it as 2**24, left of the split between the two
    x = np.repeat([2.0 ** 24, 2.0 ** 24 + 1], 50)
    booster = _booster(np.column_stack([x, np.zeros_like(x)]), x - 2.0 ** 24, rounds=3)
    rows = np.array([[2 ** 24, 0], [2 ** 24 + 1, 0]], np.int64)
    scores = raw_scores(booster, rows)
    np.testing.assert_array_equal(scores, _lightgbm(booster, rows))
    assert scores[0] == scores[1]


@pytest.mark.parametrize("extra", [{"zero_as_missing": True}, {"nan_rows": True},
                                   {"categorical_feature": [3]}, {"linear_tree": True}])
def test_trees_the_walk_does_not_cover_are_scored_by_lightgbm(data, extra):
    X, y = data
    X = X.copy()
    if extra.pop("nan_rows", False):
        X[::7, 0] = np.nan                          # trains NaN rules into the trees
    categorical = extra.pop("categorical_feature", "auto")
    y = y + 3 * (X[:, 3] == 1)                      # worth a categorical split
    params = {"objective": "regression", "num_leaves": 15, "min_data_in_leaf": 5, "verbose": -1,
              "seed": 0, **extra}
    booster = lgb.train(params, lgb.Dataset(X, y, categorical_feature=categorical),
                        num_boost_round=10)
    assert walkable(booster, 0) is None
    rows = np.vstack([X[:40], np.zeros((3, 8), np.float32)])
    np.testing.assert_array_equal(raw_scores(booster, rows), _lightgbm(booster, rows))


def test_a_forest_of_single_leaves_scores_their_values(data):
    X, y = data
    booster = _booster(X, y, rounds=3, min_data_in_leaf=10_000)    # no split can be made
    forest = walkable(booster, 0)
    assert forest is not None and forest.depth.max(initial=0) == 0
    scores = raw_scores(booster, X[:5])
    np.testing.assert_array_equal(scores, _lightgbm(booster, X[:5]))
    assert np.allclose(scores, y.mean())


def test_rows_of_the_wrong_width_are_refused(data):
    X, y = data
    booster = _booster(X, y, rounds=2)
    with pytest.raises(ValueError, match="8 features.*shape \\(4, 7\\)"):
        raw_scores(booster, X[:4, :7])


def test_raw_scores_follow_the_iterations_asked_and_the_boosters_best(data):
    X, y = data
    booster = _booster(X, y, rounds=30)
    for k in (None, 7, 30, 0):
        np.testing.assert_array_equal(raw_scores(booster, X, k), _lightgbm(booster, X, k))
    booster.best_iteration = 5                     # what predict uses when not told
    np.testing.assert_array_equal(raw_scores(booster, X), _lightgbm(booster, X))


def test_a_booster_scored_once_is_not_kept_alive(data):
    X, y = data
    booster = _booster(X, y, rounds=3)
    raw_scores(booster, X[:3])
    gone = weakref.ref(booster)
    del booster
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("ranker", [LambdaRank(LambdaRankParams()), Regression(RegressionParams())])
def test_the_rankers_predict_is_their_raw_score(data, ranker):
    # LightGBMRanker.predict hands the walk's raw scores on: right only where LightGBM's
    # predict transforms nothing, as for these objectives
    X, y = data
    grades = np.digitize(y, np.quantile(y, [0.25, 0.5, 0.75]))
    params = {**ranker.lgb_params(), "verbose": -1, "min_data_in_leaf": 5}
    booster = lgb.train(params, lgb.Dataset(X, grades, group=[100] * 6), num_boost_round=5)
    np.testing.assert_array_equal(booster.predict(X), raw_scores(booster, X))
