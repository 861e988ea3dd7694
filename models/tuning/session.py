"""`pipeline.py tune`: one program tuned with the user's measure command, in a directory a rerun
resumes from.

    OUT/state/session.json      what the search was started with (a rerun must match it)
    OUT/state/measurements.bin  every measurement, appended and synced as it arrives
    OUT/state/lock              held (flock) by the tune running in OUT; names its process id
    OUT/best.npy, best.json     the confirmed best config, and how it was made
    OUT/progress.png            best so far against measurements

Resuming is replay: the search is deterministic for a seed, a model and the runtimes it is
given, so a rerun asks for the same configs in the same order, and the log answers them until
it runs out; only then is the command run again. Nothing the command answered is measured twice;
a batch the command was still measuring when the run stopped is measured again (its runtimes
never arrived).

One tune at a time owns OUT: while it runs, another tune into the same OUT is refused before it
reads or writes anything there, since two appending to one log would leave a state neither can
resume. The lock is the kernel's (flock), so a tune that dies, however it dies, leaves no lock
behind.

The model is any object with CostModel.tune's signature: this module never imports models.api.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from features.schema import GRAPH_KEYS, N_LAYOUT_CONFIG_FEAT as SLOTS
from models.tuning.tuner import TuneResult, TuneSettings

STATE, LOG, SESSION, LOCK = "state", "measurements.bin", "session.json", "lock"
RUNTIME_BYTES = 8   # float64 after each config's bytes in the log


class MeasureCommandError(ValueError):
    """The measure command failed or printed something other than one runtime per config."""


class StateMismatchError(ValueError):
    """The state directory was started by another search (program, run, seed or settings)."""


class StateBusyError(ValueError):
    """Another tune is running in the --out directory."""


def load_program(path: Path) -> dict[str, np.ndarray]:
    """The graph arrays of an npz layout file, or of a program's HLO text (any other file)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such program file")
    if path.suffix == ".npz":
        with np.load(path) as z:
            missing = [k for k in GRAPH_KEYS if k not in z.files]
            if missing:
                raise ValueError(f"{path}: not a layout graph file (no {', '.join(missing)})")
            return {k: z[k] for k in GRAPH_KEYS}
    from features.hlo import read_hlo     # the HLO reader only when a program's text is given
    return read_hlo(path)


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


