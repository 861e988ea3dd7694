"""Checking, before any work, that an output can be written where it was asked for (issue 41).

A command that fails after minutes of work because its output names a directory, sits under a
file or lands in a directory that takes no new file wastes the work and, worse, ends in a
traceback; every output the commands and the API write is checked here first: `check_file`
for a file, `check_dir` for a directory. Writability is tried (a file made and removed), not
read from mode bits, which root passes whatever they say. Missing directories are fine: the
write makes them.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """A path an output cannot be written to: `cannot write PATH: reason`."""

    def __init__(self, path: Path, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"cannot write {path}: {reason}")


def check_file(path: str | os.PathLike) -> Path:
    """path, if a file can be written there (made beside it and renamed over it), else
    OutputPathError: an existing directory, a path under a file, or a directory that takes no
    new file."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(path, "it is an existing directory")
    _probe(path, _nearest_dir(path, path.parent))
    return path


def check_dir(path: str | os.PathLike, *, replaced: bool = False) -> Path:
    """path, if a directory can be written there, else OutputPathError: an existing file, a
    path under a file, or a directory that takes no new file. `replaced`: the directory is
    made beside `path` and renamed over it (report --out, CostModel.save), so its parent is
    written too; otherwise files are written inside it (--cache-dir)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(path, "it is an existing file, not a directory")
    if path.is_dir():
        _probe(path, path)
    if replaced or not path.is_dir():
        _probe(path, _nearest_dir(path, path.parent))
    return path


def _nearest_dir(path: Path, start: Path) -> Path:
    """The nearest existing ancestor of `start` ("." at worst), which must be a directory."""
    existing = next(p for p in (start, *start.parents) if p.exists())
    if not existing.is_dir():
        raise OutputPathError(path, f"{existing} is a file, not a directory")
    return existing


def _probe(path: Path, directory: Path) -> None:
    """OutputPathError unless a new file can be made in `directory`."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-check-", suffix=".tmp")
    except OSError as exc:
        raise OutputPathError(path, f"directory {directory} is not writable "
                                    f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
