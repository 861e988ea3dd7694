"""One graph as the cost model keeps it: its fixed reference, the tables computed once, each
seed model's centre and scale on the reference, and what it has learnt from measurements.

A score is the mean over the run's seed models of each model's score scaled to 0..1 over the
reference configs, plus the refinement (refine.py): it depends on the graph and the config alone,
never on the other candidates of a call. The spread is the seed models' standard deviation.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from features import FeatureConfig, FeatureSet, Graph
from features.candidates import candidate_rows, config_key
from features.node_rows import graph_node_rows
from features.per_config import LayoutReference, stat_sample
from features.schema import is_tile
from features.table import GraphStatic, graph_reference, graph_static, static_key

from models.training.node_learner import NodeModel, RowScores
from models.training.run_files import is_partner, needs_nodes

from .refine import Refinement, refine


def with_configs(g: Graph, configs: np.ndarray, runtime: np.ndarray | None = None) -> Graph:
    """g holding other configs (and their runtimes; zeros when unknown)."""
    c = configs.shape[0]
    runtime = np.zeros(c, np.int64) if runtime is None else np.asarray(runtime)
    extra = {"config_runtime_normalizers": np.ones(c, np.int64)} if is_tile(g.collection) else {}
    return g._replace(**{config_key(g.collection): configs}, config_runtime=runtime, config_index=None,
                      row_hashes=None, config_slots=None, **extra)


def graph_key(g: Graph) -> str:
    """The graph's identity, whatever configs it holds."""
    return static_key(g._replace(node_config_feat=None, config_feat=None, config_slots=None))


@dataclass
class GraphState:
    static: GraphStatic
    reference: LayoutReference | None
    centre: np.ndarray      # (m,) per seed model: lowest score of the reference configs
    scale: np.ndarray       # (m,) their range (1 where it is 0)
    configs: np.ndarray     # the reference configs
    slots: np.ndarray | None  # layout: (nc, 3) most slots the reference sets (Graph.slots)
    measured: np.ndarray | None = None     # configs measured so far
    runtimes: np.ndarray | None = None
    refinement: Refinement | None = None
    seen: dict = field(default_factory=dict)   # model position -> node_learner.RowScores


class Scorer:
    """Scores for one run's seed models under fixed feature settings."""

    def __init__(self, models: list, settings: FeatureConfig, without: tuple[str, ...]):
        self.models, self.settings, self.without = models, settings, without

    def rows(self, g: Graph, state: GraphState) -> FeatureSet:
        data = candidate_rows(g, self.settings, state.static, state.reference).without(self.without)
        if not needs_nodes(self.models):
            return data
        # the node rows' value shares are the reference's, as the config rows' are
        table = None if state.reference is None else state.reference.table
        return replace(data, nodes=(graph_node_rows(g, data.config_idx, self.settings.seed,
                                                    state.static.layout, table),))

    def new_state(self, g: Graph, configs: np.ndarray) -> GraphState:
        """The state of graph g with `configs` as its reference: its tables and the models' scale
        from all of them, its statistics from the sample a file's are drawn from (stat_sample),
        so that a whole test file as the reference ranks exactly as `submit` ranks it."""
        ref = with_configs(g, configs)
        static = graph_static(ref, self.settings)
        sample = stat_sample(configs.shape[0], self.settings.seed, g.graph_id)
        reference = graph_reference(with_configs(g, configs[sample]), self.settings, static)
        state = GraphState(static, reference, np.zeros(len(self.models)),
                           np.ones(len(self.models)), configs,
                           None if is_tile(g.collection) else ref.slots())
        # Min-max over the reference, as submit normalises over a file (models/serving): a
        # whole file as the reference ranks exactly as submit, whatever the seeds
        raw = self.raw(self.rows(ref, state), state)
        span = raw.max(axis=1) - raw.min(axis=1)
        state.centre, state.scale = raw.min(axis=1), np.where(span > 0, span, 1.0)
        return state

    def prior(self, data: FeatureSet, state: GraphState) -> np.ndarray:
        """(m, r) each seed model's score of the rows, scaled over the reference."""
        return (self.raw(data, state) - state.centre[:, None]) / state.scale[:, None]

    def raw(self, data: FeatureSet, state: GraphState) -> np.ndarray:
        """(m, r) each model's own score of the rows; node learners score each node row of
        the graph once (state.seen), whichever call brings it."""
        return np.array([m.predict_graph(data.nodes[0], state.seen.setdefault(i, RowScores()))
                         if isinstance(m, NodeModel) else m.predict(data)
                         for i, m in enumerate(self.models)])

    def scores(self, g: Graph, state: GraphState) -> tuple[np.ndarray, np.ndarray]:
        """(score, spread) per config g holds, in g's order (higher score = predicted faster)."""
        data = self.rows(g, state)
        per_seed = self.per_seed(self.prior(data, state))
        score = per_seed.mean(axis=0)
        if state.refinement is not None:
            score = score + state.refinement(data.X, score)
        out, spread = np.empty(score.size), np.empty(score.size)
        out[data.config_idx], spread[data.config_idx] = score, per_seed.std(axis=0)
        return out, spread

    def per_seed(self, per_model: np.ndarray) -> np.ndarray:
        """(seeds, r) each seed's score: its ranker's, averaged with its partner's where the
        run has them (run_files.load_models lists rankers first, then partners)."""
        partners = sum(is_partner(m) for m in self.models)
        if not partners:
            return per_model
        return (per_model[:-partners] + per_model[-partners:]) / 2

    def update(self, g: Graph, state: GraphState) -> None:
        """Add g's configs and runtimes to the measurements and refit the refinement."""
        configs, runtime = getattr(g, config_key(g.collection)), np.asarray(g.config_runtime, np.float64)
        if state.measured is not None:
            configs = np.concatenate([state.measured, configs])
            runtime = np.concatenate([state.runtimes, runtime])
        state.measured, state.runtimes = configs, runtime
        data = self.rows(with_configs(g, configs), state)
        prior = self.prior(data, state).mean(axis=0)
        state.refinement = refine(data.X, prior, runtime[data.config_idx])