def run_command(command: str, configs: np.ndarray, workdir: Path) -> np.ndarray:
    """The runtimes the command prints for configs (k, nc, 18), given the path of a .npy of
    them as its last argument (run by the shell, as a command line is)."""
    path = Path(workdir) / "to_measure.npy"
    np.save(path, np.ascontiguousarray(configs, np.int8))
    line = f"{command} {shlex.quote(str(path.resolve()))}"
    try:
        done = subprocess.run(line, shell=True, capture_output=True, text=True)
    except OSError as exc:
        raise MeasureCommandError(f"measure command {command!r} did not start: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1:] or ["no message"]
        raise MeasureCommandError(f"measure command {command!r} exited with status "
                                  f"{done.returncode} ({said[0]})")
    return parse_runtimes(done.stdout, len(configs), command)


def parse_runtimes(stdout: str, k: int, command: str) -> np.ndarray:
    """k positive numbers, one a line (blank lines ignored), else MeasureCommandError."""
    lines = [s.strip() for s in stdout.splitlines() if s.strip()]
    if len(lines) != k:
        raise MeasureCommandError(f"measure command {command!r} printed {len(lines)} runtime "
                                  f"lines for {k} configs; it must print one per config")
    out = np.empty(k)
    for i, text in enumerate(lines):
        try:
            out[i] = float(text)
        except ValueError:
            raise MeasureCommandError(f"measure command {command!r}: line {i + 1} is not a "
                                      f"number: {text[:40]!r}") from None
        if not (np.isfinite(out[i]) and out[i] > 0):
            raise MeasureCommandError(f"measure command {command!r}: line {i + 1} is not a "
                                      f"positive runtime: {text[:40]!r}")
    return out


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
    when the block ends or the process does. StateBusyError when another tune holds it."""
    state = Path(out) / STATE
    state.mkdir(parents=True, exist_ok=True)
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
        yield state
    finally:
        os.close(fd)     # lets the lock go


def check_free(out: Path) -> None:
    """StateBusyError now when another tune runs in OUT, so that a command refuses before it
    loads a model; tune_program takes OUT for the run itself."""
    with owned(out):
        pass


def open_state(out: Path, identity: dict) -> Path:
    """OUT/state, made with `identity` or checked against the one it was made with."""
    state = Path(out) / STATE
    state.mkdir(parents=True, exist_ok=True)
    path = state / SESSION
    identity = json.loads(json.dumps(identity))     # tuples as lists, as read back
    if path.is_file():
        before = json.loads(path.read_text())
        changed = [k for k in identity if before.get(k) != identity[k]]
        if changed:
            k = changed[0]
            raise StateMismatchError(f"{state} was started with {k} = {before.get(k)!r}, not "
                                     f"{identity[k]!r}; rerun as it was started or tune into "
                                     f"another --out directory")
    else:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(identity, indent=1))
        tmp.replace(path)
    return state


@dataclass
class TuneJob:
    program: Path
    command: str
    budget: int
    out: Path
    seed: int = 0
    collection: str | None = None
    settings: TuneSettings = field(default_factory=TuneSettings)


def progress_printer(stream=None) -> Callable[[Replaying], None]:
    """One line per batch: measurements, how many replayed, the best so far against the
    default (its first measurement); to `stream`, else to sys.stderr as it is then."""
    def show(r: Replaying) -> None:
        out = stream or sys.stderr
        best = min(r.done)
        rel = f" = {best / r.done[0]:.3f}x the default's first measurement"
        replay = f" ({r.replayed} replayed from the state)" if r.replayed else ""
        end = "\r" if out.isatty() and len(r.done) < r.budget else "\n"
        out.write(f"tune: {len(r.done)}/{r.budget} measured{replay}, best so far "
                  f"{best:.6g}{rel}{end}")
        out.flush()
    return show


def tune_program(model: Any, job: TuneJob, run: str, log=print) -> TuneResult:
    """Tune the program with model (CostModel.tune) and the job's command; results in job.out,
    which the call owns while it runs (StateBusyError when another tune does). `run` names the
    model's run for the record and the state's identity."""
    with owned(job.out):
        return _tune_owned(model, job, run, log)


def _tune_owned(model: Any, job: TuneJob, run: str, log) -> TuneResult:
    graph = load_program(job.program)
    identity = {"program": program_digest(graph), "run": run, "seed": job.seed,
                "budget": job.budget, "collection": job.collection,
                "settings": asdict(job.settings)}
    state = open_state(job.out, identity)
    measure = Replaying(MeasurementLog(state / LOG, graph["node_config_ids"].size),
                        lambda c: run_command(job.command, c, state), job.budget,
                        progress_printer())
    if len(measure.old_runtimes):
        log(f"resuming from {state}: {len(measure.old_runtimes)} measurements to replay")
    try:
        result = model.tune(measure, budget=job.budget, **graph, collection=job.collection,
                            seed=job.seed, settings=job.settings)
    except MeasureCommandError as exc:     # what came before it is in the log already
        n = len(measure.done)
        raise MeasureCommandError(f"{exc}; measurements made before it: {n}, kept in "
                                  f"{state} (rerun to resume)") from None
    write_outputs(job, result, run, identity)
    return result


def write_outputs(job: TuneJob, result: TuneResult, run: str, identity: dict) -> None:
    out = Path(job.out)
    _atomic(out / "best.npy", lambda p: np.save(p, result.best))
    record = {"program": str(job.program), "best_runtime": result.best_runtime,
              "default_runtime": result.default_runtime, "speedup": result.speedup,
              "measurements": int(len(result.runtimes)), "rounds": result.rounds,
              "made_by": {"run": run, "seed": job.seed, "budget": job.budget,
                          "collection": job.collection, "measure": job.command,
                          "settings": identity["settings"]},
              "best": result.best.tolist()}
    _atomic(out / "best.json", lambda p: p.write_text(json.dumps(record)))
    _atomic(out / "progress.png", lambda p: p.write_bytes(progress_png(result)))


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    write(tmp)
    tmp.replace(path)


def progress_png(result: TuneResult) -> bytes:
    """Every measurement and the best so far, over the default's runtime, against the count."""
    from matplotlib.figure import Figure
    from models.reporting.figures import png
    fig = Figure(figsize=(5, 3.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(1, len(result.runtimes) + 1)
    base = result.runtimes[0]
    ax.plot(x, result.runtimes / base, ".", color="#999999", ms=3, label="measured")
    ax.plot(x, result.best_so_far() / base, color="#1f77b4", label="best so far")
    ax.axhline(result.best_runtime / base, color="#ff7f0e", ls="--", lw=1,
               label=f"confirmed best ({result.speedup:.3f}x faster)")
    ax.set_xlabel("measurements")
    ax.set_ylabel("runtime / the default's")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return png(fig)
