"""Search strategies: what proposes each round's candidates, every one scored by the model, for
the tuner to choose its measurements among (MetaSchedule's SearchStrategy). A strategy is one
module that registers a factory under its name; `TuneSettings.strategy` names the one `tune`
uses.

    @register("mine")
    class Mine:
        def __init__(self, space: LayoutSpace, settings: SearchSettings): ...
        def propose(self, starts, score, rng) -> Archive: ...
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from features.graph.layout_space import LayoutSpace
from models.tuning.search import Archive, ScoreFn, SearchSettings


class SearchStrategy(Protocol):
    def propose(self, starts: np.ndarray, score: ScoreFn, rng: np.random.Generator) -> Archive:
        """Every config scored this round, `starts` (k, nc, 18) among them: the best measured
        configs and the last round's best unmeasured ones. Kept for a whole search."""


# name -> factory(space, settings) -> SearchStrategy
STRATEGIES: dict[str, Callable[[LayoutSpace, SearchSettings], SearchStrategy]] = {}


def register(name: str):
    """Decorator: register a strategy factory (a class, usually) under `name`."""
    def add(factory):
        if name in STRATEGIES:
            raise ValueError(f"search strategy {name!r} is registered already")
        STRATEGIES[name] = factory
        return factory
    return add


def check_strategy(name: str) -> None:
    if name not in STRATEGIES:
        raise ValueError(f"unknown search strategy {name!r}; known: "
                         f"{', '.join(sorted(STRATEGIES))}")


def make_strategy(name: str, space: LayoutSpace, settings: SearchSettings) -> SearchStrategy:
    """The strategy registered as `name`, for one search of `space`."""
    check_strategy(name)
    return STRATEGIES[name](space, settings)


# the built-in strategies register themselves on import
from models.tuning.strategies import evolutionary, random_search  # noqa: E402,F401
