"""A feature build on a Dask cluster: one task per input file, its unit sent back as bytes.

Workers need the input files at the path the client names (a copy or a read-only mount of the
data), but never the cache: each task builds its unit in a private temporary directory and
returns the unit file's bytes, and the client publishes them under the same name and with the
same atomic rename as a local build. So the cluster needs no shared disk, the cache keys and
layout are exactly a local build's, and a worker that dies mid-task leaves nothing in the
cache (the scheduler runs the task again elsewhere). Workers do not keep int8 copies of
node_config_feat: those belong to one machine's cache, which a worker does not write.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numba
from distributed import as_completed

from features.cache import store as cache
from features.cache import units as unit_store
from features.npz.graph import DataFormatError, collect_format_error


def unit_bytes(npz_file: Path, collection: str, split: str, cfg) -> bytes:
    """The task: build one file's unit where no one else looks, return its bytes."""
    # Dask already runs one task per worker thread; Numba's parallel kernels would multiply
    # that (the setting is per calling thread, so it touches no other task).
    numba.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tpugraphs-unit-") as tmp:
        return unit_store.build_unit(Path(npz_file), collection, split, cfg,
                                     Path(tmp)).read_bytes()


def build_on_cluster(client, todo: list[Path], task: tuple, bar) -> list[DataFormatError]:
    """Build the units of `todo` on the cluster; task = (collection, split, cfg, units dir).
    Returns the files' format errors (as a local build collects them); anything else raises,
    after cancelling the tasks still queued."""
    collection, split, cfg, units = task
    # No retries of a task that raised: a file that breaks the format breaks it every time. A
    # task whose worker died is rerun by the scheduler (up to its `allowed-failures`).
    futures = {client.submit(unit_bytes, str(f), collection, split, cfg, pure=False): f
               for f in todo}
    Path(units).mkdir(parents=True, exist_ok=True)
    errors = []
    try:
        for future in as_completed(futures):
            collect_format_error(future.exception(), errors)
            if future.exception() is None:
                data = future.result()
                cache.write_atomically(cache.unit_path(units, futures[future]),
                                       lambda tmp: tmp.write_bytes(data))
            future.release()
            bar.update()
    except BaseException:
        client.cancel(list(futures))
        raise
    return errors
