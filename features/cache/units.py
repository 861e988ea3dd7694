"""Units of the feature cache: the rows of one input file, the unit of work of a build.

`build_unit` is self-contained (no pool, no global state): given a file and the directory
where its collection/split keeps units (cache.unit_dir), it writes that file's rows once and
returns the unit's path, so any scheduler can run it as a task. `assemble` links the parquet
parts of an entry, each made once from a run of units and cached by their names.

A unit is a compressed .npz of plain arrays (no pickles) holding the graph's feature vector
once and its per-config columns: tile collections have thousands of tiny files, and a parquet
file of ~350 columns costs ~20 ms of polars overhead per unit to write and read back.

What is read back is checked first (features/cache/integrity.py): a part against its sums.json, an
int8 copy against its record, a unit by its zip CRC; a damaged one is made again, with a notice.
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import polars as pl

from features.cache import integrity
from features.cache.store import (DamagedCacheError, StorageError, atomic_dir, part_dir,
                                  storage_message, unit_path, write_atomically, write_fault,
                                  writing)
from features.npz.graph import DataFormatError
from features.npz.pack import packed_path
from features.schema import is_tile
from features.cache.entries import NODES_SUFFIX, node_arrays, read_nodes
from features.rows.row_selection import Rows
from features.rows.table import FeatureConfig, GraphTable, file_table, write_part

# Entry parts: tile units are tiny, so many share a part (one read instead of thousands when
# the entry is loaded); layout units are big, so each is its own part. Splits are scored a
# part at a time: 64 uncut tile kernels are about 130 MB of rows (docs/records/check_memory.md)
UNITS_PER_PART = {"tile": 64, "layout": 1}
# A part's files: its rows, their graphs and sizes, and (NODE_ROW_COLLECTIONS) its node rows
PART_FILES = (".parquet", ".json", NODES_SUFFIX)


def build_unit(npz_file: Path, collection: str, split: str, cfg: FeatureConfig,
               units: Path, *, packed_dir: Path | None = None, force: bool = False) -> Path:
    """The unit of `npz_file` under `units`, built unless it exists (or force)."""
    path = unit_path(units, npz_file)
    if path.exists() and not force:
        return path
    copies = int8_copies(npz_file, collection, split, cfg, packed_dir)
    for copy in copies:
        integrity.discard_if_damaged(copy, "making it again")
    table = _file_table(npz_file, collection, split, cfg, packed_dir)
    for copy in copies:
        integrity.record_file(copy)
    arrays = {"graph": table.graph, "configs": table.configs,
              "columns": np.frombuffer("\n".join(table.columns).encode(), np.uint8),
              "n_configs": np.int64(table.n_configs), **table.rows._asdict(),
              **node_arrays(table.nodes)}
    what = f"the feature rows of {Path(npz_file).name}"
    with writing(what, path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomically(path, lambda tmp: write_npz(tmp, arrays), what)


def int8_copies(npz_file: Path, collection: str, split: str, cfg: FeatureConfig,
                packed_dir: Path | None) -> list[Path]:
    """The int8 copies of node_config_feat a read of the file may use (io.read_graph: the
    whole file's, or that of the first max_configs table.file_table asks of a train file)."""
    if packed_dir is None or is_tile(collection):
        return []
    rows = cfg.max_read_configs_layout if split == "train" else 0
    return sorted({packed_path(npz_file, packed_dir), packed_path(npz_file, packed_dir, rows)})


def _file_table(npz_file: Path, collection: str, split: str, cfg: FeatureConfig,
                packed_dir: Path | None) -> GraphTable:
    """table.file_table, where failing to write an int8 copy is a StorageError: the reader
    reports anything going wrong inside the npz read as the input file's fault."""
    try:
        return file_table(npz_file, collection, split, cfg, packed_dir=packed_dir)
    except DataFormatError as exc:
        fault = write_fault(exc, packed_dir) if packed_dir is not None else None
        if fault is None:
            raise
        what = f"the int8 copy of {Path(npz_file).name}'s node_config_feat"
        raise StorageError(storage_message(what, packed_dir, fault)) from exc


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An uncompressed npz. A unit is read back once, into its entry's parquet part (which is
    compressed), and deflating its float32 columns, even at zlib level 1, took 5.2 s of the 23 s
    a 100,000-config file's all-configs build took on one core."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for key, value in arrays.items():
            with zf.open(key + ".npy", "w") as fh:
                np.lib.format.write_array(fh, np.asarray(value), allow_pickle=False)


