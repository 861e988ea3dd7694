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
from models.api.cost_model import start_reference
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
    collection = collection or program_collection(model.trained.models, node_opcode)
    bound = Bound(model, graph, model_reference(model, graph, space, settings, seed, collection),
                  collection)
    return tune(measure, space, bound if learn else Frozen(bound), budget, seed=seed,
                settings=settings)


def search_reference(space: LayoutSpace, settings: TuneSettings, seed: int) -> np.ndarray:
    """The layouts a search of `space` draws for its model's reference (its graph's statistics)."""
    return reference_configs(space, settings.reference, seed)


def model_reference(model: CostModel, graph: GraphArrays, space: LayoutSpace,
                    settings: TuneSettings, seed: int, collection: str) -> np.ndarray:
    """The reference a search gives its model: the layouts it draws, grown by the model's own
    picks where the model's growth says (models.api.cost_model.start_reference)."""
    return start_reference(model, graph, search_reference(space, settings, seed), collection)
