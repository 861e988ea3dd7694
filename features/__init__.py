"""Feature building: TpuGraphs npz files -> one row per (graph, config), cached by key.

`build_entry` computes (resuming an interrupted build); `load_or_build` returns the cached
FeatureSet when inputs, settings and code are unchanged.
"""
from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

import numba
import numpy as np
import polars as pl
from tqdm import tqdm

from . import cache
from .data import DataSource, resolve_data
from .io import (COLLECTIONS, SPLITS, DataFormatError, Graph, collection_dir, is_tile, list_npz,
                 read_graph)
from .rows import Rows
from .table import FeatureConfig, FeatureSet, graph_table, read_parts, write_part

__all__ = ["COLLECTIONS", "SPLITS", "DataFormatError", "DataSource", "FeatureConfig",
           "FeatureSet", "Graph", "build_entry", "default_config_rows", "feature_signature",
           "load_entry", "load_or_build", "packed_root", "read_meta", "resolve_data"]

# Tile graphs are tiny, so many share a part; layout files are big, so each is its own part.
FILES_PER_PART = {"tile": 256, "layout": 1}
# A spawned worker costs seconds (imports, loading Numba's cache); below this much compressed
# input the pool would cost more than it saves.
PARALLEL_MIN_BYTES = 64 * 2**20


def _parts(files: list[Path], collection: str) -> list[list[Path]]:
    step = FILES_PER_PART["tile" if is_tile(collection) else "layout"]
    return [files[i:i + step] for i in range(0, len(files), step)]


def build_entry(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                cache_root: Path, *, force: bool = False, workers: int = 1,
                pack: bool = True) -> tuple[Path, bool]:
    """Ensure the cache entry exists; returns (entry dir, whether anything was computed).

    workers > 1 builds parts in a `spawn` process pool (forking after Numba/OpenMP threads
    have started can hang). pack keeps an int8 copy of each node_config_feat under
    <cache>/packed/ that later builds memory-map instead of decompressing again."""
    files = list_npz(npz_root, collection, split)
    inputs = cache.key_inputs(collection, split, files, cfg)
    key = cache.fingerprint(**inputs)
    entry = cache.entry_dir(cache_root, collection, split, key)
    if cache.is_complete(entry) and not force:
        return entry, False
    staging = cache.staging_dir(entry, fresh=force)
    todo = [(staging / f"part-{i:05d}.parquet", group)
            for i, group in enumerate(_parts(files, collection)) if not cache.part_done(staging, i)]
    packed = packed_root(cache_root) if pack else None
    start = time.perf_counter()
    _run_parts(todo, collection, split, cfg, packed, workers)
    infos = [json.loads(p.read_text()) for p in sorted(staging.glob("part-*.json"))]
    meta = {"key": key, "signature": feature_signature(cfg), "collection": collection,
            "split": split, "n_graphs": sum(len(i["graph_ids"]) for i in infos),
            "n_rows": sum(sum(i["sizes"]) for i in infos), "columns": _columns(staging),
            "graphs_built_this_run": sum(len(group) for _, group in todo),
            "wall_seconds_this_run": round(time.perf_counter() - start, 3),
            "settings": asdict(cfg), "inputs": inputs}
    return cache.publish(staging, entry, meta), True


def packed_root(cache_root: Path) -> Path:
    """Where the int8 copies of node_config_feat live (see io.packed_path)."""
    return Path(cache_root) / "packed"


def _run_parts(todo, collection: str, split: str, cfg: FeatureConfig, packed: Path | None,
               workers: int) -> None:
    bar = tqdm(total=sum(len(g) for _, g in todo), desc=f"{collection} {split}", unit="file",
               disable=None, leave=False)
    with bar:
        in_bytes = sum(f.stat().st_size for _, group in todo for f in group)
        if workers <= 1 or len(todo) <= 1 or in_bytes < PARALLEL_MIN_BYTES:
            for path, group in todo:
                bar.update(_build_part(path, group, collection, split, cfg, packed))
            return
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(todo)), mp_context=ctx,
                                 initializer=_one_numba_thread) as pool:
            jobs = [pool.submit(_build_part, path, group, collection, split, cfg, packed)
                    for path, group in todo]
            for job in as_completed(jobs):
                bar.update(job.result())


def _one_numba_thread() -> None:
    """Worker processes already use the cores; parallel kernels inside them would oversubscribe."""
    numba.set_num_threads(1)


def _build_part(path: Path, files: list[Path], collection: str, split: str,
                cfg: FeatureConfig, packed: Path | None = None) -> int:
    tables, columns = [], []
    for f in files:
        g = read_graph(f, collection, split, chunk_configs=cfg.chunk_configs, packed_dir=packed)
        X, columns, rows = graph_table(g, cfg)
        tables.append((f.stem, X, rows))
    write_part(path, tables, columns)
    return len(files)


def _columns(staging: Path) -> list[str]:
    parts = sorted(staging.glob("part-*.parquet"))
    if not parts:
        return []
    return [n for n in pl.read_parquet_schema(parts[0]) if n not in Rows._fields]


def read_meta(entry: Path) -> dict:
    return json.loads((Path(entry) / "meta.json").read_text())


def feature_signature(cfg: FeatureConfig) -> str:
    """Hash of the feature code and settings: models trained on one signature only fit it."""
    return cache.fingerprint(schema=cache.SCHEMA, code=cache.source_digest(),
                             settings=asdict(cfg))


def load_entry(entry: Path) -> FeatureSet:
    meta = read_meta(entry)
    return read_parts(entry, meta["collection"], meta["columns"], meta)


def load_or_build(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                  cache_root: Path, *, force: bool = False, workers: int = 1) -> FeatureSet:
    entry, _ = build_entry(npz_root, collection, split, cfg, cache_root, force=force,
                           workers=workers)
    return load_entry(entry)


def default_config_rows(npz_root: Path, data: FeatureSet, split: str, cache_root: Path,
                        ) -> np.ndarray:
    """(n_rows,) bool: the row's config leaves every layout slot at -1, the compiler's own
    choice. Always False for tile, whose configs carry no such marker."""
    out = np.zeros(data.X.shape[0], bool)
    if is_tile(data.collection):
        return out
    for g, graph_id in enumerate(data.graph_ids):
        path = Path(npz_root) / collection_dir(data.collection) / split / f"{graph_id}.npz"
        graph = read_graph(path, data.collection, split, packed_dir=packed_root(cache_root))
        rows = slice(data.ptr[g], data.ptr[g + 1])
        out[rows] = (np.asarray(graph.node_config_feat[data.config_idx[rows]]) < 0).all(axis=(1, 2))
    return out
