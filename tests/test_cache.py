"""The feature cache: reuse, invalidation, atomic publish and resume after a crash."""
from __future__ import annotations

import os

import numpy as np
import pytest

import features
from features import FeatureConfig, build_entry, load_entry
from features import cache as feature_cache
from features.io import list_npz


def _entry(tiny_npz, cache_root, cfg=FeatureConfig(), collection="tile:xla", split="valid"):
    return build_entry(tiny_npz, collection, split, cfg, cache_root)


def test_second_build_reuses_the_entry(tiny_npz, tmp_path):
    first, built = _entry(tiny_npz, tmp_path)
    again, rebuilt = _entry(tiny_npz, tmp_path)
    assert built and not rebuilt and first == again


def test_key_changes_with_settings_code_and_inputs(tiny_npz, tmp_path, monkeypatch):
    base, _ = _entry(tiny_npz, tmp_path)
    other_cfg, _ = _entry(tiny_npz, tmp_path, FeatureConfig(max_valid_configs=7))
    assert other_cfg != base
    real_digest = feature_cache.source_digest
    monkeypatch.setattr(feature_cache, "source_digest", lambda *a: real_digest(*a) + "edit")
    edited, built = _entry(tiny_npz, tmp_path)
    assert edited != base and built
    monkeypatch.setattr(feature_cache, "source_digest", real_digest)
    f = list_npz(tiny_npz, "tile:xla", "valid")[0]
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    try:
        touched, built = _entry(tiny_npz, tmp_path)
        assert touched != base and built
    finally:
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_crash_leaves_no_entry_and_a_rerun_resumes(tiny_npz, tmp_path, monkeypatch):
    collection = "layout:xla:random"   # one part per file
    files = list_npz(tiny_npz, collection, "train")
    real = features._build_part
    calls = []

    def crash_on_second(path, group, *args):
        calls.append(path.name)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(path, group, *args)

    monkeypatch.setattr(features, "_build_part", crash_on_second)
    with pytest.raises(RuntimeError, match="simulated"):
        build_entry(tiny_npz, collection, "train", FeatureConfig(), tmp_path)
    assert not list((tmp_path / "features").glob("*/meta.json"))
    assert not [p for p in (tmp_path / "features").iterdir() if not p.name.endswith(".partial")]

    calls.clear()
    monkeypatch.setattr(features, "_build_part", lambda path, group, *a: (
        calls.append(path.name), real(path, group, *a))[1])
    entry, built = build_entry(tiny_npz, collection, "train", FeatureConfig(), tmp_path)
    assert built and len(calls) == len(files) - 1           # the finished part was kept
    resumed = load_entry(entry)
    fresh = load_entry(build_entry(tiny_npz, collection, "train", FeatureConfig(),
                                   tmp_path / "fresh")[0])
    np.testing.assert_array_equal(resumed.X, fresh.X)
    assert resumed.graph_ids == fresh.graph_ids


def test_force_rebuilds(tiny_npz, tmp_path):
    _entry(tiny_npz, tmp_path)
    _, built = build_entry(tiny_npz, "tile:xla", "valid", FeatureConfig(), tmp_path, force=True)
    assert built


def test_meta_records_how_the_entry_was_made(tiny_npz, tmp_path):
    entry, _ = _entry(tiny_npz, tmp_path)
    meta = features.read_meta(entry)
    assert meta["settings"] == FeatureConfig().__dict__
    assert meta["inputs"]["code"] == feature_cache.source_digest()
    assert meta["n_rows"] == load_entry(entry).X.shape[0]


def test_parallel_build_equals_serial_build(tiny_npz, tmp_path, monkeypatch):
    monkeypatch.setattr(features, "PARALLEL_MIN_BYTES", 0)   # the tiny tree is below the bar
    serial = load_entry(build_entry(tiny_npz, "layout:nlp:random", "train", FeatureConfig(),
                                    tmp_path / "serial", workers=1)[0])
    parallel = load_entry(build_entry(tiny_npz, "layout:nlp:random", "train", FeatureConfig(),
                                      tmp_path / "parallel", workers=2)[0])
    np.testing.assert_array_equal(serial.X, parallel.X)
    assert serial.graph_ids == parallel.graph_ids


def test_packed_copy_is_made_once_and_reused(tiny_npz, tmp_path):
    from features.io import packed_path, read_graph

    f = list_npz(tiny_npz, "layout:xla:default", "valid")[0]
    plain = read_graph(f, "layout:xla:default", "valid")
    first = read_graph(f, "layout:xla:default", "valid", packed_dir=tmp_path, chunk_configs=5)
    target = packed_path(f, tmp_path)
    stamp = target.stat().st_mtime_ns
    again = read_graph(f, "layout:xla:default", "valid", packed_dir=tmp_path)
    assert isinstance(again.node_config_feat, np.memmap) and target.stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(first.node_config_feat, plain.node_config_feat)
    np.testing.assert_array_equal(again.node_config_feat, plain.node_config_feat)
    assert not list(tmp_path.glob("*.tmp"))
