"""Units of the feature cache: the rows of one input file, the unit of work of a build.

`build_unit` is self-contained (no pool, no global state): given a file and the directory
where its collection/split keeps units (cache.unit_dir), it writes that file's rows once and
returns the unit's path, so any scheduler can run it as a task. `assemble` links the parquet
parts of an entry, each made once from a run of units and cached by their names.

A unit is a compressed .npz of plain arrays (no pickles) holding the graph's feature vector
once and its per-config columns: tile collections have thousands of tiny files, and a parquet
file of ~350 columns costs ~20 ms of polars overhead per unit to write and read back.
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import polars as pl

from .cache import atomic_dir, part_dir, unit_path, write_atomically
from .schema import is_tile
from .rows import Rows
from .table import FeatureConfig, GraphTable, file_table, write_part

# Entry parts: tile units are tiny, so many share a part (one read instead of thousands when
# the entry is loaded); layout units are big, so each is its own part.
UNITS_PER_PART = {"tile": 256, "layout": 1}


def build_unit(npz_file: Path, collection: str, split: str, cfg: FeatureConfig,
               units: Path, *, packed_dir: Path | None = None, force: bool = False) -> Path:
    """The unit of `npz_file` under `units`, built unless it exists (or force)."""
    path = unit_path(units, npz_file)
    if path.exists() and not force:
        return path
    table = file_table(npz_file, collection, split, cfg, packed_dir=packed_dir)
    path.parent.mkdir(parents=True, exist_ok=True)

    arrays = {"graph": table.graph, "configs": table.configs,
              "columns": np.frombuffer("\n".join(table.columns).encode(), np.uint8),
              **table.rows._asdict()}
    return write_atomically(path, lambda tmp: write_npz(tmp, arrays))


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An uncompressed npz. A unit is read back once, into its entry's parquet part (which is
    compressed), and deflating its float32 columns, even at zlib level 1, took 5.2 s of the 23 s
    a 100,000-config file's all-configs build took on one core."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for key, value in arrays.items():
            with zf.open(key + ".npy", "w") as fh:
                np.lib.format.write_array(fh, np.asarray(value), allow_pickle=False)


def read_unit(path: Path) -> GraphTable:
    with np.load(path, allow_pickle=False) as z:
        return GraphTable(z["graph"], z["configs"], z["columns"].tobytes().decode().split("\n"),
                          Rows(*(z[k] for k in Rows._fields)))


def assemble(directory: Path, collection: str, unit_files: list[Path], graph_ids: list[str],
             *, force: bool = False) -> dict:
    """Link an entry's parts into `directory` (a temporary one: see cache.atomic_dir); returns
    n_graphs, n_rows and columns for its meta.json. Parts are cached by the units they hold, so
    after one file changes only its part is written again."""
    step = UNITS_PER_PART["tile" if is_tile(collection) else "layout"]
    n_rows, columns = 0, []
    for i in range(0, len(unit_files), step):
        part = _cached_part(unit_files[i:i + step], graph_ids[i:i + step], force)
        for suffix in (".parquet", ".json"):
            _link(part / f"part{suffix}", directory / f"part-{i // step:05d}{suffix}")
        n_rows += sum(json.loads((part / "part.json").read_text())["sizes"])
        columns = feature_columns(pl.read_parquet_schema(part / "part.parquet"))
    return {"n_graphs": len(unit_files), "n_rows": n_rows, "columns": columns}


def feature_columns(schema) -> list[str]:
    return [n for n in schema if n not in Rows._fields]


def _cached_part(unit_files: list[Path], graph_ids: list[str], force: bool) -> Path:
    part = part_dir(unit_files)
    if force or not (part / "part.json").exists():
        tables = []
        for graph_id, unit in zip(graph_ids, unit_files):
            table = read_unit(unit)
            tables.append((graph_id, table.X, table.rows))
        with atomic_dir(part) as tmp:
            write_part(tmp / "part.parquet", tables, table.columns)
    return part


def _link(source: Path, dest: Path) -> None:
    """Hard-link (no copy of a big file); copy where the filesystem cannot link."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)
