"""The npy members of an npz zip: headers without inflating, small members whole, and
node_config_feat inflated in pieces straight into int8 (never whole as float32)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from features.npz.graph import DataFormatError
from features.npz.inflate import PIECE_BYTES, MemberReader
from features.npz.validate import check_node_config_feat, to_int8


def read_member(zf: zipfile.ZipFile, key: str, path: Path) -> np.ndarray:
    with zf.open(key + ".npy") as fp:
        return np.lib.format.read_array(fp, allow_pickle=False)


def open_npy_member(zf: zipfile.ZipFile, key: str, path: Path):
    fp = zf.open(key + ".npy")
    shape, fortran, dtype = npy_header(fp)
    return fp, shape, fortran, dtype


def npy_header(fp) -> tuple[tuple, bool, np.dtype]:
    version = np.lib.format.read_magic(fp)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    return read_header(fp)


def ncf_header(fp, path: Path) -> tuple[tuple, bool, np.dtype]:
    shape, fortran, dtype = npy_header(fp)
    check_node_config_feat(shape, dtype, path)
    return tuple(shape), fortran, dtype


def read_fortran(fp, shape: tuple, dtype: np.dtype, path: Path) -> np.ndarray:
    """A Fortran-ordered member (rare; numpy never writes one unasked) is read whole."""
    raw = read_exact(fp, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, path)
    return to_int8(np.frombuffer(raw, dtype=dtype).reshape(shape, order="F"), path, 0)


def int8_pieces(fp, shape: tuple, dtype: np.dtype, path: Path, piece_bytes: int,
                 out_flat: np.ndarray | None = None):
    """Each piece of a C-ordered member, checked and converted to int8: written into `out_flat`
    (the flat result) if given, else into one scratch buffer that every piece reuses."""
    total = int(np.prod(shape, dtype=np.int64))
    step = max(1, piece_bytes // dtype.itemsize)
    scratch = np.empty(min(step, total), np.int8) if out_flat is None else None
    for start in range(0, total, step):
        n = min(step, total - start)
        raw = read_exact(fp, n * dtype.itemsize, path)
        dest = out_flat[start:start + n] if out_flat is not None else scratch[:n]
        yield to_int8(np.frombuffer(raw, dtype=dtype), path, start, shape=shape, out=dest)


def read_exact(fp, n_bytes: int, path: Path) -> bytes:
    data = fp.read(n_bytes)
    if len(data) != n_bytes:
        raise DataFormatError(f"{path}: key 'node_config_feat': file ends early "
                              f"(wanted {n_bytes} bytes, got {len(data)})")
    return data


def first_rows(shape: tuple, rows: int) -> tuple:
    return (min(shape[0], rows) if rows else shape[0],) + shape[1:]


def read_node_config_feat(zf: zipfile.ZipFile, path: Path, piece_bytes: int = PIECE_BYTES,
                          rows: int = 0) -> np.ndarray:
    """Decompress node_config_feat piece by piece into int8, never holding it as float32 whole;
    rows > 0: only its first `rows` configs.

    Real files reach 100,040 x hundreds x 18 float32 (GBs). Each inflated piece (a few MB, see
    inflate.py) is checked and converted while it is still in cache, so peak memory is the int8
    result plus one piece of `piece_bytes`.
    """
    with MemberReader(path, zf, "node_config_feat.npy") as fp:
        shape, fortran, dtype = ncf_header(fp, path)
        if fortran:
            return read_fortran(fp, shape, dtype, path)[:rows or None]
        shape = first_rows(shape, rows)
        result = np.empty(shape, dtype=np.int8)
        for _ in int8_pieces(fp, shape, dtype, path, piece_bytes, result.reshape(-1)):
            pass
        return result
