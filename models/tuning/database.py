"""The measurement database of one tune: OUT/state, owned by one tune at a time, resumed by replay.

    OUT/state/session.json      what the search was started with (a rerun must match it)
    OUT/state/measurements.bin  every measurement, appended and synced as it arrives
    OUT/state/lock              held (flock) by the tune running in OUT; names its process id

The state is keyed by what measured it (session.json: program, run, settings and the measure
command): runtimes of two commands never mix in one log. A start that fails before anything is
measured leaves no state behind, not even the lock.

Resuming is replay: the search is deterministic for a seed, a model and the runtimes it is
given, so a rerun asks for the same configs in the same order, and the log answers them until
it runs out; only then is the command run again. Nothing the command answered is measured twice;
a batch the command was still measuring when the run stopped is measured again (its runtimes
never arrived).

One tune at a time owns OUT: while it runs, another tune into the same OUT is refused before it
reads or writes anything there, since two appending to one log would leave a state neither can
resume. The lock is the kernel's (flock), so a tune that dies, however it dies, leaves no lock
behind.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from features.schema import GRAPH_KEYS, N_LAYOUT_CONFIG_FEAT as SLOTS

STATE, LOG, SESSION, LOCK = "state", "measurements.bin", "session.json", "lock"
RUNTIME_BYTES = 8   # float64 after each config's bytes in the log


class StateMismatchError(ValueError):
    """The state directory was started by another search (program, run, seed or settings)."""


class StateBusyError(ValueError):
    """Another tune is running in the --out directory."""


class MeasurementLog:
    """Fixed-size records (a config's int8 bytes, its runtime as float64), appended and synced
    one batch at a time: a crash leaves at most a partial record at the end, which reading
    drops."""

    def __init__(self, path: Path, n_nodes: int):
        self.path, self.n_nodes = Path(path), n_nodes
        self.record = n_nodes * SLOTS + RUNTIME_BYTES

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        data = self.path.read_bytes() if self.path.is_file() else b""
        whole = len(data) // self.record
        if whole * self.record != len(data):     # a write cut short: drop its bytes
            with open(self.path, "r+b") as f:
                f.truncate(whole * self.record)
        rows = np.frombuffer(data[:whole * self.record], np.uint8).reshape(whole, self.record)
        configs = rows[:, :-RUNTIME_BYTES].view(np.int8).reshape(whole, self.n_nodes, SLOTS)
        runtimes = rows[:, -RUNTIME_BYTES:].copy().view("<f8").reshape(whole)
        return configs.copy(), runtimes.astype(np.float64)

    def append(self, configs: np.ndarray, runtimes: np.ndarray) -> None:
        flat = np.ascontiguousarray(configs, np.int8).reshape(len(configs), -1)
        times = np.asarray(runtimes, "<f8").reshape(-1, 1)
        data = np.hstack([flat.view(np.uint8), times.view(np.uint8)]).tobytes()
        with open(self.path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


@dataclass
class Replaying:
    """The tuner's measure: the log's runtimes while the search asks for the configs the log
    holds, in order; then the command, each batch appended to the log as it arrives."""
    log: MeasurementLog
    measure: Callable[[np.ndarray], np.ndarray]
    budget: int
    progress: Callable[["Replaying"], None] = lambda r: None
    done: list = field(default_factory=list)      # runtimes so far, replayed or measured
    replayed: int = 0

    def __post_init__(self):
        self.old_configs, self.old_runtimes = self.log.read()

    def __call__(self, configs: np.ndarray) -> np.ndarray:
        configs = np.asarray(configs, np.int8)
        start = len(self.done)
        n_old = min(len(configs), max(len(self.old_runtimes) - start, 0))
        old = self.old_configs[start:start + n_old]
        if not np.array_equal(old, configs[:n_old]):
            raise StateMismatchError(
                f"{self.log.path}: the search asked for other configs than the state holds at "
                f"measurement {start + 1} (the run, the code or the program changed); tune "
                f"into another --out directory")
        out = list(self.old_runtimes[start:start + n_old])
        self.replayed += n_old
        if n_old < len(configs):
            fresh = self.measure(configs[n_old:])
            self.log.append(configs[n_old:], fresh)
            out += list(fresh)
        self.done += out
        self.progress(self)
        return np.array(out)


def program_digest(graph: dict[str, np.ndarray]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for key in GRAPH_KEYS:
        h.update(np.ascontiguousarray(graph[key]).tobytes())
    return h.hexdigest()


@contextmanager
def owned(out: Path) -> Iterator[Path]:
    """OUT/state, held by this tune for the block: an exclusive flock on OUT/state/lock, let go
    when the block ends or the process does. StateBusyError when another tune holds it. A state
    this block made is removed again when the block fails with nothing measured."""
    state = Path(out) / STATE
    made = not state.exists()
    state.mkdir(parents=True, exist_ok=True)
    with _locked(out, state):
        # Removed while this tune holds the lock: a tune refused as busy removes nothing
        try:
            yield state
        except BaseException:
            if made and not _measured(state):
                shutil.rmtree(state, ignore_errors=True)
            raise


def _measured(state: Path) -> bool:
    log = state / LOG
    return log.is_file() and log.stat().st_size > 0


@contextmanager
def _locked(out: Path, state: Path) -> Iterator[None]:
    fd = os.open(state / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 20, 0).decode(errors="replace").strip()
            raise StateBusyError(f"{out}: another tune is running in this directory"
                                 f"{f' (process {pid})' if pid else ''}; wait for it to end or "
                                 f"tune into another --out directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)     # lets the lock go


def check_free(out: Path) -> None:
    """StateBusyError now when another tune runs in OUT, so that a command refuses before it
    loads a model; tune_program takes OUT for the run itself. Makes nothing: no state, no tune
    running in it."""
    state = Path(out) / STATE
    if state.is_dir():
        with _locked(out, state):
            pass


def discard_state(state: Path) -> None:
    """An earlier search's state emptied for a new one (tune --restart): its session and
    measurements go, the lock this tune holds stays."""
    for path in state.iterdir():
        if path.name != LOCK:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


def open_state(out: Path, identity: dict, defaults: dict | None = None) -> Path:
    """OUT/state, made with `identity` or checked against the one it was made with. defaults:
    per dict-valued key of identity, the values of entries a state made before they existed
    ran with (a newer setting's default)."""
    state = Path(out) / STATE
    state.mkdir(parents=True, exist_ok=True)
    path = state / SESSION
    identity = json.loads(json.dumps(identity))     # tuples as lists, as read back
    if path.is_file():
        before = _flat(json.loads(path.read_text()), json.loads(json.dumps(defaults or {})))
        now = _flat(identity, {})
        changed = [k for k in now if before.get(k) != now[k]]
        if changed:
            k = changed[0]
            raise StateMismatchError(f"{state} was started with {k} = {before.get(k)!r}, not "
                                     f"{now[k]!r}; rerun as it was started, tune into "
                                     f"another --out directory, or --restart to discard it")
    else:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(identity, indent=1))
        tmp.replace(path)
    return state


def _flat(identity: dict, defaults: dict) -> dict:
    """{"settings.batch": 5, ...}: dict-valued entries spread out, completed by defaults."""
    out = {}
    for k, v in identity.items():
        if isinstance(v, dict):
            out.update({f"{k}.{name}": x for name, x in {**defaults.get(k, {}), **v}.items()})
        else:
            out[k] = v
    return out
