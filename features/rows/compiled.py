"""Whether the layout row kernels still have to be compiled, so a build can say so (NOTICE)
before minutes in Numba's compiler without a line of output (README, Quick start)."""
from __future__ import annotations

import sys

from features.rows import row_kernels as K
from features.rows.node_rows import NODE_ROW_COLLECTIONS

NOTICE = ("notice: compiling the layout feature kernels first: once per install, about 1 to 3 "
          "minutes (Numba keeps them in its cache)")
_said = False


def slow_kernels(collection: str | None, feature_set: str = "full") -> tuple:
    """The kernels that take minutes to compile (no other takes 4 s: docs/records/README.md)
    that a layout collection's rows run; None: every layout collection's. The "basic" feature
    set runs neither."""
    if feature_set != "full":
        return ()
    if collection is None or collection in NODE_ROW_COLLECTIONS:
        return K.layout_config_features, K.node_rows
    return (K.layout_config_features,)


def compiled(dispatcher) -> bool:
    """Whether the kernel is compiled in this process or has an entry in Numba's on-disk cache
    that Numba would load here: its key (this machine's target, the function's bytecode) in an
    index whose source stamp is fresh. Read through Numba's private attributes; if that fails
    (another Numba, or NUMBA_DISABLE_JIT's plain functions), say compiled: no notice."""
    try:
        if dispatcher.signatures:
            return True
        cache, codegen = dispatcher._cache, dispatcher.targetctx.codegen()
        return any(key == cache._index_key(key[0], codegen)
                   for key in cache._cache_file._load_index())
    except Exception:       # noqa: BLE001 - a notice is not worth an error
        return True


def compile_notice(collection: str | None = None, feature_set: str = "full") -> None:
    """NOTICE on stderr, once per process, when a kernel the collection's rows run is not
    compiled yet."""
    global _said
    if _said or all(compiled(d) for d in slow_kernels(collection, feature_set)):
        return
    _said = True
    print(NOTICE, file=sys.stderr, flush=True)
