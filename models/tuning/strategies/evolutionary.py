"""The default strategy: evolution screened by the model, beside draws from a distribution
learnt from its scores (search.py, sampler.py); the distribution is kept for the whole search,
so later rounds start where earlier ones left it."""
from __future__ import annotations

import numpy as np

from features.graph.layout_space import LayoutSpace
from models.tuning.sampler import LayoutSampler
from models.tuning.search import Archive, ScoreFn, SearchSettings, evolve
from models.tuning.strategies import register


@register("evolutionary")
class Evolutionary:
    def __init__(self, space: LayoutSpace, settings: SearchSettings):
        self.space, self.settings = space, settings
        self.sampler = LayoutSampler(space, settings.start_set)

    def propose(self, starts: np.ndarray, score: ScoreFn, rng: np.random.Generator) -> Archive:
        return evolve(self.space, score, starts, rng, self.settings, self.sampler)
