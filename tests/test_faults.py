"""Trust under faults: commands sharing one cache at once, a full or unwritable disk, and
damaged cache files (feature parts, units, int8 copies, model files) are met with a clear
message or a rebuild, never a traceback or damaged data read as features."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import pipeline
from features import FeatureConfig, build_entry, load_entry
from features.npz import pack as feature_io
from features.cache import units as unit_store
from features.npz.find import list_npz
from features.npz.pack import packed_path

from .conftest import QUICK

REPO = Path(pipeline.__file__).resolve().parent


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = pipeline.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _names(root: Path) -> list[str]:
    return [p.name for p in Path(root).rglob("*")]


def _overwrite(path: Path, offset: int = 0, n: int = 64) -> None:
    """Damage a file in place, keeping its size: what a size check alone cannot see."""
    data = bytearray(path.read_bytes())
    at = min(offset or len(data) // 2, len(data) - n)
    data[at:at + n] = bytes(255 - b for b in data[at:at + n])
    path.write_bytes(bytes(data))


def _same_rows(entry: Path, reference: Path) -> None:
    got, want = load_entry(entry), load_entry(reference)
    np.testing.assert_array_equal(got.X, want.X)
    np.testing.assert_array_equal(got.runtime, want.runtime)
    assert got.graph_ids == want.graph_ids and got.columns == want.columns


# ---------------------------------------------------------------- one cache, two commands

# Runs `python pipeline.py ARGS` with its first publish of a directory that is not there yet
# held until another process has published that same directory (or 120 s): the two then
# publish one cache entry (or run) at once, the collision two terminals meet by chance.
HOLD_FIRST_PUBLISH = textwrap.dedent("""
    import os, sys, time
    rename = os.replace
    held = []

    def replace(src, dst, *args, **kwargs):
        if not held and os.path.isdir(src) and not os.path.exists(dst):
            held.append(dst)
            open(sys.argv[1], "w").close()
            deadline = time.time() + 120
            while not os.path.exists(dst) and time.time() < deadline:
                time.sleep(0.02)
        return rename(src, dst, *args, **kwargs)

    os.replace = replace
    import pipeline
    sys.exit(pipeline.main(sys.argv[2:]))
""")


def _at_once(args: list[str], marker: Path) -> tuple[subprocess.CompletedProcess, ...]:
    """Two real processes running `pipeline.py args`: the first holds its first publish (see
    HOLD_FIRST_PUBLISH) until the second, started once it holds, has published the same."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-c", HOLD_FIRST_PUBLISH, str(marker), *args],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.time() + 300
    while not marker.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the first process never reached a publish"
    second = subprocess.run([sys.executable, str(REPO / "pipeline.py"), *args], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=600)
    out, err = first.communicate(timeout=600)
    return subprocess.CompletedProcess(first.args, first.returncode, out, err), second


@pytest.mark.slow
def test_two_builds_into_one_cache_at_once_both_finish(tiny_root, tmp_path):
    cache = tmp_path / "cache"
    collections = ["tile:xla", "layout:nlp:random"]
    args = ["build-features", "--data-dir", str(tiny_root), "--cache-dir", str(cache),
            "--workers", "1", "--collections", *collections, "--splits", "train", "valid"]
    for proc in _at_once(args, tmp_path / "holding"):
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
    single = tmp_path / "single"
    npz = tiny_root / "npz_all" / "npz"
    for collection in collections:
        for split in ("train", "valid"):
            entry, built = build_entry(npz, collection, split, FeatureConfig(), cache)
            assert not built                           # the shared cache holds it, intact
            _same_rows(entry, build_entry(npz, collection, split, FeatureConfig(), single)[0])
    assert not [n for n in _names(cache) if ".tmp-" in n]


