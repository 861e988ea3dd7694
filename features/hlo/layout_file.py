"""Writing a graph as a TpuGraphs layout file with one config: the compiler's default."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from features import schema as S


def write_layout_npz(graph: dict[str, np.ndarray], path: str | os.PathLike) -> Path:
    """graph (read_hlo's arrays, kept as they are) -> a layout npz at exactly path, whose one
    config leaves every node's layout to the compiler (all -1) and has runtime 0 (not
    measured). Written to a temporary file beside path, then renamed, so no reader ever sees
    half a file."""
    path = Path(path)
    arrays = {key: np.asarray(graph[key]) for key in S.GRAPH_KEYS}
    nc = arrays["node_config_ids"].shape[0]
    arrays["node_config_feat"] = np.full((1, nc, S.N_LAYOUT_CONFIG_FEAT), -1, np.float32)
    arrays["config_runtime"] = np.zeros(1, np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)   # made only now: after a read that worked
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:  # a file object: savez would add .npz to a name
            np.savez_compressed(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
