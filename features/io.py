"""Find and read TpuGraphs `.npz` files, validating every key against the real format.

The format reference is `shared/tpugraphs_format.md`. Nothing here computes features: a `Graph`
holds the file's arrays under the dataset's own key names, cast to canonical dtypes, with
`node_config_feat` already int8 (its only values are -1..5, so int8 is exact and 4x smaller).
"""
from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import kernels
from .inflate import PIECE_BYTES, MemberReader
from .schema import COLLECTIONS, LAYOUT, MAX_DIM_INDEX, N_NODE_FEAT, SPLITS, is_tile

N_TILE_CONFIG_FEAT = 24
N_LAYOUT_CONFIG_FEAT = 18
MAX_OPCODE = 120
# Value bounds from shared/tpugraphs_format.md. node_feat and config_feat hold integers the
# encoder computed as int64 and stored as float32 (section 4.2: "ints stored as float32", largest
# seen ~3e9; section 2.2: tile sizes, their sums and products), so finite values below 2**63 in
# magnitude are all the format can carry; tile sizes are never negative (unused slots are 0).
MAX_ABS_VALUE = 2.0**63
DEFAULT_DATA_DIR = Path("~/data/tpugraphs")
# Configs are decompressed and featurized in chunks of about this many megabytes of
# node_config_feat as float32: a count of configs would be ~0.9 GB at 4,096 configs x 3,000
# configurable nodes, and ~1 MB on a small graph.
DEFAULT_CHUNK_MB = 128.0

TILE_KEYS = ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
             "config_runtime_normalizers")
LAYOUT_KEYS = ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_config_feat",
               "config_runtime", "node_splits")



class DataFormatError(ValueError):
    """A data file or directory does not match the TpuGraphs format; the message names it."""


def collect_format_error(exc: BaseException | None, errors: list) -> None:
    """What a build does with one file's outcome: a file that breaks the format is listed with
    the others (each is reported after every other file is built); anything else stops it."""
    if isinstance(exc, DataFormatError):
        errors.append(exc)
    elif exc is not None:
        raise exc


class Graph(NamedTuple):
    """One npz file. Layout-only keys are None for tile files and vice versa.

    Shapes: node_feat (n, 140) float32; node_opcode (n,) int64; edge_index (m, 2) int64 with row
    [u, v] meaning u consumes v; config_runtime (c,) int64 (zeros in test);
    tile: config_feat (c, 24) float32, config_runtime_normalizers (c,) int64;
    layout: node_config_ids (nc,) int64, node_config_feat (c, nc, 18) int8, node_splits (s,) int64.

    A layout read that keeps only some configs (read_graph's `keep`) holds node_config_feat
    (k, nc, 18) of the configs at file positions config_index (k,), ascending, and what it
    computed over every config on the way: row_hashes (c,) uint64 (kernels.row_hash, the dedup
    key) and config_slots (nc, 3) (kernels.slots_set). config_runtime still has all c.
    """

    path: Path
    collection: str
    split: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    config_runtime: np.ndarray
    config_feat: np.ndarray | None = None
    config_runtime_normalizers: np.ndarray | None = None
    node_config_ids: np.ndarray | None = None
    node_config_feat: np.ndarray | None = None
    node_splits: np.ndarray | None = None
    config_index: np.ndarray | None = None
    row_hashes: np.ndarray | None = None
    config_slots: np.ndarray | None = None

    @property
    def graph_id(self) -> str:
        return self.path.stem

    def held(self, positions: np.ndarray) -> np.ndarray:
        """node_config_feat's row of each config at the given file positions."""
        positions = np.asarray(positions, np.int64)
        if self.config_index is None:
            return positions
        at = np.searchsorted(self.config_index, positions)
        if positions.size and (at.max() >= self.config_index.size
                               or np.any(self.config_index[at] != positions)):
            raise ValueError(f"{self.path}: configs {positions[:8]}... were not kept by the read")
        return at

    def slots(self) -> np.ndarray:
        """(nc, 3) kernels.slots_set over every config of the file."""
        if self.config_slots is not None:
            return self.config_slots
        return kernels.slots_set(self.node_config_feat)

    @property
    def n_configs(self) -> int:
        return int(self.config_runtime.shape[0])

    def chunk_configs(self, chunk_mb: float) -> int:
        """Configs per chunk of chunk_mb megabytes (see chunk_rows)."""
        per_config = (N_TILE_CONFIG_FEAT if self.config_feat is not None
                      else self.node_config_feat.shape[1] * N_LAYOUT_CONFIG_FEAT)
        return chunk_rows(per_config, chunk_mb)


