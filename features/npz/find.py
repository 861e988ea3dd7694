"""Where a TpuGraphs tree's files are: the download root in any of its accepted forms, and the
sorted files of one collection and split."""
from __future__ import annotations

import os
from pathlib import Path

from features.schema import COLLECTIONS, SPLITS


DEFAULT_DATA_DIR = Path("~/data/tpugraphs")


def collection_dir(collection: str) -> Path:
    """'layout:xla:random' -> Path('layout/xla/random'); rejects unknown names."""
    if collection not in COLLECTIONS:
        raise ValueError(f"unknown collection {collection!r}; expected one of {COLLECTIONS}")
    return Path(*collection.split(":"))


def resolve_npz_root(data_dir: str | os.PathLike) -> Path | None:
    """Accept the download root, `.../npz_all` or `.../npz_all/npz`; None if none exists.
    Absolute (symlinks kept): a relative --data-dir names the same data from any directory, in
    what the commands print and record."""
    base = Path(os.path.abspath(Path(data_dir).expanduser()))
    for candidate in (base / "npz_all" / "npz", base / "npz", base):
        if (candidate / "tile").is_dir() or (candidate / "layout").is_dir():
            return candidate
    return None


def list_npz(npz_root: Path, collection: str, split: str) -> list[Path]:
    """Sorted `.npz` files of one collection and split (empty if the directory is absent)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return sorted((npz_root / collection_dir(collection) / split).glob("*.npz"))
