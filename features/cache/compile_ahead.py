"""The two layout kernels that take minutes to compile (features/rows/compiled.py), compiled side
by side, one child process each, before a build that would compile them one after the other."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from features.cache.workers import exit_with_parent, sigint_blocked
from features.npz.read import read_graph
from features.rows import row_kernels as K
from features.rows.compiled import compiled, slow_kernels
from features.rows.node_rows import graph_node_rows
from features.rows.table import FeatureConfig, graph_parts

# A child's program; its arguments: run_kernel's, then this process's id (it dies with it)
CHILD = ("import sys; from features.cache import compile_ahead as c; "
         "c.exit_with_parent(int(sys.argv[5])); c.run_kernel(*sys.argv[1:5])")
_PROJECT = Path(__file__).resolve().parents[2]
# Polled: once polars is imported, SIGINT no longer cuts a blocking wait for a child short
# (a sleep it does: docs/records/README.md, "Users' first build")
POLL_S = 0.2
DEADLINE_S = 15 * 60    # a child still compiling then is stuck: the build compiles instead


def side_by_side(files: list[Path], collection: str, split: str,
                 feature_set: str = "full") -> None:
    """When the collection's rows run two slow kernels and neither is compiled: compile them at
    once, a child each on the smallest of `files`, and return when both are done; the build
    then loads them from Numba's cache. Best effort: what a child leaves uncompiled the build
    compiles, as without it. The children ignore the terminal's Ctrl-C, die with this process
    and never outlive this call."""
    kernels = slow_kernels(collection, feature_set)
    if len(kernels) < 2 or not files or any(compiled(k) for k in kernels):
        return
    smallest = str(min(files, key=lambda f: f.stat().st_size))
    children: list[subprocess.Popen] = []
    try:
        with sigint_blocked():      # inherited: the children leave Ctrl-C to this process
            for kernel in kernels:
                children.append(subprocess.Popen(
                    [sys.executable, "-c", CHILD, kernel.__name__, smallest, collection, split,
                     str(os.getpid())], cwd=_PROJECT, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + DEADLINE_S
        while any(c.poll() is None for c in children) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        _say_unfinished(kernels, children)
    except OSError:
        return      # no child process to be had: the build compiles them itself
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def _say_unfinished(kernels: tuple, children: list[subprocess.Popen]) -> None:
    """A line on stderr for each child that failed or ran past the deadline: the build
    compiles its kernel itself now, which is why it takes longer than the notice said."""
    for kernel, child in zip(kernels, children):
        code = child.poll()
        if code != 0:
            why = "ran past its deadline" if code is None else f"failed (exit code {code})"
            print(f"notice: compiling {kernel.__name__} in a side process {why}; the build "
                  f"compiles it itself", file=sys.stderr, flush=True)


def run_kernel(name: str, path: str, collection: str, split: str) -> None:
    """What a build runs the kernel `name` in (config rows, or node rows), on the file's first
    two configs."""
    g = read_graph(Path(path), collection, split, max_configs=2)
    if name == K.layout_config_features.__name__:
        graph_parts(g, FeatureConfig())
    else:
        graph_node_rows(g, np.arange(g.node_config_feat.shape[0]), 0)
