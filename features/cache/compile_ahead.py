"""The two layout kernels that take minutes to compile (features/rows/compiled.py), compiled side
by side, one child process each, before a build that would compile them one after the other."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from features.cache.workers import sigint_blocked
from features.npz.read import read_graph
from features.rows.compiled import compiled, slow_kernels
from features.rows.node_rows import NODE_ROW_COLLECTIONS, graph_node_rows
from features.rows.table import FeatureConfig, graph_parts

KINDS = ("configs", "nodes")     # the config-row kernel, the node-row kernel
_CHILD = "import sys; from features.cache.compile_ahead import run_kernel; run_kernel(*sys.argv[1:])"
_PROJECT = Path(__file__).resolve().parents[2]
# Polled: once polars is imported, Ctrl-C no longer cuts a blocking wait for a child short
POLL_S = 0.2


def side_by_side(files: list[Path], collection: str, split: str) -> None:
    """When neither slow kernel is compiled and the collection runs both: compile them at once,
    a child each on the smallest of `files`, and return when both are done; the build then
    loads them from Numba's cache. Best effort: a child that fails leaves its kernel to the
    build. The children ignore the terminal's Ctrl-C, and this call kills them on its way out."""
    if collection not in NODE_ROW_COLLECTIONS or not files:
        return
    if any(compiled(kernel) for kernel in slow_kernels(collection)):
        return
    smallest = str(min(files, key=lambda f: f.stat().st_size))
    with sigint_blocked():     # the mask is inherited: the children leave Ctrl-C to this process
        children = [subprocess.Popen([sys.executable, "-c", _CHILD, kind, smallest, collection,
                                      split], cwd=_PROJECT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    for kind in KINDS]
    try:
        while any(child.poll() is None for child in children):
            time.sleep(POLL_S)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def run_kernel(kind: str, path: str, collection: str, split: str) -> None:
    """In a child: one of KINDS's kernels on the file's first two configs."""
    g = read_graph(Path(path), collection, split, max_configs=2)
    if kind == "configs":
        graph_parts(g, FeatureConfig())
    else:
        graph_node_rows(g, np.arange(g.node_config_feat.shape[0]), 0)
