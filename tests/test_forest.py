"""models/training/forest.py: a booster's trees walked by Numba score as LightGBM's predict does,
to the bit, and what the walk does not cover goes to LightGBM itself."""
import lightgbm as lgb
import numpy as np
import pytest

from models.training.forest import Forest, raw_scores
from models.training.lgbm import LambdaRank, LambdaRankParams, Regression, RegressionParams


def _booster(X, y, rounds=40, **params) -> lgb.Booster:
    params = {"objective": "regression", "num_leaves": 15, "min_data_in_leaf": 5, "verbose": -1,
              "learning_rate": 0.3, "seed": 0, "deterministic": True, **params}
    return lgb.train(params, lgb.Dataset(X, y), num_boost_round=rounds)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 8)).astype(np.float32)
    X[:, 3] = rng.integers(0, 4, 600)           # ties on a few values: thresholds between them
    X[rng.random(600) < 0.3, 5] = 0.0
    y = X[:, 0] * 2 + np.sin(3 * X[:, 1]) + (X[:, 3] == 2) - X[:, 5] + rng.normal(0, 0.1, 600)
    return X, y


def test_the_walk_scores_as_lightgbm_to_the_bit(data):
    X, y = data
    booster = _booster(X, y)
    forest = Forest.of(booster)
    assert forest.arrays is not None                 # walked by the kernel, not handed back
    # the training rows sit right at the thresholds' sides; fresh rows, float64, beyond range
    rng = np.random.default_rng(1)
    fresh = rng.normal(0, 3, size=(257, 8))
    for rows in (X, fresh, fresh.astype(np.float32), X[:1], X[:0]):
        np.testing.assert_array_equal(forest.predict(rows), booster.predict(rows, raw_score=True))


def test_a_nan_goes_where_lightgbm_sends_it(data):
    # trained without NaN, LightGBM's trees have no missing-value rule and read NaN as 0
    X, y = data
    booster = _booster(X, y)
    rows = X[:50].copy()
    rows[::3, 0], rows[::4, 5], rows[1, :] = np.nan, np.nan, np.nan
    np.testing.assert_array_equal(Forest.of(booster).predict(rows),
                                  booster.predict(rows, raw_score=True))
    assert not np.isnan(rows[2:3, :]).all() and np.isnan(rows).any()   # the input is untouched


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
    forest = Forest.of(booster)
    assert forest.arrays is None
    rows = np.vstack([X[:40], np.zeros((3, 8), np.float32)])
    np.testing.assert_array_equal(forest.predict(rows), booster.predict(rows, raw_score=True))


def test_a_forest_of_single_leaves_scores_their_values(data):
    X, y = data
    booster = _booster(X, y, rounds=3, min_data_in_leaf=10_000)    # no split can be made
    forest = Forest.of(booster)
    assert forest.arrays is not None and forest.arrays[-1].max(initial=0) == 0
    scores = forest.predict(X[:5])
    np.testing.assert_array_equal(scores, booster.predict(X[:5], raw_score=True))
    assert np.allclose(scores, y.mean())


def test_rows_of_the_wrong_width_are_refused(data):
    X, y = data
    forest = Forest.of(_booster(X, y, rounds=2))
    with pytest.raises(ValueError, match="8 features.*shape \\(4, 7\\)"):
        forest.predict(X[:4, :7])


def test_raw_scores_follow_the_iterations_asked_and_read_each_booster_once(data, monkeypatch):
    X, y = data
    booster = _booster(X, y, rounds=30)
    for k in (None, 7, 30):
        np.testing.assert_array_equal(raw_scores(booster, X, k),
                                      booster.predict(X, raw_score=True, num_iteration=k))
    reads = []
    monkeypatch.setattr(Forest, "of", classmethod(lambda cls, *a: reads.append(a)))
    raw_scores(booster, X[:3], 7)
    assert reads == []                              # read at the first call for 7 iterations


@pytest.mark.parametrize("ranker", [LambdaRank(LambdaRankParams()), Regression(RegressionParams())])
def test_the_rankers_predict_is_their_raw_score(data, ranker):
    # LightGBMRanker.predict hands the walk's raw scores on: right only where LightGBM's
    # predict transforms nothing, as for these objectives
    X, y = data
    grades = np.digitize(y, np.quantile(y, [0.25, 0.5, 0.75]))
    params = {**ranker.lgb_params(), "verbose": -1, "min_data_in_leaf": 5}
    booster = lgb.train(params, lgb.Dataset(X, grades, group=[100] * 6), num_boost_round=5)
    np.testing.assert_array_equal(booster.predict(X), raw_scores(booster, X))
