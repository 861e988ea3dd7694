"""A layout graph's reference grown with its measurements, for a run whose statistics follow
the reference (FeatureConfig.reference "file").

Such a run learnt from the Kaggle files, whose configs are a genetic search's population: it
gathers around fast layouts, and the within-graph statistics the run reads (z-scores, value
shares) point at them. A search's measurements are a population too. Once a graph has
measurements, its reference is the one first fixed, the `elite` fastest configs measured and
`mutants` layouts a few moves from them (the tuner's moves), so the run reads a search's
statistics as it read a genetic search's. A function of the first reference and the
measurements: a saved model restores it from them.

Before any measurement a search has only the layouts it drew around the compiler default, no
population. For a CNN graph the reference a search gives the model is then grown by the
model's own short genetic search (`model_grown`): the drawn layouts, the model's top-scored few
and their mutants, `steps` times. On the CNN pools it lifted the file run's Kendall before the
first measurement from 0.40 to 0.67 (0.655 with the pools' own configs); on the transformer
pools variants of it (a first version, 1-3 steps) lowered it (0.53 -> 0.46-0.48).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from features import Graph
from features.graph.layout_space import LayoutSpace, config_keys
from features.schema import is_tile, program_family


@dataclass(frozen=True)
class Growth:
    elite: int = 10         # fastest measured configs that join the reference (0: no growth)
    mutants: int = 800      # layouts drawn a few moves from them
    seed: int = 0
    # the program families (a layout collection's middle word) whose graphs grow: on the
    # transformer pools it found configs 0.9% faster at 10 and 20 measurements, on the CNN
    # pools no gain beyond the noise (docs/records/new_families.md, "a reference that grows")
    programs: tuple[str, ...] = ("nlp",)
    # before any measurement: rounds of the model's own search grown into a search's reference
    # (0: none), for these program families (docs/records/new_families.md, "the model's own
    # search as a CNN's first reference")
    steps: int = 5
    start_programs: tuple[str, ...] = ("xla",)

    def applies(self, collection: str) -> bool:
        return self._grows(collection, self.programs)

    def starts(self, collection: str) -> bool:
        """Whether a search's first reference of the collection's graphs is model_grown."""
        return self.steps > 0 and self._grows(collection, self.start_programs)

    def _grows(self, collection: str, programs: tuple[str, ...]) -> bool:
        return (self.elite > 0 and not is_tile(collection)
                and program_family(collection) in programs)


def fastest(measured: np.ndarray, runtimes: np.ndarray, k: int) -> np.ndarray:
    """The k distinct measured configs of lowest mean log runtime (ties: the lower key)."""
    keys = np.array(config_keys(measured))
    _, first, which = np.unique(keys, return_index=True, return_inverse=True)
    mean = np.bincount(which, np.log(runtimes)) / np.bincount(which)
    return measured[first[np.argsort(mean, kind="stable")[:k]]]


def top_scored(configs: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The k distinct configs of highest score (a config's score is the same wherever it
    appears; ties: the lower key)."""
    keys, first = np.unique(np.array(config_keys(configs)), return_index=True)
    return configs[first[np.lexsort((keys, -scores[first]))[:k]]]


def grown(g: Graph, base: np.ndarray, elite: np.ndarray, growth: Growth) -> np.ndarray:
    """The first reference, the elite and `growth.mutants` children of it (tuner.py's moves
    in the graph's layout space), drawn at growth.seed."""
    rng = np.random.default_rng(growth.seed)
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids)
    parents = elite[rng.integers(0, len(elite), growth.mutants)]
    return np.concatenate([base, elite, space.mutate(rng, parents)])


def model_grown(g: Graph, base: np.ndarray, score: Callable[[np.ndarray], np.ndarray],
                growth: Growth) -> np.ndarray:
    """base grown with the model's own picks, `growth.steps` times: `score(reference)` (higher =
    predicted faster, with that reference fixing the statistics) picks the `growth.elite`
    distinct top-scored configs of the reference so far, and the next is `grown` from base and
    them (step i's mutants drawn at growth.seed + 1 + i)."""
    reference = base
    for step in range(growth.steps):
        elite = top_scored(reference, score(reference), growth.elite)
        reference = grown(g, base, elite, replace(growth, seed=growth.seed + 1 + step))
    return reference
