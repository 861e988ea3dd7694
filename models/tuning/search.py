"""Evolution screened by a score function: many generations of mutated and crossed configs, each
scored by the model, none measured (as Ansor and MetaSchedule search their cost model).

A generation makes `proposals` children of the population (a mutation of one parent, or a
crossover of two) and draws `sampled` configs from a distribution learnt from the scores
(sampler.py: many groups set at once, which crosses the score's valleys mutations cannot), scores
those not scored before, refits the distribution to its best draws, and keeps the `population`
best-scored configs seen as the next parents. Scores are the model's mean (higher = predicted
faster); how sure it is (`spread`) is kept beside them for the choice of what to measure
(tuner.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from models.tuning.sampler import LayoutSampler
from features.graph.layout_space import LayoutSpace, config_keys

# configs (k, nc, 18) int8 -> (scores (k,), spread (k,)); higher score = predicted faster
ScoreFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SearchSettings:
    proposals: int = 150       # children scored per generation
    sampled: int = 150         # configs drawn from the learnt distribution per generation
    generations: int = 5       # per round of measurements (3 found less: records)
    population: int = 64       # best-scored configs kept as parents
    crossover: float = 0.25    # share of children made by crossing two parents
    start_set: float = 0.05    # the distribution's first chance that a group is set
    elite: float = 0.1         # share of each generation's draws it is refit to
    rate: float = 0.3          # how far each refit moves it


@dataclass
class Archive:
    """Every config scored in one round, keyed so none is scored twice."""
    configs: list
    scores: list
    spread: list
    index: dict

    @classmethod
    def empty(cls) -> "Archive":
        return cls([], [], [], {})

    def add(self, configs: np.ndarray, score: ScoreFn) -> np.ndarray:
        """Score the configs not seen yet (one call) and keep them; every config's score."""
        keys, new, batch = config_keys(configs), [], set()
        for i, k in enumerate(keys):
            if k not in self.index and k not in batch:
                batch.add(k)
                new.append(i)
        if new:
            s, sd = score(configs[new])
            for i, a, b in zip(new, s, sd):
                self.index[keys[i]] = len(self.configs)
                self.configs.append(configs[i])
                self.scores.append(float(a))
                self.spread.append(float(b))
        return np.array([self.scores[self.index[k]] for k in keys])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.array(self.configs), np.array(self.scores), np.array(self.spread)

    def best(self, k: int) -> np.ndarray:
        """Positions of the k best-scored configs (ties: the earlier)."""
        return np.argsort(-np.array(self.scores), kind="stable")[:k]


def evolve(space: LayoutSpace, score: ScoreFn, starts: np.ndarray, rng: np.random.Generator,
           s: SearchSettings = SearchSettings(), sampler: LayoutSampler | None = None) -> Archive:
    """Every config scored while evolving from `starts` (k, nc, 18) for s.generations, beside
    draws from `sampler` (refit as it goes; a new one when None)."""
    sampler = sampler or LayoutSampler(space, s.start_set)
    archive = Archive.empty()
    archive.add(starts, score)
    for _ in range(s.generations):
        configs = np.array(archive.configs)
        parents = configs[archive.best(s.population)]
        drawn, choice = sampler.sample(rng, s.sampled)
        scores = archive.add(np.concatenate([_children(space, parents, rng, s), drawn]), score)
        sampler.fit(choice, scores[len(scores) - len(drawn):], s.elite, s.rate)
    return archive


def _children(space: LayoutSpace, parents: np.ndarray, rng: np.random.Generator,
              s: SearchSettings) -> np.ndarray:
    """s.proposals children: mutations of parents drawn by rank (the better, the likelier),
    and crossovers of two such parents, each crossed child mutated too only when it equals a
    parent (crossing near-identical configs often gives one back)."""
    weights = 1.0 / (np.arange(len(parents)) + 5.0)
    weights /= weights.sum()
    n_cross = int(round(s.proposals * s.crossover)) if len(parents) > 1 else 0
    mutated = space.mutate(rng, parents[rng.choice(len(parents), s.proposals - n_cross,
                                                   p=weights)])
    if not n_cross:
        return mutated
    a = parents[rng.choice(len(parents), n_cross, p=weights)]
    b = parents[rng.choice(len(parents), n_cross, p=weights)]
    crossed = space.crossover(rng, a, b)
    same = (crossed == a).all(axis=(1, 2)) | (crossed == b).all(axis=(1, 2))
    crossed[same] = space.mutate(rng, crossed[same])
    return np.concatenate([mutated, crossed])
