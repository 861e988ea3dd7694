"""Rows binned once and shared by every fit (models/training/binned.py): streamed from a cache
entry part by part they make the same models as from the matrix in memory, and a fit of some
graphs sees exactly their rows."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from features import FeatureConfig, build_entry, load_entry
from models.training.binned import PartRows, _OnePart, bin_rows, feature_columns
from models.training.lgbm import LAMBDARANK_DEFAULTS, LambdaRank, Regression, RegressionParams
from models.training.runs import TrainConfig, train_collection

FAST = {"n_estimators": 15, "early_stopping": 5, "num_threads": 1}


def _entry(tiny_npz, collection, tmp_path, split="train") -> Path:
    entry, _ = build_entry(tiny_npz, collection, split, FeatureConfig(), tmp_path)
    return entry


def _ranker(collection: str, **extra) -> LambdaRank:
    kind = "tile" if collection.startswith("tile") else "layout"
    return LambdaRank(replace(LAMBDARANK_DEFAULTS[kind], **{**FAST, **extra}))


@pytest.mark.parametrize("collection", ["layout:xla:random", "tile:xla"])
def test_streamed_bins_make_the_models_of_the_matrix(tiny_npz, tmp_path, collection):
    # layout: one graph per part and sub-groups that permute each graph's rows (max 50 rows)
    entry = _entry(tiny_npz, collection, tmp_path)
    data = load_entry(entry)
    ranker = _ranker(collection, max_group_size=50)
    assert collection == "tile:xla" or ranker.grouping(data)[0] is not None
    args = (list(data.columns), ranker.grouping, ranker.labels, ranker.lgb_params())
    streamed, in_memory = bin_rows(entry, *args), bin_rows(data, *args)
    a = _ranker(collection, max_group_size=50).fit_binned(streamed)
    b = _ranker(collection, max_group_size=50).fit_binned(in_memory)
    np.testing.assert_array_equal(a.predict(data), b.predict(data))
    np.testing.assert_array_equal(streamed.rows.runtime, in_memory.rows.runtime)
    # the rows keep their graphs and ranges; within a graph, the same rows
    np.testing.assert_array_equal(streamed.rows.ptr, data.ptr)
    for lo, hi in zip(data.ptr[:-1], data.ptr[1:]):
        np.testing.assert_array_equal(np.sort(streamed.rows.config_idx[lo:hi]),
                                      np.sort(data.config_idx[lo:hi]))


def test_a_fit_of_some_graphs_holds_their_rows_and_labels(tiny_npz, tmp_path):
    entry = _entry(tiny_npz, "layout:xla:random", tmp_path)
    ranker = _ranker("layout:xla:random", max_group_size=50)
    binned = bin_rows(entry, feature_columns(entry), ranker.grouping, ranker.labels,
                      ranker.lgb_params())
    rows = binned.rows
    graphs = np.array([2, 0])
    labels = ranker.labels(rows)
    subset = binned.graph_set(graphs, labels)
    sizes = rows.group_sizes[[0, 2]]
    assert subset.num_data() == sizes.sum()
    np.testing.assert_array_equal(subset.get_label(),
                                  np.concatenate([labels[rows.ptr[g]:rows.ptr[g + 1]]
                                                  for g in (0, 2)]))
    # the sub-groups of those graphs, none larger than the cap, none across a graph
    group = np.asarray(subset.get_group())
    assert group.max() <= 50 and group.sum() == sizes.sum()
    assert set(np.cumsum(sizes)) <= set(np.cumsum(group))
    # a pointwise partner relabels the same bins
    target = Regression(RegressionParams(**FAST)).labels(rows)
    assert np.allclose(binned.graph_set(None, target).get_label(), target)


def test_a_part_is_read_once_per_pass(tiny_npz, tmp_path, monkeypatch):
    import models.training.binned as binned

    entry = _entry(tiny_npz, "layout:xla:random", tmp_path)
    reads = []
    real = binned.part_rows
    monkeypatch.setattr(binned, "part_rows", lambda p, c: reads.append(p) or real(p, c))
    data = load_entry(entry)
    held = _OnePart()
    seqs = [PartRows(p, n, list(data.columns), None, held)
            for p, n in binned.entry_parts(entry)]
    rows = np.vstack([s[i] for s in seqs for i in range(len(s))])
    np.testing.assert_array_equal(rows, data.X)
    assert reads == [p for p, _ in binned.entry_parts(entry)]


@pytest.mark.slow
def test_training_from_an_entry_scores_as_from_its_rows(tiny_npz, tmp_path):
    """train_collection streams an entry's rows into the bins; the same rows loaded first give
    the same run, graph by graph."""
    collection = "layout:xla:random"
    train, valid = (_entry(tiny_npz, collection, tmp_path, s) for s in ("train", "valid"))
    cfg = TrainConfig(seeds=2, overrides=FAST)
    streamed = train_collection(cfg, train, valid, tmp_path / "a", log=lambda _: None)
    loaded = train_collection(cfg, load_entry(train), load_entry(valid), tmp_path / "b",
                              log=lambda _: None)
    np.testing.assert_array_equal(streamed.seed_per_graph, loaded.seed_per_graph)
    assert streamed.rounds == loaded.rounds
