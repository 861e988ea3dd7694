"""Random search screened by the model: each round as many valid random layouts of the space
as the evolution scores in one (LayoutSpace.random), the tuner measuring the best-scored."""
from __future__ import annotations

import numpy as np

from features.graph.layout_space import LayoutSpace
from models.tuning.search import Archive, ScoreFn, SearchSettings
from models.tuning.strategies import register


@register("random")
class RandomSearch:
    def __init__(self, space: LayoutSpace, settings: SearchSettings):
        self.space = space
        self.draws = settings.generations * (settings.proposals + settings.sampled)

    def propose(self, starts: np.ndarray, score: ScoreFn, rng: np.random.Generator) -> Archive:
        archive = Archive.empty()
        archive.add(starts, score)
        archive.add(self.space.random(rng, self.draws), score)
        return archive
