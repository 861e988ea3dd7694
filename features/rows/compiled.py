"""Whether the layout row kernels still have to be compiled, so a build can say so before the
first one: a fresh install spends about 3.5 minutes on 2 cores in Numba's compiler there, without
a line of output (README, Quick start)."""
from __future__ import annotations

import sys

from features.rows import kernels as K

# The two that take minutes to compile; no other kernel takes 4 s (models/records/README.md)
SLOW = (K.layout_config_features, K.node_rows)
NOTICE = ("notice: compiling the layout feature kernels first: once per install, about 3.5 "
          "minutes on 2 cores (Numba keeps them in its cache)")
_said = False


def compiled(dispatcher) -> bool:
    """Whether the kernel is compiled in this process or has a fresh entry in Numba's on-disk
    cache (its index, which Numba checks against the source file's stamp). The cache is read
    through Numba's private attributes; if that fails, say compiled (no notice, nothing else)."""
    if dispatcher.signatures:
        return True
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:       # noqa: BLE001 - a notice is not worth an error
        return True


def compile_notice() -> None:
    """One line on stderr, once per process, when a layout kernel is not compiled yet."""
    global _said
    if _said or all(compiled(d) for d in SLOW):
        return
    _said = True
    print(NOTICE, file=sys.stderr, flush=True)
