"""`--scheduler`: turn an address (or "local") into a dask.distributed Client.

Dask is imported here, inside `connect`, and nowhere on the default path, so a run without
`--scheduler` neither needs nor loads it (the `dask` extra of pyproject.toml is optional).
"""
from __future__ import annotations

import os
from contextlib import contextmanager

LOCAL = "local"
CONNECT_TIMEOUT_S = 30


@contextmanager
def connect(address: str | None):
    """Yield a Client of the scheduler at `address`, of a LocalCluster started for the command
    ("local"), or None when `address` is None; what was started here is closed on exit."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ValueError(f"--scheduler needs dask: pip install -e \".[dask]\" ({exc})") from None
    if address != LOCAL:
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:   # unreachable, refused or timed out
            raise ValueError(f"cannot reach a Dask scheduler at {address!r}: {exc}") from None
        with client:
            yield client
        return
    # One single-threaded worker process per core: feature tasks hold the GIL in Numba
    # kernels, so threads would not run them side by side, and LightGBM sizes its threads
    # to each worker's (one), giving one thread per core overall.
    with LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client
