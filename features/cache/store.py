"""The feature cache: keys, atomic writes, and reclaiming what crashed processes left behind.

Layout (every path under <cache> is named here, by the functions below):
  <cache>/features/units/<collection with '-'>-<split>-<key12>/<file stem>.<stamp12>.npz
      one input file's rows (a unit); the directory key covers the feature signature (row code
      and settings) and library versions, the stamp the file's name, size and mtime.
  <cache>/features/parts/<units dir name>/<key12>/part.parquet + part.json
      the rows of a run of units (256 tile files, one layout file), keyed by the units' names.
  <cache>/features/<collection with '-'>-<split>-<key12>/part-*.parquet + part-*.json + meta.json
      a collection/split entry: hard links to its parts; the key covers every unit's name.
  <cache>/packed/      int8 copies of node_config_feat (io.packed_path names each)
  <cache>/runs/        trained runs;  <cache>/sample/  the generated sample;  <cache>/bench/  bench
Units, parts and entries are written under temporary names and renamed into place, so a crash
leaves finished units (a rerun builds only the rest) and never a half part or entry. Temporary
names carry the writer's pid and host; `reclaim_stale` removes those whose writer is gone.
Commands may share a cache at once: a directory someone else published under the same key is
kept (equal key, equal contents), and a full disk or an unwritable directory is a StorageError
naming what was being written and where (features/cache/integrity.py checks what is read back).
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from features.digest import fingerprint
from features.versions import library_versions
from features.schema import collection_slug

SCHEMA = 1  # bump when the on-disk format of an entry changes
FEATURES_DIR = Path(__file__).resolve().parents[1]


def file_stamps(files: list[Path]) -> list[tuple[str, int, int]]:
    stamps = []
    for f in files:
        st = f.stat()
        stamps.append((f.name, st.st_size, st.st_mtime_ns))
    return stamps


def versions() -> dict:
    """The libraries a cache entry's rows depend on (part of its key)."""
    return library_versions("numpy", "numba", "polars")


def features_root(cache_root: Path) -> Path:
    return Path(cache_root) / "features"


def packed_root(cache_root: Path) -> Path:
    return Path(cache_root) / "packed"


def runs_root(cache_root: Path) -> Path:
    return Path(cache_root) / "runs"


def sample_root(cache_root: Path) -> Path:
    return Path(cache_root) / "sample"


def bench_root(cache_root: Path) -> Path:
    return Path(cache_root) / "bench"


def _slug(collection: str, split: str) -> str:
    return f"{collection_slug(collection)}-{split}"


def unit_dir(cache_root: Path, collection: str, split: str, signature: str) -> Path:
    """Where the units of one collection/split under one feature signature live."""
    key = fingerprint(schema=SCHEMA, signature=signature, collection=collection, split=split,
                      versions=versions())
    return features_root(cache_root) / "units" / f"{_slug(collection, split)}-{key}"


def unit_path(units: Path, npz_file: Path) -> Path:
    """A file's unit, named by its stem and stamp: an edited or replaced file gets a new one."""
    stamp = fingerprint(stamp=file_stamps([npz_file]))
    return Path(units) / f"{Path(npz_file).stem}.{stamp}.npz"


def part_dir(unit_files: list[Path]) -> Path:
    """A cached entry part holding these units (all of one unit directory), keyed by their names."""
    units = Path(unit_files[0]).parent
    key = fingerprint(units=[Path(u).name for u in unit_files])
    return units.parent.parent / "parts" / units.name / key


def entry_dir(cache_root: Path, collection: str, split: str, key: str) -> Path:
    return features_root(cache_root) / f"{_slug(collection, split)}-{key}"


def is_complete(entry: Path) -> bool:
    return (entry / "meta.json").exists()


# ---------------------------------------------------------------- errors a user sees

class CacheError(RuntimeError):
    """A cache file could not be written, or was found damaged; the message names it."""


class StorageError(CacheError):
    """Writing failed for lack of space or permission (full disk, read-only directory)."""


class DamagedCacheError(CacheError):
    """A cache file is not what was written (size or checksum differs, or unreadable)."""

    def __init__(self, path, problem: str, fix: str = ""):
        super().__init__(path, problem, fix)   # all in args: the error crosses process pools
        self.path, self.problem, self.fix = Path(path), problem, fix

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" + (f"; {self.fix}" if self.fix else "")


# errnos that mean the directory cannot take the write, whatever was written
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}
_NO_PERMISSION = {errno.EACCES, errno.EPERM}


def write_fault(exc: BaseException | None, directory: Path) -> OSError | None:
    """`exc` (or the error it was raised from) if it says `directory` cannot be written: no
    space, a read-only file system, or no permission on a path along `directory`."""
    for err in (exc, getattr(exc, "__cause__", None)):
        if not isinstance(err, OSError):
            continue
        if err.errno in _NO_ROOM:
            return err
        if err.errno in _NO_PERMISSION and _along(err.filename, Path(directory)):
            return err
    return None


