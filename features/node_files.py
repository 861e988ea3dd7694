"""The node rows of a FeatureSet's graphs, made from their input files (node_rows.py).

Apart from node_rows.py, whose code is part of the feature signature: reading files is not.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from .feature_set import FeatureSet
from .io import collection_dir, read_graph
from .node_rows import graph_node_rows
from .per_config import stat_sample


def with_nodes(data: FeatureSet, npz_root: Path, split: str, seed: int) -> FeatureSet:
    """data with the node rows of its graphs' rows, read from their files under npz_root
    (only the configs the rows and the value shares need); seed: FeatureConfig.seed."""
    nodes = []
    for gid, rows in zip(data.graph_ids, np.split(data.config_idx, data.ptr[1:-1])):
        path = Path(npz_root) / collection_dir(data.collection) / split / f"{gid}.npz"
        g = read_graph(path, data.collection, split, keep=lambda runtime, rows=rows, gid=gid:
                       np.union1d(rows, stat_sample(len(runtime), seed, gid)))
        nodes.append(graph_node_rows(g, rows, seed))
    return replace(data, nodes=tuple(nodes))
