"""Feature rows: structure, determinism, dedup and caps, and chunking invariance."""
from __future__ import annotations

import numpy as np
import pytest

import features
from features import COLLECTIONS, FeatureConfig, load_or_build
from features.npz.find import list_npz
from features.npz.read import read_graph
from features.rows import extractors
from features.rows.extractors import extractor
from features.rows.row_selection import select_rows, target_runtime
from features.rows.table import graph_parts, graph_table


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("featcache")


@pytest.mark.parametrize("collection", COLLECTIONS)
@pytest.mark.parametrize("feature_set", ["basic", "full"])
def test_feature_sets_have_consistent_structure(tiny_npz, cache, collection, feature_set):
    cfg = FeatureConfig(feature_set=feature_set)
    for split in ("train", "test"):
        fs = load_or_build(tiny_npz, collection, split, cfg, cache)
        files = list_npz(tiny_npz, collection, split)
        assert fs.graph_ids == tuple(f.stem for f in files)
        assert fs.X.dtype == np.float32 and fs.X.shape == (fs.ptr[-1], len(fs.columns))
        assert len(set(fs.columns)) == len(fs.columns) and np.isfinite(fs.X).all()
        assert all(np.all(np.diff(fs.config_idx[fs.ptr[g]:fs.ptr[g + 1]]) > 0)
                   for g in range(fs.n_graphs))
        if split == "test":
            assert np.isnan(fs.runtime).all()
            for g, f in enumerate(files):   # every test config is a row, none merged
                n = read_graph(f, collection, split).n_configs
                assert fs.config_idx[fs.ptr[g]:fs.ptr[g + 1]].tolist() == list(range(n))


def test_an_extractor_registered_in_a_test_makes_rows_through_graph_table(tiny_npz,
                                                                           monkeypatch):
    """One registration is a new feature set: FeatureConfig accepts it and a layout graph's
    rows are the graph's columns and the extractor's; a kind it has none for is an error."""
    monkeypatch.setattr(extractors, "EXTRACTORS", dict(extractors.EXTRACTORS))

    @extractor("layout", "seven")
    def seven(g, rows, *, chunk, seed=0):
        return np.full((rows.size, 1), 7.0, np.float32), ["cfg.seven"]

    collection = "layout:xla:default"
    g = read_graph(list_npz(tiny_npz, collection, "valid")[0], collection, "valid")
    X, columns, rows = graph_table(g, FeatureConfig(feature_set="seven", max_valid_configs=30))
    basic = graph_parts(g, FeatureConfig(feature_set="basic", max_valid_configs=30))
    n_graph = basic.graph.size
    assert columns == basic.columns[:n_graph] + ["cfg.seven"]
    assert X.shape == (basic.rows.config_idx.size, n_graph + 1) and (X[:, -1] == 7).all()
    np.testing.assert_array_equal(X[:, :n_graph], basic.X[:, :n_graph])
    np.testing.assert_array_equal(rows.config_idx, basic.rows.config_idx)
    tile = read_graph(list_npz(tiny_npz, "tile:xla", "valid")[0], "tile:xla", "valid")
    with pytest.raises(ValueError, match="no tile extractor for feature_set 'seven'"):
        graph_table(tile, FeatureConfig(feature_set="seven"))
    with pytest.raises(ValueError, match="registered already"):
        extractor("layout", "seven")(seven)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"feature_set must be one of \('basic', 'full'\)"):
        FeatureConfig(feature_set="seven")


def test_full_has_more_than_basic(tiny_npz, cache):
    basic = load_or_build(tiny_npz, "layout:xla:random", "train", FeatureConfig("basic"), cache)
    full = load_or_build(tiny_npz, "layout:xla:random", "train", FeatureConfig(), cache)
    assert len(full.columns) > 2 * len(basic.columns)
    assert any(c.startswith("z.cfg.all.") for c in full.columns)


def test_train_rows_come_from_the_configs_read_and_valid_rows_from_all(tiny_npz, cache):
    k = 7
    cfg = FeatureConfig(max_read_configs_layout=k)
    train = load_or_build(tiny_npz, "layout:xla:default", "train", cfg, cache)
    assert train.config_idx.max() < k
    for g, f in enumerate(list_npz(tiny_npz, "layout:xla:default", "train")):
        rows = slice(train.ptr[g], train.ptr[g + 1])
        runtime = read_graph(f, "layout:xla:default", "train").config_runtime[:k]
        # the fastest of the configs read is a row, with its own runtime
        assert train.runtime[rows].min() == runtime.min()
    valid = load_or_build(tiny_npz, "layout:xla:default", "valid", cfg, cache)
    assert valid.config_idx.max() >= k


