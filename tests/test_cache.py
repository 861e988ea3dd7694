"""The feature cache: reuse, invalidation, atomic publish, resume after a crash, per-file units,
reclaiming what crashed processes left, and pool workers that die with their parent."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import features
from features import FeatureConfig, build_entry, load_entry
from features.cache import store as feature_cache
from features.cache import signature as feature_sig
from features.cache import build as cache_build
from features.cache import units
from features.npz.find import list_npz


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
    real_digest = feature_sig.row_code_digest
    monkeypatch.setattr(feature_sig, "row_code_digest", lambda *a: real_digest(*a) + "edit")
    edited, built = _entry(tiny_npz, tmp_path)
    assert edited != base and built
    monkeypatch.setattr(feature_sig, "row_code_digest", real_digest)
    f = list_npz(tiny_npz, "tile:xla", "valid")[0]
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    try:
        touched, built = _entry(tiny_npz, tmp_path)
        assert touched != base and built
    finally:
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_crash_leaves_no_entry_and_a_rerun_resumes(tiny_npz, tmp_path, monkeypatch):
    collection = "layout:xla:random"
    files = list_npz(tiny_npz, collection, "train")
    real = units.build_unit
    calls = []

    def crash_on_second(path, *args, **kwargs):
        calls.append(path.name)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(units, "build_unit", crash_on_second)
    with pytest.raises(RuntimeError, match="simulated"):
        build_entry(tiny_npz, collection, "train", FeatureConfig(), tmp_path)
    assert not list((tmp_path / "features").glob("*/meta.json"))
    assert [p.name for p in (tmp_path / "features").iterdir()] == ["units"]
    assert len(list((tmp_path / "features" / "units").glob("*/*"))) == 1   # no temporaries

    calls.clear()
    monkeypatch.setattr(units, "build_unit", lambda path, *a, **k: (
        calls.append(path.name), real(path, *a, **k))[1])
    entry, built = build_entry(tiny_npz, collection, "train", FeatureConfig(), tmp_path)
    assert built and len(calls) == len(files) - 1           # the finished unit was kept
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
    assert meta["signature"] == features.feature_signature(FeatureConfig())
    assert [f[0] for f in meta["inputs"]["files"]] == \
        [f.name for f in list_npz(tiny_npz, "tile:xla", "valid")]
    assert meta["n_rows"] == load_entry(entry).X.shape[0]


def test_an_entry_loads_chosen_columns_or_none(tiny_npz, tmp_path):
    entry, _ = _entry(tiny_npz, tmp_path)
    whole = load_entry(entry)
    picked = [whole.columns[5], whole.columns[0]]
    part, bare = load_entry(entry, picked), load_entry(entry, ())
    np.testing.assert_array_equal(part.X, whole.X[:, [5, 0]])
    assert part.columns == tuple(picked) and bare.X.shape == (whole.X.shape[0], 0)
    for got in (part, bare):
        np.testing.assert_array_equal(got.runtime, whole.runtime)
        np.testing.assert_array_equal(got.ptr, whole.ptr)
        assert got.graph_ids == whole.graph_ids
    with pytest.raises(ValueError, match=f"{entry}.*no feature columns .'nope'"):
        load_entry(entry, ["nope"])


@pytest.mark.slow
def test_parallel_build_equals_serial_build(tiny_npz, tmp_path, monkeypatch):
    monkeypatch.setattr(cache_build, "PARALLEL_MIN_BYTES", 0)   # the tiny tree is below the bar
    serial = load_entry(build_entry(tiny_npz, "layout:nlp:random", "train", FeatureConfig(),
                                    tmp_path / "serial", workers=1)[0])
    parallel = load_entry(build_entry(tiny_npz, "layout:nlp:random", "train", FeatureConfig(),
                                      tmp_path / "parallel", workers=2)[0])
    np.testing.assert_array_equal(serial.X, parallel.X)
    assert serial.graph_ids == parallel.graph_ids


def test_packed_copy_is_made_once_and_reused(tiny_npz, tmp_path):
    from features.npz.pack import packed_path
    from features.npz.read import read_graph

    f = list_npz(tiny_npz, "layout:xla:default", "valid")[0]
    plain = read_graph(f, "layout:xla:default", "valid")
    first = read_graph(f, "layout:xla:default", "valid", packed_dir=tmp_path, piece_bytes=8)
    target = packed_path(f, tmp_path)
    stamp = target.stat().st_mtime_ns
    again = read_graph(f, "layout:xla:default", "valid", packed_dir=tmp_path)
    assert isinstance(again.node_config_feat, np.memmap) and target.stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(first.node_config_feat, plain.node_config_feat)
    np.testing.assert_array_equal(again.node_config_feat, plain.node_config_feat)
    assert not list(tmp_path.glob("*.tmp"))


def test_fixing_one_bad_file_rebuilds_only_that_file(tiny_npz, tmp_path):
    """Every good file's rows are kept when one file is broken; after the fix, one is built."""
    data = tmp_path / "data"
    shutil.copytree(tiny_npz / "tile", data / "tile")
    files = list_npz(data, "tile:xla", "train")
    good = files[3].read_bytes()
    files[3].write_bytes(good[:200])
    with pytest.raises(features.DataFormatError, match=files[3].name) as exc:
        build_entry(data, "tile:xla", "train", FeatureConfig(), tmp_path / "cache")
    assert "tile:xla train: 1 unusable file(s)" in str(exc.value)
    assert len(list((tmp_path / "cache" / "features" / "units").glob("*/*"))) == len(files) - 1
    files[3].write_bytes(good)
    entry, built = build_entry(data, "tile:xla", "train", FeatureConfig(), tmp_path / "cache")
    meta = features.read_meta(entry)
    assert built and meta["files_built_this_run"] == 1 and meta["n_graphs"] == len(files)
    fresh = load_entry(build_entry(data, "tile:xla", "train", FeatureConfig(),
                                   tmp_path / "fresh")[0])
    np.testing.assert_array_equal(load_entry(entry).X, fresh.X)


