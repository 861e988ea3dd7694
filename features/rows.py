"""Which configs of a graph become rows, and their targets.

Train: capped per graph, keeping the fastest share and a uniform sample of the rest, so training
cost grows with graphs, not with 100k-config files; identical configs are merged (minimum
runtime over the file kept, count recorded; the real data repeats configs with runtimes up to
~0.4% apart). Tile merges every config, then caps. Layout first draws a pool of POOL times the
cap the same way, by runtime alone, so that a read knows which configs it must keep before it
inflates them (io.read_graph's `keep`) and never stores a 100,000-config file whole; the pool
is merged, then capped. Files of at most POOL times the cap are merged whole, as tile files.
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


def merge_duplicates(g: Graph, target: np.ndarray, picked: np.ndarray, chunk: int) -> Rows:
    """Of the picked configs (file positions), one row per distinct config: its fastest picked
    copy, with the minimum runtime and the count of its copies in the whole file. Configs are
    the same when their bytes hash equal (64-bit; collisions ~1e-9 at 100k configs)."""
    hashes = g.row_hashes if g.row_hashes is not None else np.concatenate(
        [kernels.row_hash(config_bytes(g, s, min(g.n_configs, s + chunk)))
         for s in range(0, g.n_configs, chunk)])
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    order = np.lexsort((target, inverse))            # by group, fastest first
    fastest = target[order[_group_starts(inverse[order])]]
    mine = picked[np.lexsort((target[picked], inverse[picked]))]
    first = np.sort(mine[_group_starts(inverse[mine])])
    return Rows(first, fastest[inverse[first]], counts[inverse[first]].astype(np.int32))


def _group_starts(groups: np.ndarray) -> np.ndarray:
    return np.r_[True, groups[1:] != groups[:-1]] if groups.size else np.zeros(0, bool)


# A pool of twice the cap still holds the cap's share of fastest distinct configs where a search
# revisits each fast config up to twice as often as the others
POOL = 2


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


def picked_configs(target: np.ndarray, collection: str, split: str, graph_id: str, *,
                   max_train_configs: int, fastest_fraction: float, max_valid_configs: int,
                   seed: int) -> np.ndarray:
    """File positions of the configs that can become rows, before merging (all for tile train,
    a pool for layout train): decided from the runtimes alone."""
    c = target.size
    everything = Rows(np.arange(c), target, np.ones(c, np.int32))
    rng = graph_rng(seed, graph_id)
    if split == "train" and not is_tile(collection):
        return cap(everything, POOL * max_train_configs, fastest_fraction, rng).config_idx
    if split == "valid" and not is_tile(collection):
        return cap(everything, max_valid_configs, 0.0, rng).config_idx
    return everything.config_idx


def select_rows(g: Graph, *, max_train_configs: int, fastest_fraction: float,
                max_valid_configs: int, seed: int, chunk: int) -> Rows:
    target = target_runtime(g)
    picked = picked_configs(target, g.collection, g.split, g.graph_id,
                            max_train_configs=max_train_configs, fastest_fraction=fastest_fraction,
                            max_valid_configs=max_valid_configs, seed=seed)
    if g.split != "train":
        return Rows(picked, target[picked], np.ones(picked.size, np.int32))
    return cap(merge_duplicates(g, target, picked, chunk), max_train_configs, fastest_fraction,
               graph_rng(seed, g.graph_id))
