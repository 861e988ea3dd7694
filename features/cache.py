"""The feature cache: entries keyed by inputs + settings + code, built resumably, published atomically.

Layout: <cache>/features/<collection with '-'>-<split>-<key12>/part-*.parquet + part-*.json +
meta.json. An entry is complete only when meta.json exists; it is built in `<entry>.partial/`
whose finished parts survive a crash, so a rerun with the same key resumes, and it becomes
visible through one atomic rename.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import numba
import numpy as np
import polars as pl

SCHEMA = 1  # bump when the on-disk format of an entry changes
FEATURES_DIR = Path(__file__).resolve().parent


def source_digest(pkg_dir: Path = FEATURES_DIR) -> str:
    """sha256 over every .py file of the package: any edit to the code gives a new key."""
    h = hashlib.sha256()
    for f in sorted(pkg_dir.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def fingerprint(**parts) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def file_stamps(files: list[Path]) -> list[tuple[str, int, int]]:
    stamps = []
    for f in files:
        st = f.stat()
        stamps.append((f.name, st.st_size, st.st_mtime_ns))
    return stamps


def key_inputs(collection: str, split: str, files: list[Path], cfg) -> dict:
    return {"schema": SCHEMA, "code": source_digest(), "settings": asdict(cfg),
            "collection": collection, "split": split, "files": file_stamps(files),
            "versions": {"numpy": np.__version__, "numba": numba.__version__,
                         "polars": pl.__version__, "python": platform.python_version()}}


def entry_dir(cache_root: Path, collection: str, split: str, key: str) -> Path:
    return Path(cache_root) / "features" / f"{collection.replace(':', '-')}-{split}-{key}"


def is_complete(entry: Path) -> bool:
    return (entry / "meta.json").exists()


def staging_dir(entry: Path, *, fresh: bool) -> Path:
    staging = entry.with_name(entry.name + ".partial")
    if fresh and staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True, exist_ok=True)
    return staging


def part_done(staging: Path, index: int) -> bool:
    return (staging / f"part-{index:05d}.json").exists()


@contextmanager
def atomic_dir(dest: Path):
    """Yield a temporary sibling directory; on success it replaces `dest` in one rename, on any
    error it is removed, so readers see the old `dest`, the new one, or nothing."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        yield tmp
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish(staging: Path, entry: Path, meta: dict) -> Path:
    """Write meta.json last, then rename the staging directory into place in one step."""
    tmp = staging / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1, default=str))
    tmp.replace(staging / "meta.json")
    if entry.exists():
        shutil.rmtree(entry)
    os.replace(staging, entry)
    return entry
