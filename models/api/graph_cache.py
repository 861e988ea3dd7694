"""The graphs a CostModel has seen, each with its state (graph_state.GraphState), keyed by the
graph's content: the last `size` graphs are kept, and every graph with measurements."""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterator

from features import Graph
from models.api.graph_state import GraphState


class GraphCache:
    def __init__(self, size: int = 8):
        self.size = size
        self.hits = self.misses = 0     # lookups that found a graph's state, and that did not
        self._graphs: OrderedDict[str, tuple[Graph, GraphState]] = OrderedDict()

    def get(self, key: str) -> GraphState | None:
        """The graph's state, counted as a hit or a miss."""
        if key not in self._graphs:
            self.misses += 1
            return None
        self.hits += 1
        self._graphs.move_to_end(key)
        return self._graphs[key][1]

    def keep(self, key: str, g: Graph, state: GraphState) -> None:
        self._graphs[key] = (g, state)
        for old in list(self._graphs):
            if len(self._graphs) <= self.size:
                break
            # what was learnt is never dropped, nor the graph asked about now
            if old != key and self._graphs[old][1].measured is None:
                del self._graphs[old]

    def __iter__(self) -> Iterator[tuple[Graph, GraphState]]:
        """(graph, state) from the least recently used."""
        return iter(list(self._graphs.values()))

    def __len__(self) -> int:
        return len(self._graphs)