def chunk_rows(values_per_config: int, chunk_mb: float) -> int:
    """How many configs of `values_per_config` float32 values fill chunk_mb megabytes (>= 1)."""
    return max(1, int(chunk_mb * 2**20) // max(4 * values_per_config, 1))


def collection_dir(collection: str) -> Path:
    """'layout:xla:random' -> Path('layout/xla/random'); rejects unknown names."""
    if collection not in COLLECTIONS:
        raise ValueError(f"unknown collection {collection!r}; expected one of {COLLECTIONS}")
    return Path(*collection.split(":"))


def resolve_npz_root(data_dir: str | os.PathLike) -> Path | None:
    """Accept the download root, `.../npz_all` or `.../npz_all/npz`; None if none exists."""
    base = Path(data_dir).expanduser()
    for candidate in (base / "npz_all" / "npz", base / "npz", base):
        if (candidate / "tile").is_dir() or (candidate / "layout").is_dir():
            return candidate
    return None


def list_npz(npz_root: Path, collection: str, split: str) -> list[Path]:
    """Sorted `.npz` files of one collection and split (empty if the directory is absent)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return sorted((npz_root / collection_dir(collection) / split).glob("*.npz"))


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
        arrays = _read_keys(path, keys, lambda zf, runtime: _kept_configs(
            zf, path, piece_bytes, rows, runtime, keep), with_runtime=True)
        arrays.update(arrays.pop("node_config_feat"))
    elif packed_dir is None:
        arrays = _read_keys(path, keys, lambda zf: read_node_config_feat(zf, path, piece_bytes,
                                                                         rows))
    else:
        arrays = _read_keys(path, keys, lambda zf: _packed_node_config_feat(
            zf, path, piece_bytes, Path(packed_dir), rows))
    if rows and arrays["config_runtime"].shape[:1] != _configs_read(arrays):
        arrays["config_runtime"] = _prefix_of_runtime(path, arrays)
    return _validate(Graph(path=path, collection=collection, split=split, **arrays))


def _configs_read(arrays: dict) -> tuple:
    hashes = arrays.get("row_hashes")
    return (hashes if hashes is not None else arrays["node_config_feat"]).shape[:1]


def _prefix_of_runtime(path: Path, arrays: dict) -> np.ndarray:
    """config_runtime cut to the configs read, once the full arrays are known to agree."""
    full = array_shapes(path, ("node_config_feat",))["node_config_feat"]
    runtime = arrays["config_runtime"]
    _expect(runtime.shape[:1] == full[:1], path, "config_runtime",
            f"one runtime per config of node_config_feat ({full[0]})", runtime.shape)
    return runtime[:_configs_read(arrays)[0]]


def _read_keys(path: Path, keys: tuple[str, ...], read_ncf, with_runtime: bool = False) -> dict:
    """The file's arrays of `keys`, node_config_feat through read_ncf(zipfile), or
    read_ncf(zipfile, config_runtime) with `with_runtime`."""
    try:
        with zipfile.ZipFile(path) as zf:
            present = {name.removesuffix(".npy") for name in zf.namelist()}
            missing = [k for k in keys if k not in present]
            if missing:
                raise DataFormatError(f"{path}: missing key(s) {missing}; found {sorted(present)}")
            arrays = {k: _read_member(zf, k, path) for k in keys if k != "node_config_feat"}
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
                    fp, shape, _, _ = _open_npy_member(zf, key, path)
                    fp.close()
                    shapes[key] = tuple(shape)
            return shapes
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: unreadable npz ({type(exc).__name__}: {exc})") from exc


def _read_member(zf: zipfile.ZipFile, key: str, path: Path) -> np.ndarray:
    with zf.open(key + ".npy") as fp:
        return np.lib.format.read_array(fp, allow_pickle=False)


def _open_npy_member(zf: zipfile.ZipFile, key: str, path: Path):
    fp = zf.open(key + ".npy")
    shape, fortran, dtype = _npy_header(fp)
    return fp, shape, fortran, dtype


def read_node_config_feat(zf: zipfile.ZipFile, path: Path, piece_bytes: int = PIECE_BYTES,
                          rows: int = 0) -> np.ndarray:
    """Decompress node_config_feat piece by piece into int8, never holding it as float32 whole;
    rows > 0: only its first `rows` configs.

    Real files reach 100,040 x hundreds x 18 float32 (GBs). Each inflated piece (a few MB, see
    inflate.py) is checked and converted while it is still in cache, so peak memory is the int8
    result plus one piece of `piece_bytes`.
    """
    with MemberReader(path, zf, "node_config_feat.npy") as fp:
        shape, fortran, dtype = _ncf_header(fp, path)
        if fortran:
            return _read_fortran(fp, shape, dtype, path)[:rows or None]
        shape = _first_rows(shape, rows)
        result = np.empty(shape, dtype=np.int8)
        for _ in _int8_pieces(fp, shape, dtype, path, piece_bytes, result.reshape(-1)):
            pass
        return result


def _kept_configs(zf: zipfile.ZipFile, path: Path, piece_bytes: int, rows: int,
                  runtime: np.ndarray, keep) -> dict:
    """One pass over node_config_feat (its first `rows` configs if rows > 0) in pieces of whole
    configs: each checked and converted to int8 while in cache, hashed, its slots counted, and
    the configs keep(runtime of those read) names copied out. The rest is never stored: writing
    a 100,000-config file's int8 copy and reading it back cost more than inflating it."""
    _expect(runtime.ndim == 1, path, "config_runtime", "shape (c>0,)", runtime.shape)
    with MemberReader(path, zf, "node_config_feat.npy") as fp:
        shape, fortran, dtype = _ncf_header(fp, path)
        if fortran:
            ncf = _read_fortran(fp, shape, dtype, path)[:rows or None]
            return _kept_of_whole(ncf, path, runtime, keep)
        shape = _first_rows(shape, rows)
        index = _kept_index(keep(runtime[:shape[0]]), shape[0], path)
        config_values = shape[1] * shape[2]
        step = max(1, piece_bytes // max(config_values * dtype.itemsize, 1))
        scratch = np.empty((min(step, shape[0]),) + shape[1:], np.int8)
        kept = np.empty((index.size,) + shape[1:], np.int8)
        hashes = np.empty(shape[0], np.uint64)
        slots = np.zeros(shape[1] * 3, np.int64)
        for start in range(0, shape[0], step):
            n = min(step, shape[0] - start)
            raw = _read_exact(fp, n * config_values * dtype.itemsize, path)
            piece = scratch[:n]
            _to_int8(np.frombuffer(raw, dtype=dtype), path, start * config_values, shape=shape,
                     out=piece.reshape(-1))
            as_bytes = piece.reshape(n, -1).view(np.uint8)
            hashes[start:start + n] = kernels.row_hash(as_bytes)
            kernels.add_slots_set(as_bytes, slots)
            lo, hi = np.searchsorted(index, (start, start + n))
            kept[lo:hi] = piece[index[lo:hi] - start]
    return dict(node_config_feat=kept, config_index=index, row_hashes=hashes,
                config_slots=kernels.slots_table(slots))


def _kept_of_whole(ncf: np.ndarray, path: Path, runtime: np.ndarray, keep) -> dict:
    index = _kept_index(keep(runtime[:ncf.shape[0]]), ncf.shape[0], path)
    return dict(node_config_feat=np.ascontiguousarray(ncf[index]), config_index=index,
                row_hashes=kernels.row_hash(ncf.reshape(ncf.shape[0], -1).view(np.uint8)),
                config_slots=kernels.slots_set(ncf))


def _kept_index(index, c: int, path: Path) -> np.ndarray:
    index = np.arange(c) if index is None else np.asarray(index, np.int64)
    if index.size and (index[0] < 0 or index[-1] >= c or np.any(np.diff(index) <= 0)):
        raise ValueError(f"{path}: configs to keep must be ascending positions in 0..{c - 1}")
    return index


def _first_rows(shape: tuple, rows: int) -> tuple:
    return (min(shape[0], rows) if rows else shape[0],) + shape[1:]


def _ncf_header(fp, path: Path) -> tuple[tuple, bool, np.dtype]:
    shape, fortran, dtype = _npy_header(fp)
    _check_node_config_feat(shape, dtype, path)
    return tuple(shape), fortran, dtype


def _read_fortran(fp, shape: tuple, dtype: np.dtype, path: Path) -> np.ndarray:
    """A Fortran-ordered member (rare; numpy never writes one unasked) is read whole."""
    raw = _read_exact(fp, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, path)
    return _to_int8(np.frombuffer(raw, dtype=dtype).reshape(shape, order="F"), path, 0)


def _int8_pieces(fp, shape: tuple, dtype: np.dtype, path: Path, piece_bytes: int,
                 out_flat: np.ndarray | None = None):
    """Each piece of a C-ordered member, checked and converted to int8: written into `out_flat`
    (the flat result) if given, else into one scratch buffer that every piece reuses."""
    total = int(np.prod(shape, dtype=np.int64))
    step = max(1, piece_bytes // dtype.itemsize)
    scratch = np.empty(min(step, total), np.int8) if out_flat is None else None
    for start in range(0, total, step):
        n = min(step, total - start)
        raw = _read_exact(fp, n * dtype.itemsize, path)
        dest = out_flat[start:start + n] if out_flat is not None else scratch[:n]
        yield _to_int8(np.frombuffer(raw, dtype=dtype), path, start, shape=shape, out=dest)


def _npy_header(fp) -> tuple[tuple, bool, np.dtype]:
    version = np.lib.format.read_magic(fp)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    return read_header(fp)


def _check_node_config_feat(shape, dtype: np.dtype, path: Path) -> None:
    if len(shape) != 3 or shape[2] != N_LAYOUT_CONFIG_FEAT:
        raise DataFormatError(
            f"{path}: key 'node_config_feat': expected shape (c, nc, 18), found {tuple(shape)}")
    if dtype.kind not in "fiu":
        raise DataFormatError(
            f"{path}: key 'node_config_feat': expected a numeric dtype, found {dtype}")


def packed_path(path: Path, packed_dir: Path, rows: int = 0) -> Path:
    """Where the int8 copy of a file's node_config_feat (its first `rows` configs if rows > 0)
    lives: named by the file's identity (path, size, mtime), so a changed download never reuses
    a stale copy."""
    st = Path(path).stat()
    ident = f"{Path(path).resolve()}|{st.st_size}|{st.st_mtime_ns}|int8-v1"
    prefix = f"-first{rows}" if rows else ""
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return packed_dir / f"{Path(path).stem}{prefix}-{digest}.npy"


def _packed_node_config_feat(zf: zipfile.ZipFile, path: Path, piece_bytes: int,
                             packed_dir: Path, rows: int = 0) -> np.ndarray:
    """The int8 copy (of the first `rows` configs if rows > 0), made on first use; a copy of
    the whole file serves every prefix."""
    whole = packed_path(path, packed_dir)
    target = packed_path(path, packed_dir, rows)
    if whole.exists():
        return np.load(whole, mmap_mode="r")[:rows or None]
    if not target.exists():
        packed_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
        try:
            _write_int8_copy(zf, path, piece_bytes, tmp, rows)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return np.load(target, mmap_mode="r")


def _write_int8_copy(zf: zipfile.ZipFile, path: Path, piece_bytes: int, dest: Path,
                     rows: int = 0) -> None:
    """The int8 .npy of node_config_feat, written piece by piece with plain writes: filling a
    memory map instead took a page fault per 4 KB and, flushed, a synchronous write of it all
    (together about 2 s of a 100,000-config file's 5 s build)."""
    with MemberReader(path, zf, "node_config_feat.npy") as fp, open(dest, "wb") as out:
        shape, fortran, dtype = _ncf_header(fp, path)
        if fortran:
            np.save(out, _read_fortran(fp, shape, dtype, path)[:rows or None])
            return
        shape = _first_rows(shape, rows)
        header = {"descr": "|i1", "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(out, header)
        for piece in _int8_pieces(fp, shape, dtype, path, piece_bytes):
            out.write(piece)


def _read_exact(fp, n_bytes: int, path: Path) -> bytes:
    data = fp.read(n_bytes)
    if len(data) != n_bytes:
        raise DataFormatError(f"{path}: key 'node_config_feat': file ends early "
                              f"(wanted {n_bytes} bytes, got {len(data)})")
    return data


def _to_int8(chunk: np.ndarray, path: Path, start: int, *, shape: tuple | None = None,
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
        bad = kernels.to_int8_checked(np.ascontiguousarray(_kernel_dtype(chunk)), as_int)
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


def _expect(cond: bool, path: Path, key: str, expected: str, found) -> None:
    if not cond:
        raise DataFormatError(f"{path}: key {key!r}: expected {expected}, found {found}")


def _as_int(arr: np.ndarray, path: Path, key: str) -> np.ndarray:
    _expect(arr.dtype.kind in "iu", path, key, "an integer dtype", arr.dtype)
    return arr.astype(np.int64, copy=False)


def _as_float(arr: np.ndarray, path: Path, key: str) -> np.ndarray:
    """float32, after checking every value as stored (so a float64 1e300 is reported, not inf)."""
    _expect(arr.dtype.kind in "fiu", path, key, "a numeric dtype", arr.dtype)
    _check_range(arr, path, key, -MAX_ABS_VALUE, MAX_ABS_VALUE,
                 "finite values of magnitude below 2**63")
    return arr.astype(np.float32, copy=False)


def _validate(g: Graph) -> Graph:
    """Check shapes, dtypes and value ranges; return the graph with canonical dtypes."""
    p = g.path
    node_feat = _as_float(g.node_feat, p, "node_feat")
    _expect(node_feat.ndim == 2 and node_feat.shape[1] == N_NODE_FEAT and node_feat.shape[0] > 0,
            p, "node_feat", f"shape (n>0, {N_NODE_FEAT})", node_feat.shape)
    _check_range(node_feat[:, LAYOUT], p, "node_feat", 0, MAX_DIM_INDEX + 1,
                 f"layout_minor_to_major dimension indices in 0..{MAX_DIM_INDEX}",
                 LAYOUT.start)
    n = node_feat.shape[0]
    opcode = _as_int(g.node_opcode, p, "node_opcode")
    _expect(opcode.shape == (n,), p, "node_opcode", f"shape ({n},)", opcode.shape)
    _expect(opcode.size == 0 or (opcode.min() >= 0 and opcode.max() <= MAX_OPCODE), p,
            "node_opcode", f"ids in 0..{MAX_OPCODE}", (opcode.min(), opcode.max()))
    edges = _validate_edges(_as_int(g.edge_index, p, "edge_index"), n, p)
    runtime = _as_int(g.config_runtime, p, "config_runtime")
    _expect(runtime.ndim == 1 and runtime.size > 0, p, "config_runtime", "shape (c>0,)",
            runtime.shape)
    _check_runtime_values(runtime, g.split, p, "config_runtime")
    fields = dict(node_feat=node_feat, node_opcode=opcode, edge_index=edges, config_runtime=runtime)
    fields.update(_validate_tile(g, runtime.size) if is_tile(g.collection)
                  else _validate_layout(g, n, runtime.size))
    return g._replace(**fields)


def _validate_edges(edges: np.ndarray, n: int, p: Path) -> np.ndarray:
    if edges.size == 0:
        return edges.reshape(0, 2)
    _expect(edges.ndim == 2 and edges.shape[1] == 2, p, "edge_index", "shape (m, 2)", edges.shape)
    _expect(edges.min() >= 0 and edges.max() < n, p, "edge_index", f"node ids in 0..{n - 1}",
            (int(edges.min()), int(edges.max())))
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    _expect(loops.size == 0, p, "edge_index", "no self-loops",
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
        _expect(not values.any(), p, key, "all zeros in a test file", "non-zero values")
    else:
        _expect(values.min() > 0, p, key, f"positive runtimes in a {split} file",
                f"minimum {values.min()}")


def _validate_tile(g: Graph, c: int) -> dict:
    p = g.path
    config_feat = _as_float(g.config_feat, p, "config_feat")
    _expect(config_feat.shape == (c, N_TILE_CONFIG_FEAT), p, "config_feat",
            f"shape ({c}, {N_TILE_CONFIG_FEAT})", config_feat.shape)
    _check_range(config_feat, p, "config_feat", 0, MAX_ABS_VALUE, "non-negative tile sizes")
    norm = _as_int(g.config_runtime_normalizers, p, "config_runtime_normalizers")
    _expect(norm.shape == (c,), p, "config_runtime_normalizers", f"shape ({c},)", norm.shape)
    _expect(norm.min() > 0, p, "config_runtime_normalizers", "positive values",
            f"minimum {norm.min()}")
    return dict(config_feat=config_feat, config_runtime_normalizers=norm)


def _validate_layout(g: Graph, n: int, c: int) -> dict:
    p = g.path
    ids = _as_int(g.node_config_ids, p, "node_config_ids")
    _expect(ids.ndim == 1, p, "node_config_ids", "a 1-D array", ids.shape)
    _expect(ids.size == 0 or (ids.min() >= 0 and ids.max() < n), p, "node_config_ids",
            f"node ids in 0..{n - 1}", (ids.min(initial=0), ids.max(initial=0)))
    _expect(np.unique(ids).size == ids.size, p, "node_config_ids", "unique ids", "duplicates")
    ncf = g.node_config_feat
    held = c if g.config_index is None else g.config_index.size
    _expect(ncf.shape == (held, ids.size, N_LAYOUT_CONFIG_FEAT), p, "node_config_feat",
            f"shape ({held}, {ids.size}, {N_LAYOUT_CONFIG_FEAT})", ncf.shape)
    if g.row_hashes is not None:
        _expect(g.row_hashes.shape == (c,), p, "config_runtime",
                f"one runtime per config of node_config_feat ({g.row_hashes.size})",
                (c,))
    splits = _as_int(g.node_splits, p, "node_splits")
    _expect(splits.ndim == 2 and splits.shape[0] == 1, p, "node_splits", "shape (1, s)",
            splits.shape)
    splits = splits.reshape(-1)
    _expect(splits.size == 0 or (splits.min() >= 0 and splits.max() <= n
                                 and bool(np.all(np.diff(splits) >= 0))),
            p, "node_splits", f"non-decreasing boundaries in 0..{n}", splits[:8])
    return dict(node_config_ids=ids, node_config_feat=ncf, node_splits=splits)