def test_build_is_deterministic(tiny_npz, tmp_path):
    a = load_or_build(tiny_npz, "layout:nlp:default", "train", FeatureConfig(), tmp_path / "a")
    b = load_or_build(tiny_npz, "layout:nlp:default", "train", FeatureConfig(), tmp_path / "b")
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.config_idx, b.config_idx)


@pytest.mark.parametrize("collection", ["tile:xla", "layout:xla:default"])
def test_chunked_and_unchunked_builds_give_identical_rows(tiny_npz, collection):
    f = list_npz(tiny_npz, collection, "train")[0]
    results = []
    for chunk_mb in (1e-4, 0.01, 1000.0):
        cfg = FeatureConfig(chunk_mb=chunk_mb)
        X, names, rows = graph_table(read_graph(f, collection, "train"), cfg)
        results.append((X, rows.config_idx))
    for X, idx in results[1:]:
        np.testing.assert_array_equal(X, results[0][0])
        np.testing.assert_array_equal(idx, results[0][1])


def _with_duplicates(tiny_npz):
    g = read_graph(list_npz(tiny_npz, "layout:nlp:default", "train")[0], "layout:nlp:default",
                   "train")
    return g


def test_train_duplicates_are_merged_to_their_minimum(tiny_npz):
    g = _with_duplicates(tiny_npz)
    rows = select_rows(g, max_train_configs=0, fastest_fraction=0.1, max_valid_configs=0,
                       seed=0, chunk=17)
    keys = [g.node_config_feat[j].tobytes() for j in range(g.n_configs)]
    groups: dict[bytes, list[int]] = {}
    for j, key in enumerate(keys):
        groups.setdefault(key, []).append(j)
    assert rows.config_idx.size == len(groups) < g.n_configs   # default search repeats configs
    target = target_runtime(g)
    for idx, rt, count in zip(rows.config_idx, rows.runtime, rows.dup_count):
        members = groups[keys[idx]]
        assert rt == target[members].min() and count == len(members)
    assert rows.dup_count.sum() == g.n_configs


def test_train_cap_keeps_the_fastest_share(tiny_npz):
    g = _with_duplicates(tiny_npz)
    rows = select_rows(g, max_train_configs=50, fastest_fraction=0.2, max_valid_configs=0,
                       seed=0, chunk=64)
    full = select_rows(g, max_train_configs=0, fastest_fraction=0.2, max_valid_configs=0,
                       seed=0, chunk=64)
    assert rows.config_idx.size == 50
    fastest = full.config_idx[np.argsort(full.runtime, kind="stable")[:10]]
    assert set(fastest) <= set(rows.config_idx)


def test_valid_is_subsampled_but_not_merged(tiny_npz):
    f = list_npz(tiny_npz, "layout:xla:default", "valid")[0]
    g = read_graph(f, "layout:xla:default", "valid")
    rows = select_rows(g, max_train_configs=0, fastest_fraction=0.1, max_valid_configs=30,
                       seed=0, chunk=64)
    assert rows.config_idx.size == min(30, g.n_configs) and (rows.dup_count == 1).all()


def test_tile_target_is_runtime_over_normalizer(tiny_npz):
    g = read_graph(list_npz(tiny_npz, "tile:xla", "valid")[0], "tile:xla", "valid")
    np.testing.assert_allclose(target_runtime(g),
                               g.config_runtime / g.config_runtime_normalizers)


def test_features_never_import_models():
    src = features.cache.store.FEATURES_DIR
    for f in src.glob("*.py"):
        text = f.read_text()
        assert "import models" not in text and "from models" not in text, f.name


@pytest.mark.parametrize("collection, split", [("layout:nlp:default", "train"),
                                               ("layout:xla:random", "valid")])
def test_a_capped_file_reads_only_what_it_needs_and_gives_the_same_rows(tiny_npz, tmp_path,
                                                                        monkeypatch, collection,
                                                                        split):
    from features.rows.table import configs_needed, file_table, graph_parts
    monkeypatch.setattr(features.rows.per_config, "STAT_CONFIGS", 25)   # files here are small
    f = list_npz(tiny_npz, collection, split)[0]
    cfg = FeatureConfig(max_train_configs_layout=20, max_valid_configs=20)
    whole = read_graph(f, collection, split)
    kept = read_graph(f, collection, split, keep=configs_needed(collection, split, f.stem, cfg))
    assert kept.config_index.size < whole.n_configs == kept.n_configs
    expected = graph_parts(whole, cfg)
    for parts in (graph_parts(kept, cfg),
                  file_table(f, collection, split, cfg, packed_dir=tmp_path / "packed")):
        for key in ("config_idx", "runtime", "dup_count"):
            np.testing.assert_array_equal(getattr(parts.rows, key), getattr(expected.rows, key))
        np.testing.assert_array_equal(parts.X, expected.X)
    assert 0 < expected.rows.config_idx.size <= 20
    assert not (tmp_path / "packed").exists()
