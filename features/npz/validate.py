"""The format's checks on a file's arrays (shapes, dtypes, edges, runtimes, value bounds), each
bound from a section of shared/tpugraphs_format.md; node_config_feat is checked as it is converted
to int8 (its only values are -1..5, so int8 is exact and 4x smaller)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from features.npz import read_kernels
from features.npz.graph import DataFormatError, Graph
from features.schema import (LAYOUT, MAX_DIM_INDEX, MAX_OPCODE, N_LAYOUT_CONFIG_FEAT,
                             N_NODE_FEAT, N_TILE_CONFIG_FEAT, is_tile)


# Value bounds from shared/tpugraphs_format.md. node_feat and config_feat hold integers the
# encoder computed as int64 and stored as float32 (section 4.2: "ints stored as float32", largest
# seen ~3e9; section 2.2: tile sizes, their sums and products), so finite values below 2**63 in
# magnitude are all the format can carry; tile sizes are never negative (unused slots are 0).
MAX_ABS_VALUE = 2.0**63


def expect(cond: bool, path: Path, key: str, expected: str, found) -> None:
    if not cond:
        raise DataFormatError(f"{path}: key {key!r}: expected {expected}, found {found}")


def _as_int(arr: np.ndarray, path: Path, key: str) -> np.ndarray:
    expect(arr.dtype.kind in "iu", path, key, "an integer dtype", arr.dtype)
    return arr.astype(np.int64, copy=False)


def _as_float(arr: np.ndarray, path: Path, key: str) -> np.ndarray:
    """float32, after checking every value as stored (so a float64 1e300 is reported, not inf)."""
    expect(arr.dtype.kind in "fiu", path, key, "a numeric dtype", arr.dtype)
    _check_range(arr, path, key, -MAX_ABS_VALUE, MAX_ABS_VALUE,
                 "finite values of magnitude below 2**63")
    return arr.astype(np.float32, copy=False)


def validate_graph(g: Graph) -> Graph:
    """Check shapes, dtypes and value ranges; return the graph with canonical dtypes."""
    p = g.path
    node_feat = _as_float(g.node_feat, p, "node_feat")
    expect(node_feat.ndim == 2 and node_feat.shape[1] == N_NODE_FEAT and node_feat.shape[0] > 0,
            p, "node_feat", f"shape (n>0, {N_NODE_FEAT})", node_feat.shape)
    _check_range(node_feat[:, LAYOUT], p, "node_feat", 0, MAX_DIM_INDEX + 1,
                 f"layout_minor_to_major dimension indices in 0..{MAX_DIM_INDEX}",
                 LAYOUT.start)
    n = node_feat.shape[0]
    opcode = _as_int(g.node_opcode, p, "node_opcode")
    expect(opcode.shape == (n,), p, "node_opcode", f"shape ({n},)", opcode.shape)
    expect(opcode.size == 0 or (opcode.min() >= 0 and opcode.max() <= MAX_OPCODE), p,
            "node_opcode", f"ids in 0..{MAX_OPCODE}", (opcode.min(), opcode.max()))
    edges = _validate_edges(_as_int(g.edge_index, p, "edge_index"), n, p)
    runtime = _as_int(g.config_runtime, p, "config_runtime")
    expect(runtime.ndim == 1 and runtime.size > 0, p, "config_runtime", "shape (c>0,)",
            runtime.shape)
    _check_runtime_values(runtime, g.split, p, "config_runtime")
    fields = dict(node_feat=node_feat, node_opcode=opcode, edge_index=edges, config_runtime=runtime)
    fields.update(_validate_tile(g, runtime.size) if is_tile(g.collection)
                  else _validate_layout(g, n, runtime.size))
    return g._replace(**fields)


def _validate_edges(edges: np.ndarray, n: int, p: Path) -> np.ndarray:
    if edges.size == 0:
        return edges.reshape(0, 2)
    expect(edges.ndim == 2 and edges.shape[1] == 2, p, "edge_index", "shape (m, 2)", edges.shape)
    expect(edges.min() >= 0 and edges.max() < n, p, "edge_index", f"node ids in 0..{n - 1}",
            (int(edges.min()), int(edges.max())))
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    expect(loops.size == 0, p, "edge_index", "no self-loops",
            f"self-loop at row {loops[0] if loops.size else ''}")
    return edges


def _check_range(arr: np.ndarray, p: Path, key: str, lo: float, hi: float, expected: str,
                 first_column: int = 0) -> None:
    """Every value in lo <= v < hi, else an error naming the first offending index and value;
    `arr` may be a column slice starting at `first_column` of the key's array."""
    bad = ~((arr >= lo) & (arr < hi))   # NaN fails both comparisons
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        index = where[:-1] + (where[-1] + first_column,) if where else where
        raise DataFormatError(f"{p}: key {key!r}: expected {expected}, found "
                              f"{float(arr[where]):.7g} at index {index}")


def _check_runtime_values(values: np.ndarray, split: str, p: Path, key: str) -> None:
    if split == "test":
        expect(not values.any(), p, key, "all zeros in a test file", "non-zero values")
    else:
        expect(values.min() > 0, p, key, f"positive runtimes in a {split} file",
                f"minimum {values.min()}")


