"""The build's notice before Numba compiles the layout kernels, read from Numba's real cache, and
the children that compile the two slow ones side by side."""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from features.cache import compile_ahead as ahead
from features.npz.find import list_npz
from features.rows import compiled as C
from features.rows.table import FeatureConfig, file_table

REPO = Path(C.__file__).resolve().parents[2]
# A token makes the source new to Numba's cache (it stamps a file by its content) on every run
KERNEL = "from numba import njit\n\n\n@njit(cache=True)\ndef f(x):  # {}\n    return x + {}\n"


def _load(path, monkeypatch):
    """The file as module `kernel`, in sys.modules as Numba's cache expects of a module."""
    spec = importlib.util.spec_from_file_location("kernel", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "kernel", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kernel(tmp_path):
    """A cached njit function in a file of its own, new to Numba's cache."""
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL.format(uuid.uuid4().hex, 1))
    return path


def _in_a_fresh_process(path) -> tuple[bool, bool]:
    """(compiled() before the first call, whether Numba then loaded the call from its cache)."""
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "import importlib.util as u\n"
            f"s = u.spec_from_file_location('kernel', {str(path)!r}); m = u.module_from_spec(s)\n"
            "sys.modules['kernel'] = m; s.loader.exec_module(m)\n"
            "from features.rows.compiled import compiled\n"
            "said = compiled(m.f); m.f(1); print(said, bool(m.f.stats.cache_hits))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ)
    assert out.returncode == 0, out.stderr
    said, loaded = out.stdout.split()
    return said == "True", loaded == "True"


@pytest.mark.slow
def test_compiled_says_what_numba_then_does(kernel, monkeypatch):
    module = _load(kernel, monkeypatch)
    assert not C.compiled(module.f)                       # a new file: nothing cached
    assert module.f(1) == 2
    assert C.compiled(module.f)                           # compiled in this process
    assert _in_a_fresh_process(kernel) == (True, True)    # cached, and Numba loads it
    kernel.write_text(KERNEL.format(uuid.uuid4().hex, 2))
    # the edit keeps the size; a later mtime makes Python (and an older Numba) see it
    os.utime(kernel, ns=(kernel.stat().st_atime_ns, kernel.stat().st_mtime_ns + 10**9))
    assert _in_a_fresh_process(kernel) == (False, False)  # stale: Numba compiles it again


def test_the_notice_is_one_line_once_and_none_when_compiled(kernel, monkeypatch, capsys):
    module = _load(kernel, monkeypatch)
    monkeypatch.setattr(C, "slow_kernels", lambda collection, feature_set: (module.f,))
    monkeypatch.setattr(C, "_said", False)
    C.compile_notice()
    C.compile_notice()
    assert capsys.readouterr().err == C.NOTICE + "\n"
    monkeypatch.setattr(C, "_said", False)
    module.f(1)
    C.compile_notice()
    assert capsys.readouterr().err == ""


def test_a_plain_function_gets_no_notice_and_no_error():
    """Under NUMBA_DISABLE_JIT the kernels are plain functions: nothing to compile."""
    assert C.compiled(lambda x: x)


def test_a_random_collection_does_not_wait_for_the_node_rows_kernel():
    assert C.slow_kernels("layout:xla:random") == (C.K.layout_config_features,)
    assert C.K.node_rows in C.slow_kernels("layout:nlp:default")


@pytest.mark.slow
def test_the_compiling_children_compile_what_the_build_then_runs(tiny_npz, tmp_path):
    """The children's own command on a generated file exits 0 (a child that fails only costs
    time, so nothing else would show a broken one), and the kernels it runs take the argument
    types a build's, its int8 copies read back read-only, gives them: in this process, after
    the children's work and a build's, each slow kernel holds one signature (two would be a
    second compile)."""
    collection = C.NODE_ROW_COLLECTIONS[0]
    path = list_npz(tiny_npz, collection, "train")[0]
    for kernel in C.slow_kernels(collection):
        done = subprocess.run([sys.executable, "-c", ahead.CHILD, kernel.__name__, str(path),
                               collection, "train", str(os.getpid())], cwd=ahead._PROJECT,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        ahead.run_kernel(kernel.__name__, str(path), collection, "train")
    test_file = list_npz(tiny_npz, collection, "test")[0]
    for _ in range(2):      # the second read memory-maps the int8 copy the first wrote
        file_table(test_file, collection, "test", FeatureConfig(), packed_dir=tmp_path)
    assert [len(k.signatures) for k in C.slow_kernels(collection)] == [1, 1]


@pytest.mark.slow
def test_the_compiling_children_take_the_smallest_file_and_never_outlive_a_ctrl_c(
        tiny_npz, monkeypatch):
    """Interrupted while its children compile, the call kills them and passes the Ctrl-C on;
    both children ran on the smallest file. A collection without node rows, or the basic
    feature set, starts none."""
    started = []
    popen = subprocess.Popen

    def recorded(args, **kw):
        started.append((args, popen(args, **kw)))
        return started[-1][1]
    monkeypatch.setattr(ahead.subprocess, "Popen", recorded)
    monkeypatch.setattr(ahead, "compiled", lambda kernel: False)
    monkeypatch.setattr(ahead, "CHILD", "import time; time.sleep(300)")
    monkeypatch.setattr(ahead, "DEADLINE_S", 30)
    collection = C.NODE_ROW_COLLECTIONS[0]
    files = list_npz(tiny_npz, collection, "train")
    # Python's own handler, whatever this process inherited (a background job ignores SIGINT),
    # hit at the main thread, as a terminal's Ctrl-C interrupts it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(2.0, signal.pthread_kill, (threading.main_thread().ident,
                                                         signal.SIGINT))
    timer.start()
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ahead.side_by_side(files, collection, "train")
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - began < 20
    assert len(started) == 2 and all(child.poll() is not None for _, child in started)
    smallest = min(files, key=lambda f: f.stat().st_size)
    assert len({f.stat().st_size for f in files}) > 1
    assert [args[3:7] for args, _ in started] == [[k.__name__, str(smallest), collection, "train"]
                                                  for k in C.slow_kernels(collection)]
    ahead.side_by_side(files, "layout:xla:random", "train")
    ahead.side_by_side(files, collection, "train", feature_set="basic")
    assert len(started) == 2


@pytest.mark.slow
def test_a_child_that_fails_or_overruns_is_named(tiny_npz, monkeypatch, capsys):
    # each child runs one program: the first exits 3, the second sleeps past a 1 s deadline
    programs = iter(["import sys; sys.exit(3)", "import time; time.sleep(60)"])
    popen = subprocess.Popen
    monkeypatch.setattr(ahead.subprocess, "Popen",
                        lambda args, **kw: popen([args[0], "-c", next(programs)], **kw))
    monkeypatch.setattr(ahead, "compiled", lambda kernel: False)
    monkeypatch.setattr(ahead, "DEADLINE_S", 1)
    collection = C.NODE_ROW_COLLECTIONS[0]
    ahead.side_by_side(list_npz(tiny_npz, collection, "train"), collection, "train")
    first, second = (k.__name__ for k in C.slow_kernels(collection))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert first in lines[0] and "exit code 3" in lines[0]
    assert second in lines[1] and "deadline" in lines[1]
