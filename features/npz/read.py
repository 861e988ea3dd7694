"""Read one TpuGraphs `.npz` file into a validated `Graph` (format: shared/tpugraphs_format.md):
node_config_feat from its int8 copy, inflated whole, or streamed once keeping only the configs a
build needs, hashing and counting slots on the way."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from features.npz import read_kernels
from features.npz.graph import DataFormatError, Graph
from features.npz.inflate import PIECE_BYTES, MemberReader
from features.npz.member import (first_rows, ncf_header, open_npy_member, read_exact, read_fortran,
                                 read_member, read_node_config_feat)
from features.npz.pack import packed_node_config_feat, packed_path
from features.npz.validate import expect, to_int8, validate_graph
from features.schema import LAYOUT_KEYS, TILE_KEYS, is_tile


def read_graph(path: Path, collection: str, split: str, *, packed_dir: Path | None = None,
               piece_bytes: int = PIECE_BYTES, max_configs: int = 0, keep=None) -> Graph:
    """Read and validate one file. Raises DataFormatError naming the file, key and problem.

    With `packed_dir`, node_config_feat is decompressed once into an int8 .npy there and
    memory-mapped on every later read (see packed_path). With `max_configs` > 0, a layout file
    is read up to its first max_configs configs only: node_config_feat is inflated no further
    (so its CRC, which covers the whole member, is not checked) and config_runtime is cut alike.

    keep(config_runtime) -> sorted file positions, or None for all: a layout file whose whole
    int8 copy is not in packed_dir yet is then streamed once, every value checked, and only
    those configs held (see Graph); nothing is written to packed_dir.
    """
    path = Path(path)
    keys = TILE_KEYS if is_tile(collection) else LAYOUT_KEYS
    rows = 0 if is_tile(collection) else max_configs
    if keep is not None and not is_tile(collection) and not (
            packed_dir is not None and packed_path(path, Path(packed_dir)).exists()):
        arrays = read_keys(path, keys, lambda zf, runtime: _kept_configs(
            zf, path, piece_bytes, rows, runtime, keep), with_runtime=True)
        arrays.update(arrays.pop("node_config_feat"))
    elif packed_dir is None:
        arrays = read_keys(path, keys, lambda zf: read_node_config_feat(zf, path, piece_bytes,
                                                                         rows))
    else:
        arrays = read_keys(path, keys, lambda zf: packed_node_config_feat(
            zf, path, piece_bytes, Path(packed_dir), rows))
    if rows and arrays["config_runtime"].shape[:1] != _configs_read(arrays):
        arrays["config_runtime"] = _prefix_of_runtime(path, arrays)
    return validate_graph(Graph(path=path, collection=collection, split=split, **arrays))


def _configs_read(arrays: dict) -> tuple:
    hashes = arrays.get("row_hashes")
    return (hashes if hashes is not None else arrays["node_config_feat"]).shape[:1]


def _prefix_of_runtime(path: Path, arrays: dict) -> np.ndarray:
    """config_runtime cut to the configs read, once the full arrays are known to agree."""
    full = array_shapes(path, ("node_config_feat",))["node_config_feat"]
    runtime = arrays["config_runtime"]
    expect(runtime.shape[:1] == full[:1], path, "config_runtime",
            f"one runtime per config of node_config_feat ({full[0]})", runtime.shape)
    return runtime[:_configs_read(arrays)[0]]


def read_keys(path: Path, keys: tuple[str, ...], read_ncf, with_runtime: bool = False) -> dict:
    """The file's arrays of `keys`, node_config_feat through read_ncf(zipfile), or
    read_ncf(zipfile, config_runtime) with `with_runtime`."""
    try:
        with zipfile.ZipFile(path) as zf:
            present = {name.removesuffix(".npy") for name in zf.namelist()}
            missing = [k for k in keys if k not in present]
            if missing:
                raise DataFormatError(f"{path}: missing key(s) {missing}; found {sorted(present)}")
            arrays = {k: read_member(zf, k, path) for k in keys if k != "node_config_feat"}
            if "node_config_feat" in keys:
                arrays["node_config_feat"] = (read_ncf(zf, arrays["config_runtime"])
                                              if with_runtime else read_ncf(zf))
    except DataFormatError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise DataFormatError(f"{path}: unreadable npz ({type(exc).__name__}: {exc})") from exc
    return arrays


def count_configs(path: Path) -> int:
    """Number of configs in a file, from its config_runtime header alone."""
    shape = array_shapes(path, ("config_runtime",)).get("config_runtime")
    if not shape:
        raise DataFormatError(f"{path}: cannot read config_runtime (missing or 0-d)")
    return int(shape[0])


def array_shapes(path: Path, keys: tuple[str, ...]) -> dict[str, tuple]:
    """Shapes of the file's arrays among `keys`, from their headers alone (no decompression)."""
    try:
        with zipfile.ZipFile(path) as zf:
            present = {name.removesuffix(".npy") for name in zf.namelist()}
            shapes = {}
            for key in keys:
                if key in present:
                    fp, shape, _, _ = open_npy_member(zf, key, path)
                    fp.close()
                    shapes[key] = tuple(shape)
            return shapes
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: unreadable npz ({type(exc).__name__}: {exc})") from exc


