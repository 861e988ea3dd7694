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

from features.npz.read_kernels import row_hash
from features.npz.graph import Graph
from features.schema import is_tile


class Rows(NamedTuple):
    config_idx: np.ndarray   # (r,) int64 positions in the file, ascending
    runtime: np.ndarray      # (r,) float64 target; runtime/normalizer for tile; NaN in test
    dup_count: np.ndarray    # (r,) int32 configs merged into the row (1 if none)
    is_default: np.ndarray   # (r,) bool every layout slot -1, the compiler's own choice (tile:
                             # False, its configs carry no such marker); never a feature column


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
        [row_hash(config_bytes(g, s, min(g.n_configs, s + chunk)))
         for s in range(0, g.n_configs, chunk)])
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    order = np.lexsort((target, inverse))            # by group, fastest first
    fastest = target[order[_group_starts(inverse[order])]]
    mine = picked[np.lexsort((target[picked], inverse[picked]))]
    first = np.sort(mine[_group_starts(inverse[mine])])
    return Rows(first, fastest[inverse[first]], counts[inverse[first]].astype(np.int32),
                default_configs(g, first, chunk))


def default_configs(g: Graph, positions: np.ndarray, chunk: int) -> np.ndarray:
    """Rows.is_default of the configs at these file positions, `chunk` configs at a time."""
    out = np.zeros(positions.size, bool)
    if is_tile(g.collection):
        return out
    held = g.held(positions)
    for lo in range(0, held.size, chunk):
        part = np.asarray(g.node_config_feat[held[lo:lo + chunk]])
        out[lo:lo + part.shape[0]] = (part < 0).all(axis=(1, 2))
    return out


def _group_starts(groups: np.ndarray) -> np.ndarray:
    return np.r_[True, groups[1:] != groups[:-1]] if groups.size else np.zeros(0, bool)


# A pool of twice the cap still holds the cap's share of fastest distinct configs where a search
# revisits each fast config up to twice as often as the others
POOL = 2


def graph_rng(seed: int, graph_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(graph_id.encode())])


def cap(rows: Rows, limit: int, fastest_fraction: float, rng: np.random.Generator) -> Rows:
    """Keep at most `limit` rows: the fastest share, then a uniform sample of the others."""
    if limit <= 0 or rows.runtime.size <= limit:
        return rows
    keep = _capped(rows.runtime, limit, fastest_fraction, rng)
    return Rows(*(a[keep] for a in rows))


def _capped(runtime: np.ndarray, limit: int, fastest_fraction: float,
            rng: np.random.Generator) -> np.ndarray:
    """Sorted positions of the `limit` rows cap keeps (runtime.size > limit > 0)."""
    n_fast = int(limit * fastest_fraction)
    order = np.argsort(runtime, kind="stable")
    rest = rng.choice(order[n_fast:], size=limit - n_fast, replace=False)
    return np.sort(np.concatenate([order[:n_fast], rest]))


def picked_configs(target: np.ndarray, collection: str, split: str, graph_id: str, *,
                   max_train_configs: int, fastest_fraction: float, max_valid_configs: int,
                   seed: int) -> np.ndarray:
    """File positions of the configs that can become rows, before merging (all for tile train,
    a pool for layout train): decided from the runtimes alone."""
    limit = {"train": POOL * max_train_configs, "valid": max_valid_configs}.get(split, 0)
    if is_tile(collection) or limit <= 0 or target.size <= limit:
        return np.arange(target.size)
    share = fastest_fraction if split == "train" else 0.0
    return _capped(target, limit, share, graph_rng(seed, graph_id))


def select_rows(g: Graph, *, max_train_configs: int, fastest_fraction: float,
                max_valid_configs: int, seed: int, chunk: int) -> Rows:
    target = target_runtime(g)
    picked = picked_configs(target, g.collection, g.split, g.graph_id,
                            max_train_configs=max_train_configs, fastest_fraction=fastest_fraction,
                            max_valid_configs=max_valid_configs, seed=seed)
    if g.split != "train":
        return Rows(picked, target[picked], np.ones(picked.size, np.int32),
                    default_configs(g, picked, chunk))
    return cap(merge_duplicates(g, target, picked, chunk), max_train_configs, fastest_fraction,
               graph_rng(seed, g.graph_id))
