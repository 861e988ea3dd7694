"""One graph's arrays, named as in the dataset: what `CostModel.rank` and `update` take beside
the configs, as one typed value instead of a dict built by hand at every call.

    graph = GraphArrays.of_npz(np.load(path))
    model.rank(**graph.kwargs(), node_config_feat=candidates)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from features import Graph
from features.schema import GRAPH_KEYS


@dataclass(frozen=True, eq=False)   # arrays: no elementwise ==
class GraphArrays:
    node_feat: np.ndarray               # (n, 140) float
    node_opcode: np.ndarray             # (n,) int
    edge_index: np.ndarray              # (m, 2) int
    node_config_ids: np.ndarray | None = None   # (nc,) layout only
    node_splits: np.ndarray | None = None       # (1, s) or (s,) layout only; None: none known

    @classmethod
    def of_graph(cls, g: Graph) -> "GraphArrays":
        return cls(**{k: getattr(g, k) for k in GRAPH_KEYS})

    @classmethod
    def of_npz(cls, z) -> "GraphArrays":
        """From an npz (or any mapping) of a graph's arrays; a tile file's lack the last two."""
        return cls(**{k: z[k] for k in GRAPH_KEYS if k in z})

    def kwargs(self) -> dict:
        """The arrays it holds, by name in GRAPH_KEYS order: `rank(**graph.kwargs(), ...)`."""
        return {k: getattr(self, k) for k in GRAPH_KEYS if getattr(self, k) is not None}
