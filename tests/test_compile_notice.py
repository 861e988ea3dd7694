"""The build's notice before Numba compiles the layout kernels, read from Numba's real cache."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from features.rows import compiled as C

KERNEL = "from numba import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return x + {}\n"


def _load(path):
    spec = importlib.util.spec_from_file_location("kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kernel(tmp_path):
    """A cached njit function in a file of its own, new to Numba's cache."""
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL.format(1))
    return path


def _compiled_in_a_fresh_process(path) -> bool:
    code = (f"import sys; sys.path.insert(0, {os.getcwd()!r})\n"
            "import importlib.util as u\n"
            f"s = u.spec_from_file_location('kernel', {str(path)!r}); m = u.module_from_spec(s)\n"
            "s.loader.exec_module(m)\n"
            "from features.rows.compiled import compiled; print(compiled(m.f))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ, check=True)
    return out.stdout.strip() == "True"


def test_a_kernel_is_compiled_once_numba_has_cached_it_and_not_after_an_edit(kernel):
    module = _load(kernel)
    assert not C.compiled(module.f)                 # a fresh file: nothing cached
    assert not _compiled_in_a_fresh_process(kernel)
    assert module.f(1) == 2
    assert C.compiled(module.f)                     # compiled in this process
    assert _compiled_in_a_fresh_process(kernel)     # and found in Numba's cache by another
    kernel.write_text(KERNEL.format(2))             # an edit: Numba compiles it again
    os.utime(kernel, ns=(kernel.stat().st_atime_ns, kernel.stat().st_mtime_ns + 10**9))
    assert not _compiled_in_a_fresh_process(kernel)


def test_the_notice_is_one_line_once_and_none_when_compiled(kernel, monkeypatch, capsys):
    module = _load(kernel)
    monkeypatch.setattr(C, "SLOW", (module.f,))
    monkeypatch.setattr(C, "_said", False)
    C.compile_notice()
    C.compile_notice()
    err = capsys.readouterr().err
    assert err == C.NOTICE + "\n"
    monkeypatch.setattr(C, "_said", False)
    module.f(1)
    C.compile_notice()
    assert capsys.readouterr().err == ""
