"""Tune one graph with a cost model: the search of tuner.py over the graph's layout space (or a
tile kernel's candidate list), the model bound to the graph, taught by every measurement.

    from models.api import CostModel
    from models.tuning import tune_graph
    result = tune_graph(CostModel.load(run_dir), measure, budget=100, **graph)

The cost model (models/api/) only ranks, learns, saves and loads; this module hands it to the
search, as MetaSchedule's search strategy takes its cost model.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from features.graph.layout_space import LayoutSpace, reference_configs
from models.api import CostModel, GraphArrays, program_collection
from models.tuning.tuner import Bound, Frozen, TuneResult, TuneSettings, tune, tune_pool


def tune_graph(model: CostModel, measure: Callable, *, budget: int, node_feat, node_opcode,
               edge_index, node_config_ids=None, node_splits=None, config_feat=None,
               collection: str | None = None, seed: int = 0,
               settings: TuneSettings = TuneSettings(), learn: bool = True) -> TuneResult:
    """Find a fast config of a graph in at most `budget` measurements. `measure(configs)`
    takes (k, nc, 18) int8 layout configs and returns k runtimes (any unit, lower = faster).
    From the compiler default (all -1), rounds of candidates proposed by the search strategy
    `settings.strategy` (evolution by default: valid mutations and crossover) and screened by
    `model`, a batch measured and learnt from (`model.update`), the best few
    measured again at the end (tuner.py). TuneResult: `best` (nc, 18), `configs` and
    `runtimes` (everything measured, in order). Tile: config_feat (c, 24) are the candidates,
    ranked and measured best first. The layout model is the graph family's default-collection
    one unless `collection` names another; `learn=False` keeps the model frozen. Deterministic
    for a seed and a model in one state (e.g. freshly loaded): the graph's earlier
    measurements in this model count too."""
    graph = GraphArrays(node_feat, node_opcode, edge_index, node_config_ids, node_splits)
    if config_feat is not None:
        bound = Bound(model, graph, collection=collection, key="config_feat")
        return tune_pool(measure, np.asarray(config_feat), bound if learn else Frozen(bound),
                         budget, seed=seed, settings=settings)
    space = LayoutSpace.of_graph(node_feat, node_opcode, edge_index, node_config_ids,
                                 settings.space)
    bound = Bound(model, graph, search_reference(space, settings, seed),
                  collection or program_collection(model.trained.models, node_opcode))
    return tune(measure, space, bound if learn else Frozen(bound), budget, seed=seed,
                settings=settings)


def search_reference(space: LayoutSpace, settings: TuneSettings, seed: int) -> np.ndarray:
    """The reference configs a search of `space` gives its model (its graph's statistics)."""
    return reference_configs(space, settings.reference, seed)
