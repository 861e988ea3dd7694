"""Worker processes of a feature build: spawned, one Numba thread each, gone when the parent is.

`spawn`, because forking after Numba/OpenMP threads have started can hang. A worker whose parent
was killed (kill -9 skips every cleanup) would otherwise wait forever on its task queue holding
hundreds of MB, so each worker arranges to die with its parent. A terminal's Ctrl-C reaches the
whole process group: workers start with SIGINT blocked, so the parent alone answers it (it stops
them, `WorkerPool.stop`) and no worker prints a traceback.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

import numba

PR_SET_PDEATHSIG = 1      # <linux/prctl.h>
WATCH_INTERVAL_S = 1.0    # how often a worker off Linux checks that its parent is alive


class WorkerPool(ProcessPoolExecutor):
    """A process pool whose workers ignore the terminal's Ctrl-C, and that stops at once."""

    def submit(self, *args, **kwargs):
        # Workers are started by submit; a blocked signal mask is inherited through exec.
        with sigint_blocked():
            return super().submit(*args, **kwargs)

    def stop(self) -> None:
        """Cancel what has not started and kill the workers: a task in flight may run for
        minutes, and what it would write is published atomically, so nothing is lost."""
        self.shutdown(wait=False, cancel_futures=True)
        for process in list((self._processes or {}).values()):
            process.kill()


@contextmanager
def sigint_blocked():
    """SIGINT held back from this thread (delivered when the block ends)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def process_pool(workers: int) -> WorkerPool:
    """A spawn pool whose workers exit when this process dies, however it dies."""
    return WorkerPool(workers, mp_context=multiprocessing.get_context("spawn"),
                      initializer=init_worker, initargs=(os.getpid(),))


def init_worker(parent_pid: int) -> None:
    exit_with_parent(parent_pid)
    # The workers already use the cores; parallel kernels inside them would oversubscribe.
    numba.set_num_threads(1)


def exit_with_parent(parent_pid: int) -> None:
    """Linux: the kernel sends SIGKILL when the parent dies (works even while a kernel holds the
    GIL). Elsewhere: a daemon thread polls the parent id. Either way, a parent that died before
    this ran is caught by the check at the end."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            watch_parent(parent_pid)
    else:
        watch_parent(parent_pid)
    if os.getppid() != parent_pid:
        os._exit(1)


def watch_parent(parent_pid: int, interval: float = WATCH_INTERVAL_S) -> threading.Thread:
    """Exit this process as soon as its parent is no longer `parent_pid` (it was re-parented)."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(1)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread
