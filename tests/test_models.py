"""Rankers: labels, groups, the sign convention, save/load, and quality floors."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from features.schema import collection_kind
from models.training import RANKERS
from models import metrics
from models.training.base import (apply_overrides, normalize_per_graph, runtime_to_grade,
                                  split_groups, within_graph_rank)
from models.training.lgbm import LambdaRank, LambdaRankParams

from .conftest import make_ranking

FAST = {"n_estimators": 60, "early_stopping": 20}


def _fit(name, train, valid=None, **extra):
    cls, defaults = RANKERS[name]
    kind = collection_kind(train.collection)
    return cls(apply_overrides(defaults[kind], {**FAST, **extra})).fit(train, valid)


def test_grades_stay_in_table_and_fastest_is_highest(rng):
    runtime = rng.random(1000)
    ptr = np.array([0, 400, 1000])
    for n_grades in (2, 5, 31):
        grade = runtime_to_grade(runtime, ptr, n_grades)
        assert grade.min() >= 0 and grade.max() == n_grades - 1
        for g in range(2):
            part, r = grade[ptr[g]:ptr[g + 1]], runtime[ptr[g]:ptr[g + 1]]
            assert part[np.argmin(r)] == n_grades - 1 and part[np.argmax(r)] == 0
            assert np.all(np.diff(part[np.argsort(r)]) <= 0)


def test_tied_runtimes_share_rank():
    pct = within_graph_rank(np.array([3.0, 1.0, 3.0, 2.0]), np.array([0, 4]))
    assert pct.tolist() == [2.5 / 4, 0.0, 2.5 / 4, 1 / 4]


def test_split_groups_keeps_every_row_once(rng):
    ptr = np.array([0, 25_000, 25_010, 31_000])
    order, sizes = split_groups(ptr, 10_000, rng)
    assert sorted(order.tolist()) == list(range(31_000))
    assert sizes.max() <= 10_000 and sizes.sum() == 31_000
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for s, n in zip(starts, sizes):   # every sub-group lies inside one original graph
        graph = np.searchsorted(ptr, order[s:s + n], side="right") - 1
        assert np.unique(graph).size == 1


def test_max_group_size_above_lightgbm_limit_is_refused():
    with pytest.raises(ValueError, match="max_group_size"):
        LambdaRankParams(max_group_size=20_000)


def test_unknown_override_is_refused():
    with pytest.raises(ValueError, match="unknown setting"):
        apply_overrides(LambdaRankParams(), {"num_leafs": 3})


@pytest.mark.parametrize("name", sorted(RANKERS))
def test_rankers_learn_known_structure_and_higher_means_faster(name, rng):
    train = make_ranking(rng, [300] * 8)
    valid = make_ranking(rng, [300] * 3)
    model = _fit(name, train, valid)
    tau = metrics.collection_score(metrics.kendall_per_graph(model.predict(valid), valid.runtime,
                                                             valid.ptr))
    assert tau > 0.7, tau   # positive tau <=> high scores went to fast configs


@pytest.mark.parametrize("name", sorted(RANKERS))
def test_save_load_predicts_identically(name, rng, tmp_path):
    train = make_ranking(rng, [200] * 4)
    model = _fit(name, train)
    model.save(tmp_path / name)
    loaded = type(model).load(tmp_path / name)
    np.testing.assert_array_equal(model.predict(train), loaded.predict(train))
    assert not list((tmp_path / name).glob("*.pkl"))


@pytest.mark.slow
def test_lambdarank_trains_on_a_30000_config_group(rng):
    train = make_ranking(rng, [30_000, 500], n_features=4)
    model = _fit("lambdarank", train, n_estimators=5, max_group_size=10_000)
    assert model.predict(train).shape == (30_500,)


def test_lambdarank_tile_defaults_are_top_heavy():
    from models.training.lgbm import LAMBDARANK_DEFAULTS
    tile, layout = LAMBDARANK_DEFAULTS["tile"], LAMBDARANK_DEFAULTS["layout"]
    assert tile.gain == "exponential" and tile.truncation_level < layout.truncation_level
    assert LambdaRank(layout).lgb_params()["label_gain"] == list(range(layout.n_grades))
    assert layout.max_group_size <= 10_000 and layout.truncation_level >= layout.max_group_size


def test_normalize_per_graph_ranges(rng):
    s = rng.normal(size=10)
    out = normalize_per_graph(s, np.array([0, 4, 10]))
    assert out[:4].min() == 0 and out[:4].max() == 1 and out[4:].max() == 1
    assert np.array_equal(np.argsort(out[:4]), np.argsort(s[:4]))


def test_lambdarank_can_bag_oversized_groups_by_query(rng):
    train = make_ranking(rng, [12_000, 300], n_features=4)
    model = _fit("lambdarank", train, n_estimators=5, oversize="bag", bagging_fraction=0.5)
    assert model.lgb_params()["bagging_by_query"] is True
    assert np.isfinite(model.predict(train)).all()
    with pytest.raises(ValueError, match="oversize"):
        LambdaRankParams(oversize="drop")


def test_cross_validation_scores_held_out_graphs(rng):
    from models.training.runs import TrainConfig, cross_validate
    train = make_ranking(rng, [150] * 6)
    cfg = TrainConfig(ranker="regression", folds=3, seeds=2, overrides=FAST)
    scores = cross_validate(cfg, train)   # every graph scored once per seed
    assert scores.shape == (2, 6) and np.isfinite(scores).all() and scores.mean() > 0.7
    assert cross_validate(TrainConfig(folds=0), train).shape == (0, 6)
    with pytest.raises(ValueError, match="folds"):
        TrainConfig(folds=1)


def test_cross_validation_holds_out_valid_families_too(rng, tmp_path):
    """With folds, CV pools the train and valid graphs: every graph of both splits is scored by
    models that never saw its family, the valid split's own families included."""
    from dataclasses import replace
    from models.training.runs import TrainConfig, train_collection
    train = make_ranking(rng, [150] * 4)
    valid = replace(make_ranking(rng, [120] * 2), graph_ids=("vgg16_a", "vgg19_b"))
    pool = train.joined(valid)
    assert pool.graph_ids == train.graph_ids + valid.graph_ids and pool.n_graphs == 6
    assert np.array_equal(pool.take_graphs(np.array([4, 5])).X, valid.X)
    assert np.array_equal(pool.take_graphs(np.arange(4)).runtime, train.runtime)
    result = train_collection(TrainConfig(ranker="regression", seeds=2, folds=3, overrides=FAST),
                              train, valid, tmp_path)
    assert result.cv_graph_ids == pool.graph_ids
    assert result.cv_per_graph.shape == (2, 6) and np.isfinite(result.cv_per_graph).all()
    with pytest.raises(ValueError, match="cannot join"):
        train.joined(replace(valid, columns=tuple(f"x{i}" for i in range(6))))