def test_a_unit_is_one_files_rows(tiny_npz, tmp_path):
    from features.npz.read import read_graph
    from features.rows.table import graph_table

    f = list_npz(tiny_npz, "layout:nlp:default", "valid")[0]
    unit_dir = feature_cache.unit_dir(tmp_path, "layout:nlp:default", "valid", "sig")
    path = units.build_unit(f, "layout:nlp:default", "valid", FeatureConfig(), unit_dir)
    assert path == feature_cache.unit_path(unit_dir, f) and [p.name for p in
                                                              unit_dir.iterdir()] == [path.name]
    got = units.read_unit(path)
    want = graph_table(read_graph(f, "layout:nlp:default", "valid"), FeatureConfig())
    np.testing.assert_array_equal(got.X, want[0])
    assert got.columns == want[1] and all(map(np.array_equal, got.rows, want[2]))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_are_reclaimed_and_live_ones_kept(tmp_path):
    host = feature_cache.owner_tag().rsplit("-", 1)[1]
    dead, live = f".tmp-{_dead_pid()}-{host}", f".tmp-{os.getpid()}-{host}"
    stale = [tmp_path / f"sample{dead}.k3x_9a", tmp_path / "runs" / f"lambdarank-abc{dead}.q1w2",
             tmp_path / "features" / f"tile-xla-train-abc{dead}.zz",
             tmp_path / "features" / "tile-xla-train-old.partial",
             tmp_path / "features" / "units" / "tile-xla-train-k" / f"a.b.npz{dead}",
             tmp_path / "packed" / f"g-123.npy.{_dead_pid()}.tmp"]
    kept = [tmp_path / f"sample{live}.abc", tmp_path / "features" / "tile-xla-valid-new.partial",
            tmp_path / "features" / "units" / "tile-xla-train-k" / "a.b.npz",
            tmp_path / "runs" / "lambdarank-abc"]
    for p in stale + kept:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.mkdir() if "npz" not in p.name else p.write_text("x")
    old = time.time() - feature_cache.STALE_AGE_S - 60
    os.utime(stale[3], (old, old))
    removed = feature_cache.reclaim_stale(tmp_path)
    assert sorted(removed) == sorted(stale)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)


WORKER_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from features.cache.workers import process_pool
    pool = process_pool(2)
    futures = [pool.submit(time.sleep, 0.5) for _ in range(2)]
    pids = set(pool._processes)
    print(" ".join(map(str, pids)), flush=True)
    pool.submit(time.sleep, 600)
    time.sleep(600)
""")


def _gone(pid: int) -> bool:
    return not feature_cache._alive(pid)


@pytest.mark.slow
def test_pool_workers_exit_when_the_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT], stdout=subprocess.PIPE,
                              text=True)
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert len(workers) == 2 and not any(map(_gone, workers))
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 20
        while time.time() < deadline and not all(map(_gone, workers)):
            time.sleep(0.2)
        assert all(map(_gone, workers)), "workers outlived their parent"
    finally:
        parent.kill()


def test_the_watchdog_exits_a_process_whose_parent_is_gone():
    """The fallback off Linux: a worker watching a parent id that is not its parent exits."""
    code = ("import time; from features.cache.workers import watch_parent; "
            f"watch_parent({_dead_pid()}, interval=0.05); time.sleep(30)")
    start = time.time()
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 1
    assert time.time() - start < 20


def test_an_entry_read_part_by_part_is_the_entry_read_whole(tiny_npz, tmp_path):
    """split_parts hands a split over a part at a time, each of whole graphs; joined, they are
    load_entry's rows exactly, node rows and the files' config counts included."""
    entry, _ = build_entry(tiny_npz, "layout:nlp:default", "valid", FeatureConfig(), tmp_path)
    whole = load_entry(entry)
    parts = list(features.split_parts(entry))
    assert len(parts) == whole.n_graphs > 1 and whole.nodes is not None
    assert np.array_equal(np.vstack([p.X for p in parts]), whole.X)
    for key in ("runtime", "config_idx", "dup_count"):
        assert np.array_equal(np.concatenate([getattr(p, key) for p in parts]),
                              getattr(whole, key))
    assert sum((p.graph_ids for p in parts), ()) == whole.graph_ids
    assert [n for p in parts for n in p.meta["file_configs"]] == whole.meta["file_configs"]
    for p, nodes in zip(parts, whole.nodes):
        assert all(np.array_equal(a, b) for a, b in zip(p.nodes[0], nodes))
    columns = list(whole.columns[:3])
    assert all(p.columns == tuple(columns) and np.array_equal(p.X, whole.take_graphs(
        np.array([i])).X[:, :3]) for i, p in enumerate(features.split_parts(entry, columns)))
    assert list(features.split_parts(whole)) == [whole]
