"""Feature building: TpuGraphs npz files -> one row per (graph, config), cached by key.

`build_entry` computes (resuming an interrupted build); `load_or_build` returns the cached
FeatureSet when inputs, settings and code are unchanged.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import polars as pl

from . import cache
from .data import DataSource, resolve_data
from .io import COLLECTIONS, SPLITS, DataFormatError, Graph, is_tile, list_npz, read_graph
from .rows import Rows
from .table import FeatureConfig, FeatureSet, graph_table, read_parts, write_part

__all__ = ["COLLECTIONS", "SPLITS", "DataFormatError", "DataSource", "FeatureConfig",
           "FeatureSet", "Graph", "build_entry", "feature_signature", "load_entry",
           "load_or_build", "read_meta", "resolve_data"]

# Tile graphs are tiny, so many share a part; layout files are big, so each is its own part.
FILES_PER_PART = {"tile": 256, "layout": 1}


def _parts(files: list[Path], collection: str) -> list[list[Path]]:
    step = FILES_PER_PART["tile" if is_tile(collection) else "layout"]
    return [files[i:i + step] for i in range(0, len(files), step)]


def build_entry(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                cache_root: Path, *, force: bool = False) -> tuple[Path, bool]:
    """Ensure the cache entry exists; returns (entry dir, whether anything was computed)."""
    files = list_npz(npz_root, collection, split)
    inputs = cache.key_inputs(collection, split, files, cfg)
    key = cache.fingerprint(**inputs)
    entry = cache.entry_dir(cache_root, collection, split, key)
    if cache.is_complete(entry) and not force:
        return entry, False
    staging = cache.staging_dir(entry, fresh=force)
    start, built = time.perf_counter(), 0
    for index, group in enumerate(_parts(files, collection)):
        if not cache.part_done(staging, index):
            built += _build_part(staging / f"part-{index:05d}.parquet", group, collection,
                                 split, cfg)
    infos = [json.loads(p.read_text()) for p in sorted(staging.glob("part-*.json"))]
    meta = {"key": key, "signature": feature_signature(cfg), "collection": collection,
            "split": split, "n_graphs": sum(len(i["graph_ids"]) for i in infos),
            "n_rows": sum(sum(i["sizes"]) for i in infos), "columns": _columns(staging),
            "graphs_built_this_run": built,
            "wall_seconds_this_run": round(time.perf_counter() - start, 3),
            "settings": asdict(cfg), "inputs": inputs}
    return cache.publish(staging, entry, meta), True


def _build_part(path: Path, files: list[Path], collection: str, split: str,
                cfg: FeatureConfig) -> int:
    tables, columns = [], []
    for f in files:
        g = read_graph(f, collection, split, chunk_configs=cfg.chunk_configs)
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
                  cache_root: Path, *, force: bool = False) -> FeatureSet:
    entry, _ = build_entry(npz_root, collection, split, cfg, cache_root, force=force)
    return load_entry(entry)
