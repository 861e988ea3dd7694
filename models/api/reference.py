"""How many configs a graph's reference needs, and the one drawn when a first call brings fewer.

The reference fixes a graph's within-graph statistics and each seed model's scale (min-max over
its configs; graph_state.py). Taken from a first call of one candidate, it scored that call's
candidate 0 and every later config of the graph against one config: a later call of 1,000
candidates ranked at Kendall 0.655 where a proper reference gave 0.810 (issue 41). So a layout
graph whose first call brings too few distinct configs gets a reference drawn from its own
layout space instead: valid random layouts, the same for every such graph (a fixed seed), so
its scores do not depend on which call came first. Tile configs have no space to draw from:
too few is an error saying what to pass.
"""
from __future__ import annotations

import numpy as np

from features import Graph
from features.schema import is_tile
from features.graph.layout_space import (PERM_COUNT, REFERENCE_CONFIGS, REFERENCE_SEED,
                                         LayoutSpace, space_of)

MIN_LAYOUT = 20      # distinct configs a layout reference needs (fewer if the space has fewer)
MIN_TILE = 2         # a tile graph's candidates may be all it has: two at least, for a scale


class DrawnReferenceWarning(UserWarning):
    """A graph's first call had too few configs to be its reference; one was drawn instead."""


def distinct(configs: np.ndarray) -> int:
    return int(np.unique(np.asarray(configs).reshape(len(configs), -1), axis=0).shape[0])


def shortfall(g: Graph, configs: np.ndarray) -> int:
    """How many distinct configs a reference of g needs, if `configs` are too few; else 0."""
    n = distinct(configs)
    need = MIN_TILE if is_tile(g.collection) else MIN_LAYOUT
    if n >= need:
        return 0
    if not is_tile(g.collection):
        need = min(need, _space_size(space_of(g), need))   # a tiny space cannot give more
    return need if n < need else 0


def _space_size(space: LayoutSpace, cap: int) -> int:
    """Distinct configs of the space (each searched group unset or a permutation), up to cap."""
    size = 1
    for rank in space.ranks[space.ranks > 0]:
        size *= int(PERM_COUNT[rank]) + 1
        if size >= cap:
            return cap
    return size


def drawn_message(g: Graph, n: int, need: int) -> str:
    kind = ("around the compiler default, as a 'default' collection's search"
            if g.collection.endswith(":default") else "random")
    return (f"{g.graph_id}: the graph's first call brought {n} distinct config(s), too few to "
            f"fix its statistics and scale (it needs {need}); its reference is "
            f"{REFERENCE_CONFIGS} valid layouts of its own layout space instead ({kind}; seed "
            f"{REFERENCE_SEED}, the same whichever call comes first). Pass reference= (a "
            f"uniform sample of your search space) to choose it")


def too_few_message(g: Graph, n: int, need: int, given: bool) -> str:
    what = "reference=" if given else "the graph's first call (its default reference)"
    hint = (f"pass reference= with at least {need} distinct candidate tiles of the graph (all "
            f"of them, if it has few)" if is_tile(g.collection) else
            f"pass at least {need} (a uniform sample of your search space), or leave "
            f"reference= out to have one drawn from the graph's layout space")
    return f"{g.graph_id}: {what} holds {n} distinct config(s), too few to be its reference; {hint}"
