"""Model selection by family: names, folds that never split a family, honest early stopping."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models.training.lgbm import LAMBDARANK_DEFAULTS, REGRESSION_DEFAULTS, LambdaRank, Regression
from models.training.row_order import rows_in_order
from models.training.family_split import (MIN_ROUNDS, early_stop_split, family_folds,
                                          fit_and_watched, fit_family_stopped, graph_family,
                                          probe)
from tests.conftest import make_ranking


@pytest.mark.parametrize("graph_id, family", [
    ("resnet50_batch_8_test", "resnet"),
    ("resnet101_v2_batch_8_test_bf16", "resnet"),       # another depth and version: one family
    ("bert_base_batch_size_16_seq_128_test_bf16", "bert"),
    ("bert_tiny_batch_size_32_seq_64_test", "bert"),
    ("distil_bert_base_batch_size_16_seq_128_test", "bert"),
    ("small_bert_bert_en_uncased_L-10_H-128_A-2_batch_size_32_test", "bert"),   # real layout
    ("gpt2_small_batch_size_32_seq_64_test", "gpt"),
    ("t5_tiny_batch_size_32_seq_128_test", "t5"),       # no other letters to keep
    ("efficientnet_v2_b0_batch_16_test_bf16", "efficientnet"),
    ("albert_base_batch_size_16_seq_128_test_-76e4a16388182a4e", "albert"),  # tile kernel
    ("alexnet_train_batch_32_-1bae27a41d70f4dc", "alexnet"),
    ("unet_3d.4x4.bf16", "unet"),                                               # real layout
    ("05ae41e26dd3c4c06390371a0423233c", "05ae41e26dd3c4c06390371a0423233c"),  # test file
])
def test_graph_family(graph_id, family):
    assert graph_family(graph_id) == family


def test_family_folds_keep_families_whole_and_balance_graphs():
    ids = [f"{fam}_batch_{b}_test" for fam, n in (("a", 5), ("b", 3), ("c", 3), ("d", 1), ("e", 1))
           for b in range(n)]
    fold = family_folds(ids, 3, seed=0)
    fams = np.array([graph_family(g) for g in ids])
    for f in set(fams):
        assert np.unique(fold[fams == f]).size == 1
    assert sorted(np.bincount(fold).tolist()) == [4, 4, 5]
    # at least as many folds as families: leave-one-family-out
    lofo = family_folds(ids, 99, seed=0)
    assert np.unique(lofo).size == 5
    assert all(np.unique(fams[lofo == f]).size == 1 for f in np.unique(lofo))


def test_early_stopping_watches_held_out_families_then_refits_on_all(rng):
    data = make_ranking(rng, [120] * 10)
    data = replace(data, graph_ids=tuple(f"{'vwxyz'[i % 5]}net_batch_{i}" for i in range(10)))
    fit_idx, watch_idx = early_stop_split(data, seed=0)
    fit_fams = {graph_family(data.graph_ids[i]) for i in fit_idx}
    watch_fams = {graph_family(data.graph_ids[i]) for i in watch_idx}
    assert watch_idx.size and not fit_fams & watch_fams
    assert sorted(np.concatenate([fit_idx, watch_idx]).tolist()) == list(range(10))
    params = replace(REGRESSION_DEFAULTS["layout"], n_estimators=400, early_stopping=10,
                     learning_rate=0.3)
    model = fit_family_stopped(Regression, params, data)
    assert 1 <= model.stopped_at_ < 400                  # stopped early on the watched families
    assert model.booster_.current_iteration() == model.stopped_at_   # refit for those rounds
    # a single family: nothing honest to watch, so no early stopping at all
    one = replace(data, graph_ids=tuple(f"only_batch_{i}" for i in range(10)))
    assert early_stop_split(one, seed=0)[1].size == 0
    assert fit_family_stopped(Regression, replace(params, n_estimators=30), one).stopped_at_ == 30


def test_an_early_peak_on_the_watched_families_keeps_a_trained_model(rng):
    """The watched families order their configs the other way round, as the sample's tile:xla
    seed 0 found its watched families (best at round 3, worse after, -22.8 on valid refit for
    3 rounds): the probe's best is one of its first rounds, and the model keeps MIN_ROUNDS,
    which rank the graphs it was fitted on well."""
    from models import metrics
    data = make_ranking(rng, [120] * 10)
    data = replace(data, graph_ids=tuple(f"{'vwxyz'[i % 5]}net_batch_{i}" for i in range(10)))
    fit_idx, watch_idx = early_stop_split(data, seed=0)
    runtime = data.runtime.copy()
    for g in watch_idx:
        rows = slice(data.ptr[g], data.ptr[g + 1])
        runtime[rows] = 1 / runtime[rows]
    data = replace(data, runtime=runtime)
    params = replace(LAMBDARANK_DEFAULTS["layout"], n_estimators=200, early_stopping=10)
    assert probe(LambdaRank(params), data, fit_idx, watch_idx).best_iteration_ <= 3
    model = fit_family_stopped(LambdaRank, params, data)
    assert model.stopped_at_ == MIN_ROUNDS
    fit = data.take_graphs(fit_idx)
    kendall = metrics.per_graph_scores(fit.collection, model.predict(fit), fit.runtime, fit.ptr)
    assert metrics.collection_score(kendall) > 0.5


def test_a_seed_below_random_order_is_said_in_one_warning_line():
    from models.training.runs import CollectionResult, degenerate_seeds
    seeds = np.array([[-30.0, -15.6], [0.9, 1.0], [0.95, 0.97]])     # seed 0: a useless model
    result = CollectionResult("tile:xla", seeds.mean(axis=0), np.array([-0.5, -0.3]), seeds,
                              ("a", "b"), 1.0, rounds=[3, 57, 22])
    warning, = degenerate_seeds(result, first_seed=0)
    assert warning.startswith("tile:xla seed 0: validation mean -22.800 is below random "
                              "order's -0.400 (3 rounds kept)")


def test_rows_in_order_holds_x_order_then_restores_x(rng):
    X = rng.normal(size=(50, 7)).astype(np.float32)
    before, order = X.copy(), rng.permutation(50)
    with rows_in_order(X, order) as moved:
        assert moved is X
        np.testing.assert_array_equal(X, before[order])
    np.testing.assert_array_equal(X, before)
    with pytest.raises(RuntimeError), rows_in_order(X, order):
        raise RuntimeError("a fit failed")
    np.testing.assert_array_equal(X, before)            # restored on error too
    for bad in (np.r_[order[:-1], order[0]], order[:-1], np.r_[order[:-1], 50]):
        with pytest.raises(ValueError, match="permutation of the 50 rows"):
            with rows_in_order(X, bad):
                pass
    np.testing.assert_array_equal(X, before)
    X.flags.writeable = False                           # a read-only X is copied, not moved
    with rows_in_order(X, order) as moved:
        np.testing.assert_array_equal(moved, before[order])


def test_fit_and_watched_are_take_graphs_without_a_copy(rng):
    data = make_ranking(rng, [30, 5, 40, 12, 25, 8])
    data = replace(data, config_idx=rng.permutation(data.runtime.size),
                   dup_count=rng.integers(1, 4, data.runtime.size).astype(np.int32))
    before = data.X.copy()
    fit_idx, watch_idx = np.array([0, 2, 3, 5]), np.array([1, 4])
    expected = data.take_graphs(fit_idx), data.take_graphs(watch_idx)
    with fit_and_watched(data, fit_idx, watch_idx) as got:
        for view, copy in zip(got, expected):
            assert np.shares_memory(view.X, data.X)
            for name in ("X", "runtime", "config_idx", "dup_count", "ptr"):
                np.testing.assert_array_equal(getattr(view, name), getattr(copy, name))
            assert view.graph_ids == copy.graph_ids and view.columns == copy.columns
    np.testing.assert_array_equal(data.X, before)


@pytest.mark.slow
def test_lambdarank_fit_leaves_the_matrix_as_it_was(rng):
    """Sub-groups of graphs over max_group_size are made by moving rows in place."""
    data = make_ranking(rng, [300, 80, 260])
    before = data.X.copy()
    params = replace(LAMBDARANK_DEFAULTS["layout"], n_estimators=5, max_group_size=100)
    moved = LambdaRank(params).fit(data)
    np.testing.assert_array_equal(data.X, before)
    frozen = replace(data, X=before)
    before.flags.writeable = False                      # the plain X[order] copy
    np.testing.assert_array_equal(moved.predict(data), LambdaRank(params).fit(frozen)
                                  .predict(frozen))


def test_the_seeds_share_one_binning_and_probe_each(rng, monkeypatch):
    """fit_seeds: the rows are binned once for every fit; each seed probes its own held-out
    families, then refits on every graph for the rounds it found."""
    import lightgbm as lgb

    from models.training import binned, runs

    data = make_ranking(rng, [120] * 10)
    data = replace(data, graph_ids=tuple(f"{'vwxyz'[i % 5]}net_batch_{i}" for i in range(10)),
                   collection="layout:xla:random")
    cfg = runs.TrainConfig(seeds=3, seed=4, overrides={"n_estimators": 200, "early_stopping": 5,
                                                       "learning_rate": 0.3})
    trained, constructed = [], []
    real_train, real_dataset = lgb.train, binned.lgb.Dataset
    monkeypatch.setattr(lgb, "train", lambda params, *a, **k: trained.append(
        (params["seed"], bool(k.get("valid_sets")))) or real_train(params, *a, **k))
    monkeypatch.setattr(binned.lgb, "Dataset", lambda *a, **k: constructed.append(1)
                        or real_dataset(*a, **k))
    models = runs.fit_seeds(cfg, data)
    assert trained == [(4, True), (4, False), (5, True), (5, False), (6, True), (6, False)]
    assert len(constructed) == 1
    for m in models:
        assert 1 <= m.stopped_at_ < 200
        assert m.booster_.current_iteration() == m.stopped_at_
    # the seeds differ (bagging, feature sampling, their probes)
    preds = [m.predict(data) for m in models]
    assert not np.array_equal(preds[0], preds[1])
