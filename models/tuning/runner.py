"""The runner: the user's measure command, run on a batch of configs.

The protocol (`pipeline.py tune --measure COMMAND`): the command line, run by the shell, gets the
path of a .npy of (k, nc, 18) int8 configs appended as its last argument and prints k runtimes on
stdout, one a line, lower = faster (models/tuning/toy_measure.py is a toy that speaks it).
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np


class MeasureCommandError(ValueError):
    """The measure command failed or printed something other than one runtime per config."""


def echo_once(say: Callable[[str], None]) -> Callable[[str], None]:
    """say(line) for each distinct line the first time it comes: a measure command's notice
    (toy_measure.py's, a warning) is shown, not repeated every batch."""
    seen = set()

    def echo(line: str) -> None:
        if line.strip() and line not in seen:
            seen.add(line)
            say(line)
    return echo


def run_command(command: str, configs: np.ndarray, workdir: Path,
                echo: Callable[[str], None] = lambda line: None) -> np.ndarray:
    """The runtimes the command prints for configs (k, nc, 18), given the path of a .npy of
    them as its last argument (run by the shell, as a command line is); each line it writes
    on stderr goes to echo."""
    path = Path(workdir) / "to_measure.npy"
    np.save(path, np.ascontiguousarray(configs, np.int8))
    line = f"{command} {shlex.quote(str(path.resolve()))}"
    try:
        done = subprocess.run(line, shell=True, capture_output=True, text=True)
    except OSError as exc:
        raise MeasureCommandError(f"measure command {command!r} did not start: {exc}") from None
    if done.returncode != 0:     # its last line said in the error's one line
        said = done.stderr.strip().splitlines()[-1:] or ["no message"]
        raise MeasureCommandError(f"measure command {command!r} exited with status "
                                  f"{done.returncode} ({said[0]})")
    for line in done.stderr.splitlines():
        echo(line)
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