def _validate_tile(g: Graph, c: int) -> dict:
    p = g.path
    config_feat = _as_float(g.config_feat, p, "config_feat")
    expect(config_feat.shape == (c, N_TILE_CONFIG_FEAT), p, "config_feat",
            f"shape ({c}, {N_TILE_CONFIG_FEAT})", config_feat.shape)
    _check_range(config_feat, p, "config_feat", 0, MAX_ABS_VALUE, "non-negative tile sizes")
    norm = _as_int(g.config_runtime_normalizers, p, "config_runtime_normalizers")
    expect(norm.shape == (c,), p, "config_runtime_normalizers", f"shape ({c},)", norm.shape)
    expect(norm.min() > 0, p, "config_runtime_normalizers", "positive values",
            f"minimum {norm.min()}")
    return dict(config_feat=config_feat, config_runtime_normalizers=norm)


def _validate_layout(g: Graph, n: int, c: int) -> dict:
    p = g.path
    ids = _as_int(g.node_config_ids, p, "node_config_ids")
    expect(ids.ndim == 1, p, "node_config_ids", "a 1-D array", ids.shape)
    expect(ids.size == 0 or (ids.min() >= 0 and ids.max() < n), p, "node_config_ids",
            f"node ids in 0..{n - 1}", (ids.min(initial=0), ids.max(initial=0)))
    expect(np.unique(ids).size == ids.size, p, "node_config_ids", "unique ids", "duplicates")
    ncf = g.node_config_feat
    held = c if g.config_index is None else g.config_index.size
    expect(ncf.shape == (held, ids.size, N_LAYOUT_CONFIG_FEAT), p, "node_config_feat",
            f"shape ({held}, {ids.size}, {N_LAYOUT_CONFIG_FEAT})", ncf.shape)
    if g.row_hashes is not None:
        expect(g.row_hashes.shape == (c,), p, "config_runtime",
                f"one runtime per config of node_config_feat ({g.row_hashes.size})",
                (c,))
    splits = _as_int(g.node_splits, p, "node_splits")
    expect(splits.ndim == 2 and splits.shape[0] == 1, p, "node_splits", "shape (1, s)",
            splits.shape)
    splits = splits.reshape(-1)
    expect(splits.size == 0 or (splits.min() >= 0 and splits.max() <= n
                                 and bool(np.all(np.diff(splits) >= 0))),
            p, "node_splits", f"non-decreasing boundaries in 0..{n}", splits[:8])
    return dict(node_config_ids=ids, node_config_feat=ncf, node_splits=splits)


def check_node_config_feat(shape, dtype: np.dtype, path: Path) -> None:
    if len(shape) != 3 or shape[2] != N_LAYOUT_CONFIG_FEAT:
        raise DataFormatError(
            f"{path}: key 'node_config_feat': expected shape (c, nc, 18), found {tuple(shape)}")
    if dtype.kind not in "fiu":
        raise DataFormatError(
            f"{path}: key 'node_config_feat': expected a numeric dtype, found {dtype}")


def to_int8(chunk: np.ndarray, path: Path, start: int, *, shape: tuple | None = None,
             out: np.ndarray | None = None) -> np.ndarray:
    """The chunk as int8 (into `out` if given) after checking every value is an integer in -1..5.
    `start` is the chunk's offset along the first axis of `shape`, or, for a flat chunk of an
    array of `shape`, its flat offset; errors give the index in the whole array.

    An int8 chunk (candidates an autotuner passes) is checked by its minimum and maximum and
    returned as is, so the Graph shares the caller's array (features only read it)."""
    if chunk.dtype == np.int8 and out is None:
        as_int = np.ascontiguousarray(chunk)
        ok = as_int.size == 0 or (as_int.min() >= -1 and as_int.max() <= 5)
        bad = -1 if ok else int(np.flatnonzero((as_int < -1) | (as_int > 5))[0])
    else:
        as_int = np.empty(chunk.shape, np.int8) if out is None else out
        bad = read_kernels.to_int8_checked(np.ascontiguousarray(_kernel_dtype(chunk)), as_int)
    if bad >= 0:
        value = chunk.reshape(-1)[bad].item()
        if shape is None:
            where = np.unravel_index(bad, chunk.shape)
            bad_pos = (int(where[0]) + start,) + tuple(int(b) for b in where[1:])
        else:
            bad_pos = tuple(int(i) for i in np.unravel_index(start + bad, shape))
        raise DataFormatError(f"{path}: key 'node_config_feat': expected integers in -1..5, "
                              f"found {value!r} at index {bad_pos}")
    return as_int


def _kernel_dtype(values: np.ndarray) -> np.ndarray:
    """Numba takes native byte order and floats of 4 or 8 bytes: others are converted (exactly)."""
    dt = values.dtype
    if dt.kind == "f" and dt.itemsize < 4:
        return values.astype(np.float32)
    return values if dt.isnative else values.astype(dt.newbyteorder("="))
