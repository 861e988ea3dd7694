"""Build a collection/split's feature entry: the missing per-file units (in a process pool or on a
Dask cluster), assembled into an entry; `load_or_build` returns its FeatureSet.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

from tqdm import tqdm

from features.cache import store as cache
from features.cache import entries
from features.cache.compile_ahead import side_by_side
from features.cache import integrity
from features.cache import units as unit_store
from features.cache import workers as worker_pool
from features.npz.find import list_npz
from features.npz.graph import DataFormatError, collect_format_error
from features.cache.signature import feature_signature
from features.cache.entries import read_meta, read_part_sets, read_parts
from features.rows.compiled import compile_notice
from features.rows.feature_set import FeatureSet
from features.rows.table import FeatureConfig
from features.schema import is_tile

# A spawned worker costs seconds (imports, loading Numba's cache); below this much compressed
# input the pool would cost more than it saves.
PARALLEL_MIN_BYTES = 64 * 2**20


class BadFilesError(DataFormatError):
    """Files that break the format, by (collection, split), raised once every file asked for was
    tried: fixing them one rerun at a time would take as many reruns as there are bad files."""

    def __init__(self, bad: dict[tuple[str, str], list[DataFormatError]]):
        self.bad = bad
        super().__init__(bad)

    def __str__(self) -> str:
        n = sum(map(len, self.bad.values()))
        lines = [f"{n} unusable file(s) in {len({c for c, _ in self.bad})} collection(s); fix "
                 f"them and rerun, the rows of every other file are cached:"]
        for (collection, split), errors in self.bad.items():   # collection by collection
            lines.append(f"{collection} {split}: {len(errors)} unusable file(s)")
            lines += [f"  {e}" for e in errors]
        return "\n".join(lines)


def build_entries(npz_root: Path, collections, splits, cfg: FeatureConfig | dict,
                  cache_root: Path, *, log=None, **options) -> dict[tuple[str, str], Path]:
    """build_entry (same options) for every collection and split, a split with bad files not
    stopping the others; cfg: one for all, or one per collection. log(collection, split,
    entry, built) after each entry. Raises one BadFilesError listing every bad file, grouped
    by collection, at the end."""
    entries, bad = {}, {}
    for collection in collections:
        settings = cfg[collection] if isinstance(cfg, dict) else cfg
        for split in splits:
            try:
                entry, built = build_entry(npz_root, collection, split, settings, cache_root,
                                           **options)
            except BadFilesError as exc:
                bad.update(exc.bad)
                continue
            entries[collection, split] = entry
            if log is not None:
                log(collection, split, entry, built)
    if bad:
        raise BadFilesError(bad)
    return entries


def build_entry(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                cache_root: Path, *, force: bool = False, workers: int = 1,
                pack: bool = True, client=None) -> tuple[Path, bool]:
    """Ensure the cache entry exists; returns (entry dir, whether anything was computed).

    workers > 1 builds units in a process pool (features/cache/workers.py), and on a fresh
    install first compiles the slow layout kernels side by side (compile_ahead.py); a
    dask.distributed `client` builds them on its cluster instead (features/cache/dask_build.py).
    pack keeps an int8 copy of each node_config_feat under <cache>/packed/ that later builds
    memory-map instead of decompressing again. Files that fail are reported together after the others are built.
    A cached entry is checked (features/cache/integrity.py) and built again if damaged."""
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
    start = time.perf_counter()     # the side-by-side compile is part of the entry's time
    if todo and client is None and not is_tile(collection):   # a cluster compiles its own
        compile_notice(collection, cfg.feature_set)
        if workers > 1:
            side_by_side(todo, collection, split, cfg.feature_set)
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
            from features.cache import dask_build
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
        raise BadFilesError({(collection, split): errors})


def uses_pool(n_files: int, n_bytes: float, workers: int) -> bool:
    """Whether a build of n_files holding n_bytes of input starts worker processes."""
    return workers > 1 and n_files > 1 and n_bytes >= PARALLEL_MIN_BYTES


def _build_in_pool(todo, task, packed, workers, force, errors, bar) -> None:
    with worker_pool.process_pool(min(workers, len(todo))) as pool:
        try:
            jobs = [pool.submit(unit_store.build_unit, f, *task, packed_dir=packed, force=force)
                    for f in todo]
            for job in as_completed(jobs):
                collect_format_error(job.exception(), errors)
                bar.update()
        except BaseException:
            pool.stop()    # Ctrl-C or an error: no task in flight is worth waiting for
            raise


def entry_columns(entry: Path, columns: list[str] | None) -> tuple[dict, list[str]]:
    """(the entry's meta, the columns to read: every feature column, or `columns`)."""
    meta = read_meta(entry)
    unknown = sorted(set(columns or ()) - set(meta["columns"]))
    if unknown:
        raise ValueError(f"{entry}: no feature columns {unknown}")
    return meta, meta["columns"] if columns is None else list(columns)


def split_parts(split: FeatureSet | Path, columns: list[str] | None = None
                ) -> Iterator[FeatureSet]:
    """A split's rows a part at a time: an entry's parquet parts (read_part_sets), a FeatureSet
    in memory as its one part."""
    if isinstance(split, FeatureSet):
        yield split
        return
    meta, names = entry_columns(split, columns)
    yield from read_part_sets(split, meta["collection"], names, meta)


def load_entry(entry: Path, columns: list[str] | None = None) -> FeatureSet:
    """The entry's rows with every feature column, or only `columns` (() gives the targets and
    graphs alone, for checks that need no features)."""
    meta, names = entry_columns(entry, columns)
    return read_parts(entry, meta["collection"], names, meta)


def load_or_build(npz_root: Path, collection: str, split: str, cfg: FeatureConfig,
                  cache_root: Path, *, force: bool = False, workers: int = 1,
                  pack: bool = True, client=None) -> FeatureSet:
    entry, _ = build_entry(npz_root, collection, split, cfg, cache_root, force=force,
                           workers=workers, pack=pack, client=client)
    return load_entry(entry)