@pytest.mark.slow
def test_two_trains_of_one_run_at_once_both_finish(tiny_root, tmp_path):
    """Equal settings make one run directory: both commands finish, one complete run stays."""
    cache = tmp_path / "cache"
    common = ["--data-dir", str(tiny_root), "--cache-dir", str(cache), "--workers", "1",
              "--collections", "tile:xla"]
    assert pipeline.main(["build-features", *common, "--splits", "train", "valid"]) == 0
    for proc in _at_once(["train", *common, "--seeds", "1", *QUICK], tmp_path / "holding"):
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
    from models.training.run_files import load_models
    runs = list((cache / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "run.json").exists()
    seeds = json.loads((runs[0] / "run.json").read_text())["train_config"]["seeds"]
    assert len(load_models(runs[0], "tile:xla")) == seeds   # its files match run.json's record


# ---------------------------------------------------------------- a full or unwritable disk

def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _unwritable(code: int, under: Path):
    """os.mkdir failing under `under` as on a read-only (EROFS) or forbidden (EACCES) disk:
    the tests run as root, where chmod stops no write."""
    real = os.mkdir

    def mkdir(path, *args, **kwargs):
        if Path(os.fsdecode(path)).is_relative_to(under):
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return real(path, *args, **kwargs)
    return mkdir


def _fill_then_fail(path) -> None:
    """A write that puts some bytes where it was asked to, then finds the disk full."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(b"\0" * 4096)
    _no_space()


@pytest.mark.parametrize("fault, collection, split, what, where", [
    ("unit", "tile:xla", "train", "the feature rows of ", "features/units/tile-xla-train-"),
    ("part", "tile:xla", "train", "a feature part in ", "features/parts/tile-xla-train-"),
    ("int8", "layout:xla:random", "test", "the int8 copy of ", "packed"),
    ("read-only", "tile:xla", "valid", "the feature rows of ", "features"),
    ("permission", "tile:xla", "valid", "the feature rows of ", "features"),
])
def test_a_full_or_unwritable_cache_is_a_clear_error(fault, collection, split, what, where,
                                                     tiny_root, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    if fault == "unit":
        monkeypatch.setattr(unit_store, "write_npz", lambda path, arrays: _fill_then_fail(path))
    elif fault == "part":
        monkeypatch.setattr(unit_store, "write_part", lambda path, *a: _fill_then_fail(path))
    elif fault == "int8":
        monkeypatch.setattr(feature_io, "_write_int8_copy",
                            lambda zf, path, piece_bytes, dest, rows=0: _fill_then_fail(dest))
    else:
        code = errno.EROFS if fault == "read-only" else errno.EACCES
        monkeypatch.setattr(os, "mkdir", _unwritable(code, cache / "features"))
    code, _, err = _cli(capsys, "build-features", "--data-dir", tiny_root, "--cache-dir", cache,
                        "--workers", "1", "--collections", collection, "--splits", split)
    assert code == 2 and err.startswith("error: cannot write " + what), err
    reason = {"read-only": "Read-only file system", "permission": "Permission denied"}
    assert f" in {cache}/{where}" in err and reason.get(fault, "No space left on device") in err
    assert "nothing partial was kept" in err and "Traceback" not in err
    left = _names(cache)
    assert not [n for n in left if ".tmp" in n], left
    assert not list(cache.glob("features/*/meta.json"))


def test_a_full_disk_while_saving_a_run_leaves_no_run(tiny_root, tmp_path, monkeypatch, capsys):
    from models.training import diagnostics

    cache = tmp_path / "cache"
    common = ["--data-dir", tiny_root, "--cache-dir", cache, "--workers", "1",
              "--collections", "tile:xla"]
    monkeypatch.setattr(diagnostics, "save",
                        lambda out_dir, *a: _fill_then_fail(out_dir / "diagnostics.json"))
    code, _, err = _cli(capsys, "train", *common, "--seeds", "1", *QUICK)
    assert code == 2 and "Traceback" not in err
    assert f"error: cannot write the trained run in {cache / 'runs'}: No space left" in err
    assert list((cache / "runs").iterdir()) == []


@pytest.mark.slow
def test_a_full_disk_while_writing_the_submission_keeps_nothing(trained, tiny_root, tmp_path,
                                                                monkeypatch, capsys):
    from models.serving import submission

    _, common = trained
    monkeypatch.setattr(submission, "open", lambda path, *a, **k: _fill_then_fail(path),
                        raising=False)
    out = tmp_path / "out" / "submission.csv"
    code, _, err = _cli(capsys, "submit", *common, "--out", out)
    assert code == 2 and "Traceback" not in err
    assert f"cannot write the submission submission.csv in {out.parent}: No space" in err
    assert list(out.parent.iterdir()) == []


# ---------------------------------------------------------------- damaged cache files

def _build(tiny_root, cache, capsys, *extra) -> tuple[int, str]:
    code, _, err = _cli(capsys, "build-features", "--data-dir", tiny_root, "--cache-dir", cache,
                        "--workers", "1", *extra)
    return code, err


@pytest.mark.parametrize("name, damage", [
    ("part-00000.parquet", _overwrite),
    ("part-00000.parquet", lambda p: p.write_bytes(p.read_bytes()[:-100])),
    ("part-00000.json", lambda p: _overwrite(p, 1, 8)),
    ("meta.json", lambda p: p.write_text(p.read_text()[:40])),
])
def test_a_damaged_entry_is_built_again_with_a_notice(name, damage, tiny_root, tiny_npz,
                                                      tmp_path, capsys):
    cache, which = tmp_path / "cache", ["--collections", "tile:xla", "--splits", "train"]
    assert _build(tiny_root, cache, capsys, *which)[0] == 0
    entry = next(cache.glob("features/tile-xla-train-*"))
    damage(entry / name)
    code, err = _build(tiny_root, cache, capsys, *which)
    assert code == 0 and err.count("notice: ") == 1, err
    assert f"notice: {entry / name}: damaged cache file (" in err
    assert "building the tile:xla train entry again" in err
    _same_rows(entry, build_entry(tiny_npz, "tile:xla", "train", FeatureConfig(),
                                  tmp_path / "fresh")[0])


def test_a_damaged_entry_is_never_read_as_data(tiny_npz, tmp_path):
    cache = tmp_path / "cache"
    entry, _ = build_entry(tiny_npz, "layout:xla:random", "valid", FeatureConfig(), cache)
    _overwrite(entry / "part-00001.parquet")
    with pytest.raises(Exception) as exc:
        load_entry(entry)
    assert type(exc.value).__name__ == "DamagedCacheError"
    assert str(exc.value) == (
        f"{entry / 'part-00001.parquet'}: damaged cache file (checksum differs from when it was "
        f"written); build it again with: python pipeline.py build-features --cache-dir {cache} "
        f"--collections layout:xla:random --splits valid")


@pytest.mark.slow
def test_a_damaged_unit_is_built_again_when_its_part_is(tiny_root, tiny_npz, tmp_path, capsys):
    cache, which = tmp_path / "cache", ["--collections", "layout:nlp:default", "--splits", "train"]
    assert _build(tiny_root, cache, capsys, *which)[0] == 0
    entry = next(cache.glob("features/layout-nlp-default-train-*"))
    stem = list_npz(tiny_npz, "layout:nlp:default", "train")[1].stem
    unit = next(cache.glob(f"features/units/layout-nlp-default-train-*/{stem}.*.npz"))
    _overwrite(unit)
    _overwrite(entry / "part-00001.parquet")          # its part must be made again from it
    code, err = _build(tiny_root, cache, capsys, *which)
    assert code == 0 and f"notice: {unit}: damaged cache file (BadZipFile" in err
    assert "building it again" in err and err.count("notice: ") == 2, err
    _same_rows(entry, build_entry(tiny_npz, "layout:nlp:default", "train", FeatureConfig(),
                                  tmp_path / "fresh")[0])


def test_a_damaged_int8_copy_is_made_again(tiny_root, tiny_npz, tmp_path, capsys):
    cache, which = tmp_path / "cache", ["--collections", "layout:xla:default", "--splits", "test"]
    assert _build(tiny_root, cache, capsys, *which)[0] == 0
    copy = packed_path(list_npz(tiny_npz, "layout:xla:default", "test")[0], cache / "packed")
    values = np.load(copy, mmap_mode="r+")       # still valid int8 values, only other ones
    values[:] = np.where(values == 5, -1, values + 1)
    values.flush()
    del values
    code, err = _build(tiny_root, cache, capsys, *which, "--force")
    assert code == 0 and err == (f"notice: {copy}: damaged cache file (checksum differs from "
                                 f"when it was written); making it again\n")
    entry = next(cache.glob("features/layout-xla-default-test-*"))
    _same_rows(entry, build_entry(tiny_npz, "layout:xla:default", "test", FeatureConfig(),
                                  tmp_path / "fresh", pack=False)[0])


def _run_copy(trained_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "cache" / "runs" / trained_run.name
    shutil.copytree(trained_run, copy, ignore=shutil.ignore_patterns("report"))
    return copy


def _change_a_threshold(model: Path) -> None:
    """A digit of the first split threshold changed: the file still loads, as another model."""
    text = model.read_text()
    at = text.index("threshold=") + len("threshold=")
    model.write_text(text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1:])


def test_a_damaged_model_file_is_refused_with_the_command_that_retrains(trained_run, tiny_npz,
                                                                       tmp_path, capsys):
    run = _run_copy(trained_run, tmp_path)
    model = run / "tile-xla" / "seed-0" / "model.txt"
    _change_a_threshold(model)
    graph = list_npz(tiny_npz, "tile:xla", "test")[0]
    code, out, err = _cli(capsys, "rank", graph, "--run", run, "--cache-dir", tmp_path / "cache")
    assert code == 2 and out == "" and "Traceback" not in err
    record = json.loads((run / "run.json").read_text())
    assert err == (f"error: {model}: damaged cache file (checksum differs from when it was "
                   f"written); retrain with: {record['retrain']}\n")
    assert record["retrain"].startswith(
        f"python pipeline.py train --cache-dir {trained_run.parent.parent} --ranker lambdarank "
        f"--collections tile:xla layout:xla:default")
    assert "--set n_estimators=40 --set early_stopping=10" in record["retrain"]


def test_an_unreadable_run_record_is_refused(trained_run, tiny_npz, tmp_path, capsys):
    run = _run_copy(trained_run, tmp_path)
    (run / "run.json").write_text('{"ranker": "lambd')
    graph = list_npz(tiny_npz, "tile:xla", "test")[0]
    code, _, err = _cli(capsys, "rank", graph, "--run", run, "--cache-dir", tmp_path / "cache")
    assert code == 2 and err.startswith(f"error: {run / 'run.json'}: damaged run record")
    assert "retrain with: python pipeline.py train" in err