def _kept_configs(zf: zipfile.ZipFile, path: Path, piece_bytes: int, rows: int,
                  runtime: np.ndarray, keep) -> dict:
    """One pass over node_config_feat (its first `rows` configs if rows > 0) in pieces of whole
    configs: each checked and converted to int8 while in cache, hashed, its slots counted, and
    the configs keep(runtime of those read) names copied out. The rest is never stored: writing
    a 100,000-config file's int8 copy and reading it back cost more than inflating it."""
    expect(runtime.ndim == 1, path, "config_runtime", "shape (c>0,)", runtime.shape)
    with MemberReader(path, zf, "node_config_feat.npy") as fp:
        shape, fortran, dtype = ncf_header(fp, path)
        if fortran:
            ncf = read_fortran(fp, shape, dtype, path)[:rows or None]
            return _kept_of_whole(ncf, path, runtime, keep)
        shape = first_rows(shape, rows)
        index = _kept_index(keep(runtime[:shape[0]]), shape[0], path)
        config_values = shape[1] * shape[2]
        step = max(1, piece_bytes // max(config_values * dtype.itemsize, 1))
        scratch = np.empty((min(step, shape[0]),) + shape[1:], np.int8)
        kept = np.empty((index.size,) + shape[1:], np.int8)
        hashes = np.empty(shape[0], np.uint64)
        slots = np.zeros(shape[1] * 3, np.int64)
        for start in range(0, shape[0], step):
            n = min(step, shape[0] - start)
            raw = read_exact(fp, n * config_values * dtype.itemsize, path)
            piece = scratch[:n]
            to_int8(np.frombuffer(raw, dtype=dtype), path, start * config_values, shape=shape,
                     out=piece.reshape(-1))
            as_bytes = piece.reshape(n, -1).view(np.uint8)
            hashes[start:start + n] = read_kernels.row_hash(as_bytes)
            read_kernels.add_slots_set(as_bytes, slots)
            lo, hi = np.searchsorted(index, (start, start + n))
            kept[lo:hi] = piece[index[lo:hi] - start]
    return dict(node_config_feat=kept, config_index=index, row_hashes=hashes,
                config_slots=read_kernels.slots_table(slots))


def _kept_of_whole(ncf: np.ndarray, path: Path, runtime: np.ndarray, keep) -> dict:
    index = _kept_index(keep(runtime[:ncf.shape[0]]), ncf.shape[0], path)
    return dict(node_config_feat=np.ascontiguousarray(ncf[index]), config_index=index,
                row_hashes=read_kernels.row_hash(ncf.reshape(ncf.shape[0], -1).view(np.uint8)),
                config_slots=read_kernels.slots_set(ncf))


def _kept_index(index, c: int, path: Path) -> np.ndarray:
    index = np.arange(c) if index is None else np.asarray(index, np.int64)
    if index.size and (index[0] < 0 or index[-1] >= c or np.any(np.diff(index) <= 0)):
        raise ValueError(f"{path}: configs to keep must be ascending positions in 0..{c - 1}")
    return index
