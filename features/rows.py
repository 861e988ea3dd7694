"""Which configs of a graph become rows, and their targets.

Train: identical configs are merged (minimum runtime kept, count recorded; the real data repeats
configs with runtimes up to ~0.4% apart), then capped per graph keeping the fastest share and a
uniform sample of the rest, so training cost grows with graphs, not with 100k-config files.
Valid: layout, a uniform sample like the 1000-config test subsets; tile, every config, since
tile test files are whole and a sample could drop the best config. Test: every config, never
merged.
"""
from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np

from . import kernels
from .io import Graph, is_tile


class Rows(NamedTuple):
    config_idx: np.ndarray   # (r,) int64 positions in the file, ascending
    runtime: np.ndarray      # (r,) float64 target; runtime/normalizer for tile; NaN in test
    dup_count: np.ndarray    # (r,) int32 configs merged into the row (1 if none)


def target_runtime(g: Graph) -> np.ndarray:
    """The ranking target: tile runtime / normalizer (official), layout runtime; NaN in test."""
    if g.split == "test":
        return np.full(g.n_configs, np.nan)
    rt = g.config_runtime.astype(np.float64)
    return rt / g.config_runtime_normalizers if is_tile(g.collection) else rt


def config_bytes(g: Graph, start: int, stop: int) -> np.ndarray:
    """(stop-start, b) uint8 raw bytes of configs start:stop, the identity used for dedup."""
    part = g.config_feat[start:stop] if is_tile(g.collection) else g.node_config_feat[start:stop]
    return np.ascontiguousarray(part).reshape(stop - start, -1).view(np.uint8)


def dedup(g: Graph, target: np.ndarray, chunk: int) -> Rows:
    """Merge configs whose bytes hash equal (64-bit FNV; collisions ~1e-9 at 100k configs)."""
    c = g.n_configs
    hashes = np.concatenate([kernels.row_hash(config_bytes(g, s, min(c, s + chunk)))
                             for s in range(0, c, chunk)])
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    order = np.lexsort((target, inverse))            # by group, fastest first
    first = order[np.r_[True, inverse[order][1:] != inverse[order][:-1]]]
    first.sort()
    return Rows(first, target[first], counts[inverse[first]].astype(np.int32))


def graph_rng(seed: int, graph_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(graph_id.encode())])


def cap(rows: Rows, limit: int, fastest_fraction: float, rng: np.random.Generator) -> Rows:
    """Keep at most `limit` rows: the fastest share, then a uniform sample of the others."""
    n = rows.config_idx.size
    if limit <= 0 or n <= limit:
        return rows
    n_fast = int(limit * fastest_fraction)
    order = np.argsort(rows.runtime, kind="stable")
    rest = rng.choice(order[n_fast:], size=limit - n_fast, replace=False)
    keep = np.sort(np.concatenate([order[:n_fast], rest]))
    return Rows(*(a[keep] for a in rows))


def select_rows(g: Graph, *, max_train_configs: int, fastest_fraction: float,
                max_valid_configs: int, seed: int, chunk: int) -> Rows:
    target = target_runtime(g)
    everything = Rows(np.arange(g.n_configs), target, np.ones(g.n_configs, np.int32))
    rng = graph_rng(seed, g.graph_id)
    if g.split == "train":
        return cap(dedup(g, target, chunk), max_train_configs, fastest_fraction, rng)
    if g.split == "valid" and not is_tile(g.collection):
        return cap(everything, max_valid_configs, 0.0, rng)
    return everything