def test_seed_ensemble_is_recorded_per_seed(rng, tmp_path):
    from models.training.runs import TrainConfig, train_collection
    train, valid = make_ranking(rng, [150] * 4), make_ranking(rng, [150] * 2)
    result = train_collection(TrainConfig(ranker="regression", seeds=3, overrides=FAST),
                              train, valid, tmp_path)
    assert len(result.seed_means) == 3 and len(list(tmp_path.glob("seed-*"))) == 3
    assert result.mean > 0.7 and abs(result.summary()["random_mean"]) < 0.2


def _with_unscorable_graphs(rng, collection):
    """A valid set of two normal graphs, one with a single config and one whose runtimes are
    all equal."""
    from features import FeatureSet

    base = make_ranking(rng, [120, 1, 50, 120], collection=collection)
    runtime = base.runtime.copy()
    runtime[121:171] = 7.0
    return FeatureSet(X=base.X, runtime=runtime, config_idx=base.config_idx,
                      dup_count=base.dup_count, ptr=base.ptr, graph_ids=base.graph_ids,
                      collection=collection, columns=base.columns)


@pytest.mark.parametrize("collection", ["layout:xla:random", "tile:xla"])
def test_unscorable_graphs_are_listed_and_counted_apart(rng, tmp_path, collection):
    from models.training.run_files import format_table
    from models.training.run_record import RunFeatures
    from models.training.runs import TrainConfig, train_run

    train, valid = make_ranking(rng, [150] * 4, collection=collection), \
        _with_unscorable_graphs(rng, collection)
    _, record = train_run(TrainConfig(ranker="regression", overrides=FAST),
                          {collection: (train, valid)}, tmp_path, RunFeatures())
    m = record.metrics[collection]
    assert m["n_scored"] == 2 and m["unscored"] == ["g1", "g2"]
    scored = [m["per_graph"][g] for g in ("g0", "g3")]
    assert m["mean"] == pytest.approx(np.mean(scored))
    table = format_table(record)
    row = next(line for line in table.splitlines() if line.startswith(collection))
    assert row.split()[1:3] == ["2", "2"]
    assert f"unscored in {collection} (one config or equal runtimes, not in the mean): g1, g2" \
        in table


def test_tile_graphs_without_an_order_to_find_score_nan():
    """Kaggle's formula gives them 1.0 whatever the model does; they are not averaged in."""
    runtime = np.array([4.0, 4.0, 4.0, 9.0, 3.0, 5.0])
    ptr = np.array([0, 3, 4, 6])
    got = metrics.per_graph_scores("tile:xla", np.array([1.0, 2, 3, 1, 2, 1]), runtime, ptr)
    assert np.isnan(got[:2]).all() and got[2] == pytest.approx(1.0)
    assert metrics.scorable(runtime, ptr).tolist() == [False, False, True]


