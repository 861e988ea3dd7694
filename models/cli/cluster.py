"""`--scheduler`: turn an address (or "local") into a dask.distributed Client.

Dask is imported here, inside `connect`, and nowhere on the default path, so a run without
`--scheduler` neither needs nor loads it (the `dask` extra of pyproject.toml is optional).
"""
from __future__ import annotations

import asyncio
import os
from contextlib import contextmanager

LOCAL = "local"
# Default of --scheduler-timeout: a scheduler on the network answers in well under a second,
# so a mistyped or stopped one is reported after this long (it used to take 30 s).
CONNECT_TIMEOUT_S = 10.0


@contextmanager
def connect(address: str | None, timeout: float = CONNECT_TIMEOUT_S, log=print):
    """Yield a Client of the scheduler at `address`, of a LocalCluster started for the command
    ("local"), or None when `address` is None; what was started here is closed on exit.
    `timeout`: seconds the scheduler at `address` has to answer. Logs one line naming the
    cluster, so a cluster run never reads like a local one."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ValueError(f"--scheduler needs dask: pip install -e \".[dask]\" ({exc})") from None
    if address != LOCAL:
        _probe(address, timeout)
        try:
            client = Client(address, timeout=timeout)
        except OSError as exc:   # went away between the probe and now
            raise ValueError(_unreachable(address, timeout, exc)) from None
        with client:
            log(describe(client, "at"))
            yield client
        return
    # One single-threaded worker process per core: feature tasks hold the GIL in Numba
    # kernels, so threads would not run them side by side, and LightGBM sizes its threads
    # to each worker's (one), giving one thread per core overall. No dashboard; the scheduler's
    # HTTP endpoint on any free port, not 8787 (taken by another cluster, it printed a warning).
    with LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                      dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"}
                      ) as cluster, Client(cluster) as client:
        log(describe(client, "started for this command (--scheduler local) at"))
        yield client


def describe(client, where: str) -> str:
    """One line: the scheduler's address and the workers (and threads) it has now."""
    workers = client.scheduler_info()["workers"]
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    line = (f"running on a Dask cluster {where} {client.scheduler.address}: {len(workers)} "
            f"workers, {threads} threads")
    return line + ("; none yet, tasks wait until a worker connects" if not workers else "")


def _probe(address: str, timeout: float) -> None:
    """Ask `address` for a scheduler's identity, the whole exchange within `timeout`: Client's
    own timeout bounds the connection only, and a peer that accepts it and never answers (a web
    server on that port) kept Client waiting for minutes."""
    from distributed.comm import connect as open_comm

    async def identity():
        comm = await open_comm(address, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            await comm.close()

    try:
        answer = asyncio.run(asyncio.wait_for(identity(), timeout))
    except (OSError, asyncio.TimeoutError) as exc:
        raise ValueError(_unreachable(address, timeout, exc)) from None
    except Exception as exc:   # e.g. a bad address, or bytes that are no Dask message
        raise ValueError(f"--scheduler {address}: no Dask scheduler answered there "
                         f"({type(exc).__name__}: {str(exc)[:200]}); is this the address of "
                         f"a Dask scheduler?") from None
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        raise ValueError(f"--scheduler {address}: the process there is not a Dask scheduler "
                         f"(it answered {str(answer)[:80]!r})")


def _unreachable(address: str, timeout: float, exc: Exception) -> str:
    reason = f": {exc}." if str(exc) else "."
    return (f"--scheduler {address}: no Dask scheduler answered within {timeout:g} s "
            f"(--scheduler-timeout){reason} Is it running, and is the address right?")
