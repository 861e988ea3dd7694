"""Checksums of cache files: recorded when a file is written, checked when it is read back.

A file's record is its size and CRC-32 (zlib, over the bytes in pieces): enough to tell a
damaged file (overwritten, cut short, bit rot) from the one written, at about 1.4 GB/s read
from the page cache (zlib.crc32 alone: 2 GB/s, blake2b 0.57 GB/s on this machine). Where
the record lives: an entry's meta.json ("sums"), a part's sums.json, a run's run.json
("files"), an int8 copy's `<copy>.sum` beside it. Units are zip files, whose CRC-32 the
reader checks already (units.read_unit).

A file checked once is not read again for a second check in the same process while its
inode, size and times are unchanged: `build_entry` checks an entry before `load_entry` reads
it (the check cost 0.10 s against 10.4 s of parquet reads on the dev-set entries, see README).
"""
from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path

from features.cache.store import DamagedCacheError, write_atomically

SUMS = "sums.json"         # a directory's record: file name -> record
SIDECAR = ".sum"           # a single file's record: <file>.sum
PIECE_BYTES = 8 * 2**20

# (device, inode) -> ((size, mtime_ns, ctime_ns), crc32) of files whose bytes were read
_seen: dict[tuple[int, int], tuple[tuple[int, int, int], int]] = {}
_reported: set[tuple] = set()   # device, inode, size and times of damaged files in a notice


def file_sum(path: Path) -> dict:
    """{"size": bytes, "crc32": CRC-32 of the bytes} of one file."""
    st, crc = _read_crc(path)
    return {"size": st.st_size, "crc32": crc}


def _read_crc(path: Path) -> tuple[os.stat_result, int]:
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        crc = 0
        while piece := fh.read(PIECE_BYTES):
            crc = zlib.crc32(piece, crc)
    return st, crc


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def problem(path: Path, record: dict) -> str:
    """Why `path` is not the file `record` describes, or "" if it is."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "missing"
    if st.st_size != record["size"]:
        return f"{st.st_size} bytes, {record['size']} when it was written"
    seen = _seen.get((st.st_dev, st.st_ino))
    if seen and seen[0] == _stamp(st):
        crc = seen[1]
    else:
        st, crc = _read_crc(path)
        _seen[(st.st_dev, st.st_ino)] = (_stamp(st), crc)
    return "" if crc == record["crc32"] else "checksum differs from when it was written"


def verify(path: Path, record: dict, fix: str = "") -> None:
    """DamagedCacheError naming `path` (and `fix`, what to run) unless it matches `record`."""
    found = problem(path, record)
    if found:
        raise DamagedCacheError(path, f"damaged cache file ({found})", fix)


def write_sums(directory: Path, names) -> dict:
    """Record the files `names` of `directory` in its sums.json; returns the records."""
    sums = {name: file_sum(Path(directory) / name) for name in names}
    (Path(directory) / SUMS).write_text(json.dumps(sums))
    return sums


def read_sums(directory: Path) -> dict:
    """sums.json of `directory`: FileNotFoundError if none was written, DamagedCacheError if
    it cannot be read."""
    path = Path(directory) / SUMS
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedCacheError(path, f"damaged cache file (unreadable: {exc})") from None


def verify_dir(directory: Path) -> dict:
    """Check every file sums.json of `directory` records; returns the records."""
    sums = read_sums(directory)
    for name, record in sums.items():
        verify(Path(directory) / name, record)
    return sums


def sidecar(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + SIDECAR)


def record_file(path: Path) -> None:
    """Write `path`'s record beside it unless one is there."""
    if Path(path).exists() and not sidecar(path).exists():
        record = file_sum(path)
        write_atomically(sidecar(path), lambda tmp: tmp.write_text(json.dumps(record)),
                         f"the checksum of {Path(path).name}")


def discard_if_damaged(path: Path, remedy: str) -> None:
    """Remove `path` (and its record) when it differs from its record, with a notice."""
    try:
        record = json.loads(sidecar(path).read_text())
        found = problem(path, record)
    except FileNotFoundError:
        return
    except (ValueError, KeyError, UnicodeDecodeError):
        found = "its checksum record is unreadable"
    if found and found != "missing":
        notice(DamagedCacheError(path, f"damaged cache file ({found})"), remedy)
        Path(path).unlink(missing_ok=True)
    if found:
        sidecar(path).unlink(missing_ok=True)


def notice(exc: DamagedCacheError, remedy: str) -> None:
    """The one line a damaged file that is made again gets: once, though an entry's part and
    the cached part it links to are one file under two names."""
    try:
        st = os.stat(exc.path)
        said = (st.st_dev, st.st_ino, *_stamp(st))
        if said in _reported:
            return
        _reported.add(said)
    except OSError:
        pass
    print(f"notice: {exc.path}: {exc.problem}; {remedy}", file=sys.stderr, flush=True)