def _min_max(s: np.ndarray) -> np.ndarray:
    return (s - s.min()) / (s.max() - s.min())


def test_random_collections_average_a_regression_into_each_lambdarank_seed(rng, tmp_path):
    """Each lambdarank seed on a random collection has a regression partner: the seed's score
    is the mean of the two models' scores, each min-max scaled per graph (checked here with
    NumPy and scipy); --ranker-alone and the other rankers have none."""
    from scipy.stats import kendalltau

    from models.training.lgbm import RegressionPartner
    from models.training.runs import TrainConfig, train_collection

    train = make_ranking(rng, [150] * 5, collection="layout:nlp:random")
    valid = make_ranking(rng, [150] * 2, collection="layout:nlp:random")
    result = train_collection(TrainConfig(seeds=2, overrides=FAST), train, valid, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*-*")) == [
        "regression-0", "regression-1", "seed-0", "seed-1"]
    for i in range(2):
        ranker = LambdaRank.load(tmp_path / f"seed-{i}").predict(valid)
        partner = RegressionPartner.load(tmp_path / f"regression-{i}").predict(valid)
        expected = []
        for lo, hi in zip(valid.ptr[:-1], valid.ptr[1:]):
            both = (_min_max(ranker[lo:hi]) + _min_max(partner[lo:hi])) / 2
            expected.append(kendalltau(both, -valid.runtime[lo:hi])[0])
        np.testing.assert_allclose(result.seed_per_graph[i], expected)
        alone = metrics.per_graph_scores(valid.collection, ranker, valid.runtime, valid.ptr)
        assert result.ranker_seed_means[i] == pytest.approx(alone.mean())

    for cfg in (TrainConfig(seeds=1, partners=False, overrides=FAST),
                TrainConfig(seeds=1, ranker="xgboost", overrides=FAST)):
        out = tmp_path / cfg.ranker / str(cfg.partners)
        result = train_collection(cfg, train, valid, out)
        assert [p.name for p in out.glob("*-*")] == ["seed-0"]
        assert result.ranker_seed_means == pytest.approx(result.seed_means)


def _openmp_settings(**env) -> tuple[str, str, str]:
    """OMP_WAIT_POLICY and GOMP_SPINCOUNT ("-": not set) after importing a ranker module, and
    what LightGBM's OpenMP runtime printed of its settings, in a fresh process given env."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = ("import os, models.training.lgbm, lightgbm; "
            "print(*(os.environ.get(k, '-') for k in ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**clean, "OMP_DISPLAY_ENV": "VERBOSE", **env},
                          cwd=Path(__file__).resolve().parents[1])
    return (*done.stdout.split(), done.stderr)


@pytest.mark.slow
def test_openmp_threads_spin_briefly_unless_the_user_says_otherwise():
    # issue 61: libgomp's 3 ms of spinning took 3.0-5.1x a fit's time beside a busy loop
    policy, spin, printed = _openmp_settings()
    assert (policy, spin) == ("-", "10000")
    if "GOMP_SPINCOUNT" in printed:   # GNU libgomp (the Linux wheels) read it
        assert "GOMP_SPINCOUNT = '10000'" in printed
    assert _openmp_settings(GOMP_SPINCOUNT="300000")[:2] == ("-", "300000")
    assert _openmp_settings(OMP_WAIT_POLICY="PASSIVE")[:2] == ("PASSIVE", "-")


def test_scores_a_part_at_a_time_are_the_whole_splits(rng, monkeypatch):
    """train scores the valid split part by part: the same scores as the whole matrix, and the
    report's history rows are the first whole graphs within HISTORY_ROWS, across parts."""
    from models.training import diagnostics
    from models.training.runs import predicted
    data = make_ranking(rng, [150, 90, 60, 200])
    model = _fit("regression", data, n_estimators=5)
    parts = [data.take_graphs(np.array([0, 1])), data.take_graphs(np.array([2, 3]))]
    monkeypatch.setattr(diagnostics, "HISTORY_ROWS", 300)
    (scores,), head = predicted([model], parts)
    assert np.array_equal(scores, model.predict(data))
    assert head.graph_ids == data.graph_ids[:3] and np.array_equal(head.X, data.X[:300])
    monkeypatch.setattr(diagnostics, "HISTORY_ROWS", 10)     # the first graph, whatever its size
    assert predicted([model], parts)[1].graph_ids == data.graph_ids[:1]
    assert predicted([model], [])[1] is None
