"""A layout graph's reference grown with its measurements, for a run whose statistics follow
the reference (FeatureConfig.reference "file").

Such a run learnt from the Kaggle files, whose configs are a genetic search's population: it
gathers around fast layouts, and the within-graph statistics the run reads (z-scores, value
shares) point at them. A search's measurements are a population too. Once a graph has
measurements, its reference is the one first fixed, the `elite` fastest configs measured and
`mutants` layouts a few moves from them (the tuner's moves), so the run reads a search's
statistics as it read a genetic search's. A function of the first reference and the
measurements: a saved model restores it from them.
"""
from __future__ import annotations

from dataclasses import dataclass

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

    def applies(self, collection: str) -> bool:
        return (self.elite > 0 and not is_tile(collection)
                and program_family(collection) in self.programs)


def fastest(measured: np.ndarray, runtimes: np.ndarray, k: int) -> np.ndarray:
    """The k distinct measured configs of lowest mean log runtime (ties: the lower key)."""
    keys = np.array(config_keys(measured))
    _, first, which = np.unique(keys, return_index=True, return_inverse=True)
    mean = np.bincount(which, np.log(runtimes)) / np.bincount(which)
    return measured[first[np.argsort(mean, kind="stable")[:k]]]


def grown(g: Graph, base: np.ndarray, elite: np.ndarray, growth: Growth) -> np.ndarray:
    """The first reference, the elite and `growth.mutants` children of it (tuner.py's moves
    in the graph's layout space), drawn at growth.seed."""
    rng = np.random.default_rng(growth.seed)
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids)
    parents = elite[rng.integers(0, len(elite), growth.mutants)]
    return np.concatenate([base, elite, space.mutate(rng, parents)])
