"""Feature building: TpuGraphs npz files -> one row per (graph, config), cached by key.

`build_entry` builds the missing per-file units of a collection/split (resuming an interrupted
build, rebuilding only files that changed) and assembles them into an entry; `load_or_build`
returns its FeatureSet.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import as_completed
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

# polars' allocator (jemalloc) keeps the pages it frees, so loading an entry part by part left
# about a second matrix resident: a 510 MB dev tile X loaded into a 285 MB process left
# 1,000 MB resident, and 664 MB with freed pages returned at once, for about 1 s more. Read
# when polars is first imported (so before the imports below); a user's own setting wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

from . import cache, entries, integrity, units as unit_store, workers as worker_pool
from .cache import reclaim_stale
from .data import DataSource, resolve_data, sample_source
from .io import DataFormatError, Graph, collect_format_error, list_npz
from .schema import COLLECTIONS, SPLITS
from .signature import feature_signature
from .entries import default_config_rows, read_meta, read_parts
from .feature_set import FeatureSet
from .table import FeatureConfig

__all__ = ["COLLECTIONS", "SPLITS", "DataFormatError", "DataSource", "FeatureConfig",
           "FeatureSet", "Graph", "build_entry", "default_config_rows", "feature_signature",
           "load_entry", "load_or_build", "read_meta", "reclaim_stale",
           "resolve_data", "sample_source", "uses_pool"]

# A spawned worker costs seconds (imports, loading Numba's cache); below this much compressed
# input the pool would cost more than it saves.
PARALLEL_MIN_BYTES = 64 * 2**20
MAX_LISTED_ERRORS = 10


def build_entry(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                cache_root: Path, *, force: bool = False, workers: int = 1,
                pack: bool = True, client=None) -> tuple[Path, bool]:
    """Ensure the cache entry exists; returns (entry dir, whether anything was computed).

    workers > 1 builds units in a process pool (features/workers.py); a dask.distributed
    `client` builds them on its cluster instead (features/dask_build.py). pack keeps an int8
    copy of each node_config_feat under <cache>/packed/ that later builds memory-map instead of
    decompressing again. Files that fail are reported together after the others are built.
    A cached entry is checked (features/integrity.py) and built again if damaged."""
    files = list_npz(npz_root, collection, split)
    signature = feature_signature(cfg)
    units = cache.unit_dir(cache_root, collection, split, signature)
    unit_files = [cache.unit_path(units, f) for f in files]
    key = cache.fingerprint(units=units.name, files=[u.name for u in unit_files])
    entry = cache.entry_dir(cache_root, collection, split, key)
    state = "absent" if force else _cached_state(entry, collection, split)
    if state == "intact":
        return entry, False
    todo = [f for f, u in zip(files, unit_files) if force or not u.exists()]
    packed = cache.packed_root(cache_root) if pack else None
    start = time.perf_counter()
    task = (collection, split, cfg, units)
    _build_units(todo, task, packed, workers, force, client)
    source = dict(zip(unit_files, files))
    with cache.atomic_dir(entry, f"the {collection} {split} feature entry",
                          None if force or state == "damaged" else cache.is_complete) as tmp:
        counts = unit_store.assemble(
            tmp, collection, unit_files, [f.stem for f in files], force=force,
            remake=lambda u: unit_store.build_unit(source[u], *task, packed_dir=packed,
                                                   force=True))
        meta = {"key": key, "signature": signature, "collection": collection, "split": split,
                **counts, "files_built_this_run": len(todo),
                "wall_seconds_this_run": round(time.perf_counter() - start, 3),
                "settings": asdict(cfg), "inputs": {"files": cache.file_stamps(files),
                                                    "units": str(units),
                                                    "versions": cache.versions()}}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return entry, True


def _cached_state(entry: Path, collection: str, split: str) -> str:
    """"intact", "damaged" (said in a notice: it is built again) or "absent"."""
    if not cache.is_complete(entry):
        return "absent"
    try:
        entries.check_entry(entry)
    except cache.DamagedCacheError as exc:
        integrity.notice(exc, f"building the {collection} {split} entry again")
        return "damaged"
    return "intact"


def _build_units(todo: list[Path], task: tuple, packed: Path | None, workers: int,
                 force: bool, client=None) -> None:
    """build_unit for every file of `todo`; task = (collection, split, cfg, units dir)."""
    collection, split = task[:2]
    errors = []
    bar = tqdm(total=len(todo), desc=f"{collection} {split}", unit="file", disable=None,
               leave=False)
    with bar:
        if client is not None and todo:
            from . import dask_build   # imports dask, which a run without a cluster never needs
            errors = dask_build.build_on_cluster(client, todo, task, bar)
        elif not uses_pool(len(todo), sum(f.stat().st_size for f in todo), workers):
            for f in todo:
                try:
                    unit_store.build_unit(f, *task, packed_dir=packed, force=force)
                except DataFormatError as exc:
                    errors.append(exc)
                bar.update()
        else:
            _build_in_pool(todo, task, packed, workers, force, errors, bar)
    if errors:
        listed = "\n  ".join(str(e) for e in errors[:MAX_LISTED_ERRORS])
        raise DataFormatError(
            f"{collection} {split}: {len(errors)} unusable file(s); fix and rerun, the rows of "
            f"every other file are cached:\n  {listed}")


def uses_pool(n_files: int, n_bytes: float, workers: int) -> bool:
    """Whether a build of n_files holding n_bytes of input starts worker processes."""
    return workers > 1 and n_files > 1 and n_bytes >= PARALLEL_MIN_BYTES


def _build_in_pool(todo, task, packed, workers, force, errors, bar) -> None:
    with worker_pool.process_pool(min(workers, len(todo))) as pool:
        jobs = [pool.submit(unit_store.build_unit, f, *task, packed_dir=packed, force=force)
                for f in todo]
        try:
            for job in as_completed(jobs):
                collect_format_error(job.exception(), errors)
                bar.update()
        except BaseException:
            for job in jobs:
                job.cancel()
            raise


def load_entry(entry: Path, columns: list[str] | None = None) -> FeatureSet:
    """The entry's rows with every feature column, or only `columns` (() gives the targets and
    graphs alone, for checks that need no features)."""
    meta = read_meta(entry)
    unknown = sorted(set(columns or ()) - set(meta["columns"]))
    if unknown:
        raise ValueError(f"{entry}: no feature columns {unknown}")
    return read_parts(entry, meta["collection"],
                      meta["columns"] if columns is None else list(columns), meta)


def load_or_build(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                  cache_root: Path, *, force: bool = False, workers: int = 1,
                  pack: bool = True, client=None) -> FeatureSet:
    entry, _ = build_entry(npz_root, collection, split, cfg, cache_root, force=force,
                           workers=workers, pack=pack, client=client)
    return load_entry(entry)