def read_unit(path: Path) -> GraphTable:
    """A unit's rows; DamagedCacheError if its file is not what was written (zip CRC-32)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return GraphTable(z["graph"], z["configs"],
                              z["columns"].tobytes().decode().split("\n"),
                              Rows(*(z[k] for k in Rows._fields)), read_nodes(z),
                              int(z["n_configs"]))
    except (zipfile.BadZipFile, EOFError, KeyError, ValueError, UnicodeDecodeError,
            FileNotFoundError) as exc:
        raise DamagedCacheError(path, f"damaged cache file ({type(exc).__name__}: {exc})") \
            from exc


def assemble(directory: Path, collection: str, unit_files: list[Path], graph_ids: list[str],
             *, force: bool = False, remake=None) -> dict:
    """Link an entry's parts into `directory` (a temporary one: see cache.atomic_dir); returns
    n_graphs, n_rows, columns and the parts' checksum records (sums) for its meta.json. Parts
    are cached by the units they hold, so after one file changes only its part is written
    again. remake(unit) builds a damaged unit again and returns its path."""
    step = UNITS_PER_PART["tile" if is_tile(collection) else "layout"]
    n_rows, columns, sums = 0, [], {}
    for i in range(0, len(unit_files), step):
        part, part_sums = _cached_part(unit_files[i:i + step], graph_ids[i:i + step], force,
                                       remake)
        for suffix in PART_FILES:
            if f"part{suffix}" in part_sums:
                name = f"part-{i // step:05d}{suffix}"
                _link(part / f"part{suffix}", directory / name)
                sums[name] = part_sums[f"part{suffix}"]
        n_rows += sum(json.loads((part / "part.json").read_text())["sizes"])
        columns = feature_columns(pl.read_parquet_schema(part / "part.parquet"))
    return {"n_graphs": len(unit_files), "n_rows": n_rows, "columns": columns, "sums": sums}


def feature_columns(schema) -> list[str]:
    return [n for n in schema if n not in Rows._fields]


def _cached_part(unit_files: list[Path], graph_ids: list[str], force: bool,
                 remake) -> tuple[Path, dict]:
    """The part holding these units, checked if cached, else written; and its sums."""
    part, replace = part_dir(unit_files), force
    if not force:
        try:
            return part, integrity.verify_dir(part)
        except FileNotFoundError:   # not written yet
            pass
        except DamagedCacheError as exc:
            integrity.notice(exc, "writing the part again")
            replace = True
    tables, nodes = [], []
    for graph_id, unit in zip(graph_ids, unit_files):
        table = _read_or_remake(unit, remake)
        tables.append((graph_id, table.X, table.rows, table.n_configs))
        nodes.append(table.nodes)
    files = ["part.parquet", "part.json"]
    done = None if replace else (lambda d: (d / integrity.SUMS).exists())
    with atomic_dir(part, "a feature part", done) as tmp:
        write_part(tmp / "part.parquet", tables, table.columns)
        if any(n is not None for n in nodes):
            write_npz(tmp / f"part{NODES_SUFFIX}", {k: v for i, n in enumerate(nodes)
                                                    for k, v in node_arrays(n, f"{i}.").items()})
            files.append(f"part{NODES_SUFFIX}")
        integrity.write_sums(tmp, files)
    return part, integrity.read_sums(part)


def _read_or_remake(unit: Path, remake) -> GraphTable:
    try:
        return read_unit(unit)
    except DamagedCacheError as exc:
        if remake is None:
            raise
        integrity.notice(exc, "building it again")
        return read_unit(remake(unit))


def _link(source: Path, dest: Path) -> None:
    """Hard-link (no copy of a big file); copy where the filesystem cannot link."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)
