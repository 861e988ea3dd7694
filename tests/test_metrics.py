"""Metrics: Kendall tau-b against scipy, top-5 slowdown by hand, and the sign convention."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from models import metrics


def test_kendall_matches_scipy_with_and_without_ties(rng):
    for trial in range(200):
        n = int(rng.integers(2, 80))
        x = rng.integers(0, 6, n).astype(float) if trial % 2 else rng.random(n)
        y = rng.integers(0, 4, n).astype(float) if trial % 3 else rng.random(n)
        ours, ref = metrics.kendall_tau_b(x, y), stats.kendalltau(x, y).statistic
        assert (np.isnan(ours) and np.isnan(ref)) or ours == pytest.approx(ref, abs=1e-12)


def test_kendall_large_input_matches_scipy(rng):
    x = rng.random(50_000)
    y = x + rng.random(50_000)
    assert metrics.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


def test_kendall_hand_case():
    # pairs: (1,2) C, (1,3) C, (2,3) D -> (2 - 1) / 3
    assert metrics.kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)


def test_kendall_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="equal length"):
        metrics.kendall_tau_b([1, 2], [1, 2, 3])


def test_higher_score_means_faster():
    runtime = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    ptr = np.array([0, 5])
    assert metrics.kendall_per_graph(-runtime, runtime, ptr)[0] == pytest.approx(1.0)
    assert metrics.kendall_per_graph(runtime, runtime, ptr)[0] == pytest.approx(-1.0)


def test_kendall_per_graph_uses_predicted_positions():
    runtime = np.array([1.0, 2.0, 3.0, 10.0, 20.0])
    scores = np.array([3.0, 1.0, 2.0, 9.0, 8.0])   # predicted order 0, 2, 1 | 3, 4
    ptr = np.array([0, 3, 5])
    got = metrics.kendall_per_graph(scores, runtime, ptr)
    position = np.array([0, 2, 1])
    assert got[0] == pytest.approx(stats.kendalltau(position, runtime[:3]).statistic)
    assert got[1] == pytest.approx(1.0)


def test_topk_by_hand():
    runtime = np.array([10.0, 4.0, 8.0, 5.0, 6.0, 9.0, 7.0])
    scores = np.array([7.0, 0.0, 6.0, 1.0, 5.0, 4.0, 3.0])   # top 5: 0, 2, 4, 5, 6
    got = metrics.topk_score_per_graph(scores, runtime, np.array([0, 7]))
    assert got[0] == pytest.approx(2 - 6.0 / 4.0)


def test_topk_with_fewer_than_five_configs():
    runtime = np.array([3.0, 2.0, 4.0])
    got = metrics.topk_score_per_graph(np.zeros(3), runtime, np.array([0, 3]))
    assert got[0] == pytest.approx(1.0)


def test_topk_and_scorable_match_a_plain_numpy_reference(rng):
    """Many graphs at once, with tied and NaN scores, single-config and constant graphs."""
    sizes = rng.integers(1, 40, 300)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    scores = rng.integers(0, 6, ptr[-1]).astype(float)        # many ties
    scores[rng.random(ptr[-1]) < 0.05] = np.nan
    runtime = rng.integers(1, 9, ptr[-1]).astype(float)
    runtime[ptr[7]:ptr[8]] = 3.0                                # one constant graph
    runtime[ptr[9]] = np.nan
    want_top, want_ok = [], []
    for lo, hi in zip(ptr[:-1], ptr[1:]):
        s, r = scores[lo:hi], runtime[lo:hi]
        top = np.argsort(-s, kind="stable")[:5]
        want_top.append(2 - r[top].min() / r.min())
        want_ok.append(bool(r.size > 1 and r.min() < r.max()))
    ok = metrics.scorable(runtime, ptr)
    assert ok.tolist() == want_ok and not ok[7] and not ok[9]
    got = metrics.topk_score_per_graph(scores, runtime, ptr)
    np.testing.assert_allclose(got[ok], np.array(want_top)[ok], rtol=0, atol=1e-15)


def test_collection_and_final_scores():
    assert metrics.collection_score(np.array([0.5, np.nan, 0.7])) == pytest.approx(0.6)
    assert metrics.final_score({"a": 1.0, "b": 0.0, "c": 0.5}) == pytest.approx(0.5)