def _along(filename, directory: Path) -> bool:
    if filename is None:
        return True
    path = Path(os.fsdecode(filename))
    return path.is_relative_to(directory) or directory.is_relative_to(path)


@contextmanager
def writing(what: str, directory: Path):
    """Turn a write fault met while writing `what` in `directory` into a StorageError naming
    both; the caller removes what it had written (atomic_dir, write_atomically do)."""
    try:
        yield
    except OSError as exc:
        fault = write_fault(exc, directory)
        if fault is None:
            raise
        raise StorageError(storage_message(what, directory, fault)) from exc


def storage_message(what: str, directory: Path, fault: OSError) -> str:
    where = f" ({os.fsdecode(fault.filename)})" if fault.filename else ""
    return (f"cannot write {what} in {directory}: {fault.strerror or fault}{where}; nothing "
            f"partial was kept: free space there or make it writable, then rerun")


# ---------------------------------------------------------------- temporary names

STALE_AGE_S = 24 * 3600   # unowned (or other-host) temporaries are reclaimed after this long
_TAGGED = re.compile(r"\.tmp-(\d+)-([A-Za-z0-9]*)(\.[A-Za-z0-9_]+)?$")
_PID_TMP = re.compile(r"\.(\d+)\.tmp$")   # io.packed_path's temporaries: <name>.<pid>.tmp


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32]


def owner_tag() -> str:
    """Suffix of every temporary this process writes: `.tmp-<pid>-<host>`."""
    return f".tmp-{os.getpid()}-{_host()}"


PUBLISH_ATTEMPTS = 5   # renames lost to other processes publishing the same directory


@contextmanager
def atomic_dir(dest: Path, what: str = "", done=None):
    """Yield a temporary sibling directory; on success it becomes `dest` in one rename, on any
    error it is removed, so readers see the old `dest`, the new one, or nothing.

    done(dest) -> bool says a `dest` already there holds what this one would (the same key,
    complete: another process published it meanwhile); it is then kept and ours dropped.
    Otherwise an existing `dest` is replaced. `what` names the contents in a StorageError."""
    dest = Path(dest)
    with writing(what or dest.name, dest.parent):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + owner_tag() + ".", dir=dest.parent))
        try:
            yield tmp
            _publish(tmp, dest, done)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _publish(tmp: Path, dest: Path, done) -> None:
    """Rename `tmp` to `dest`. A rename cannot replace a non-empty directory, so one being
    replaced is first moved aside (and removed after); a rename that loses to another
    process's publish tries again, and keeps theirs when done() accepts it."""
    for _ in range(PUBLISH_ATTEMPTS):
        if done is not None and done(dest):
            shutil.rmtree(tmp, ignore_errors=True)
            return
        aside = dest.with_name(f"{dest.name}{owner_tag()}.old{secrets.token_hex(4)}")
        try:
            os.rename(dest, aside)
        except FileNotFoundError:
            aside = None
        try:
            os.replace(tmp, dest)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        finally:
            if aside is not None:
                shutil.rmtree(aside, ignore_errors=True)
    raise CacheError(f"{dest}: other processes kept replacing it; rerun when they are done")


def write_atomically(dest: Path, write, what: str = "") -> Path:
    """Call write(tmp_path), then rename the temporary over `dest` (a file: the rename
    replaces one another process wrote meanwhile). `what` names it in a StorageError."""
    tmp = dest.with_name(dest.name + owner_tag())
    try:
        with writing(what or dest.name, dest.parent):
            write(tmp)
            os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def reclaim_stale(cache_root: Path) -> list[Path]:
    """Remove temporaries whose writer is gone; returns what was removed.

    A temporary tagged by this host is stale when its pid is not running: a live build's own
    files are never touched, and a crashed one's are removed on the next start. Untagged ones
    (`*.partial` of older versions) and other hosts' (a shared cache) cannot be checked that
    way and are removed once older than STALE_AGE_S."""
    root, features = Path(cache_root), features_root(cache_root)
    dirs = [root, features, runs_root(root), packed_root(root), bench_root(root)]
    dirs += sorted((features / "units").glob("*/")) + sorted((features / "parts").glob("*/"))
    removed = []
    for d in dirs:
        for path in (d.iterdir() if d.is_dir() else ()):
            if _is_stale(path) and _remove(path):
                removed.append(path)
    return removed


def _remove(path: Path) -> bool:
    """Remove a file or tree; False where the cache cannot be written (the command that
    writes there says so)."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
        return not path.exists()
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def _is_stale(path: Path) -> bool:
    tagged, by_pid = _TAGGED.search(path.name), _PID_TMP.search(path.name)
    if tagged and tagged.group(2) == _host():
        return not _alive(int(tagged.group(1)))
    if by_pid:
        return not _alive(int(by_pid.group(1)))
    if tagged or path.name.endswith(".partial"):
        return time.time() - path.stat().st_mtime > STALE_AGE_S
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # someone else's process: alive
        return True
    return _state(pid) != "Z"


def _state(pid: int) -> str:
    """The process state letter from /proc (Z = zombie: exited, not yet reaped), "" if unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
