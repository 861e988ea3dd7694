"""One graph as the cost model keeps it: its reference, the tables computed from it, each seed
model's centre and scale on it, and what it has learnt from measurements (a transformer graph's
reference grows with them: reference_growth.py, and its tables are computed again).

A score is the mean over the run's seed models of each model's score scaled to 0..1 over the
reference configs, refined by what measurements taught (refine.py: node effects on layout, a
booster on tile): it depends on the graph and the config alone, never on the other candidates of
a call. The spread is the seed models' standard deviation, combined with the node effects'
posterior sd once a layout graph has measurements.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from features import FeatureConfig, FeatureSet, Graph
from models.api.candidates import candidate_rows, config_key
from features.graph.node_kinds import node_kinds
from features.rows.node_rows import graph_node_rows
from features.rows.per_config import LayoutReference, stat_sample
from features.schema import is_tile
from features.rows.table import GraphStatic, graph_reference, graph_static, static_key

from models.training.node_learner import NodeModel, RowScores
from models.training.run_files import is_partner, needs_nodes

from models.api.node_effects import NodeEffects
from models.api.reference_growth import Growth, fastest, grown
from features.graph.layout_space import config_keys

MAX_PRIORS = 1_000_000   # cached config scores per graph (about 100 MB), then begun again
from models.api.refine import Refinement, UpdateResult, layout_update, tile_update


def graph_key(g: Graph) -> str:
    """The graph's identity, whatever configs it holds."""
    return static_key(g._replace(node_config_feat=None, config_feat=None, config_slots=None))


@dataclass
class GraphState:
    static: GraphStatic
    reference: LayoutReference | None
    centre: np.ndarray      # (m,) per seed model: lowest score of the reference configs
    scale: np.ndarray       # (m,) their range (1 where it is 0)
    configs: np.ndarray     # the reference configs first fixed (Growth adds to them)
    slots: np.ndarray | None  # layout: (nc, 3) most slots the reference sets (Graph.slots)
    measured: np.ndarray | None = None     # configs measured so far
    runtimes: np.ndarray | None = None
    refinement: Refinement | None = None     # tile: the booster on the measurements
    effects: NodeEffects | None = None       # layout: the node effects they show
    seen: dict = field(default_factory=dict)   # model position -> node_learner.RowScores
    origin: str = ""    # where the reference came from, for the warnings that name it
    kinds: np.ndarray | None = None   # layout: each configurable node's kind (node_kinds)
    # layout: config key -> (the seed models' mean score, their sd), each config scored once: a
    # search scores its elite again every round, tune-sim its whole pool after every update
    priors: dict = field(default_factory=dict)
    elite: tuple = ()     # the measured configs' keys the reference grew with (Growth)


class Scorer:
    """Scores for one run's seed models under fixed feature settings."""

    def __init__(self, models: list, settings: FeatureConfig, without: tuple[str, ...],
                 growth: Growth = Growth()):
        self.models, self.settings, self.without = models, settings, without
        self.growth = growth

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
        ref = g.with_configs(configs)
        static = graph_static(ref, self.settings)
        sample = stat_sample(configs.shape[0], self.settings.seed)
        reference = graph_reference(g.with_configs(configs[sample]), self.settings, static)
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
        if is_tile(g.collection):
            return self._scores(g, state)
        score, spread = self.prior_of(g, state)
        if state.effects is not None:
            score, unsure = state.effects.score(g.node_config_feat, score)
            spread = np.hypot(spread, unsure)
        return score, spread

    def prior_of(self, g: Graph, state: GraphState) -> tuple[np.ndarray, np.ndarray]:
        """Layout: the trained models' (score, seed spread) of each config g holds, in g's
        order, each config's computed once per graph (state.priors)."""
        keys = config_keys(g.node_config_feat)
        first: dict[int, int] = {}
        for i, k in enumerate(keys):
            if k not in state.priors:
                first.setdefault(k, i)
        if first:
            new = list(first.values())
            prior, sd = self._prior_scores(g.with_configs(g.node_config_feat[new]), state)
            if len(state.priors) + len(new) > MAX_PRIORS:
                state.priors.clear()
            state.priors.update(zip(first, zip(prior.tolist(), sd.tolist())))
        both = np.array([state.priors[k] for k in keys], np.float64).reshape(-1, 2)
        return both[:, 0].copy(), both[:, 1].copy()

    def _prior_scores(self, g: Graph, state: GraphState) -> tuple[np.ndarray, np.ndarray]:
        """The seed models' mean score and sd of each config g holds, in g's order."""
        data = self.rows(g, state)
        per_seed = self.per_seed(self.prior(data, state))
        out, spread = np.empty(g.node_config_feat.shape[0]), np.empty(g.node_config_feat.shape[0])
        out[data.config_idx], spread[data.config_idx] = per_seed.mean(axis=0), per_seed.std(axis=0)
        return out, spread

    def _scores(self, g: Graph, state: GraphState) -> tuple[np.ndarray, np.ndarray]:
        data = self.rows(g, state)
        per_seed = self.per_seed(self.prior(data, state))
        score, seed_spread = per_seed.mean(axis=0), per_seed.std(axis=0)
        if state.refinement is not None:
            score = score + state.refinement(data.X, score)
        if state.effects is not None:
            configs = getattr(g, config_key(g.collection))[data.config_idx]
            score, unsure = state.effects.score(configs, score)
            seed_spread = np.hypot(seed_spread, unsure)
        out, spread = np.empty(score.size), np.empty(score.size)
        out[data.config_idx], spread[data.config_idx] = score, seed_spread
        return out, spread

    def per_seed(self, per_model: np.ndarray) -> np.ndarray:
        """(seeds, r) each seed's score: its ranker's, averaged with its partner's where the
        run has them (run_files.load_models lists rankers first, then partners)."""
        partners = sum(is_partner(m) for m in self.models)
        if not partners:
            return per_model
        return (per_model[:-partners] + per_model[-partners:]) / 2

    def update(self, g: Graph, state: GraphState) -> UpdateResult:
        """Add g's configs and runtimes to the measurements and learn from all of them."""
        configs, runtime = getattr(g, config_key(g.collection)), np.asarray(g.config_runtime, np.float64)
        if state.measured is not None:
            configs = np.concatenate([state.measured, configs])
            runtime = np.concatenate([state.runtimes, runtime])
        state.measured, state.runtimes = configs, runtime
        return self.relearn(g, state)

    def relearn(self, g: Graph, state: GraphState) -> UpdateResult:
        """Fit what the graph's measurements teach: node effects (layout) or the booster
        (tile), each over the trained model's score of the measured configs."""
        if not is_tile(g.collection):
            self._grow(g, state)
            prior = self.prior_of(g.with_configs(state.measured), state)[0]
            if state.kinds is None:
                state.kinds = node_kinds(g.node_feat, g.node_opcode, g.edge_index,
                                         g.node_config_ids)
            state.effects, result = layout_update(state.measured, prior, state.runtimes,
                                                  kinds=state.kinds)
            return replace(result, measurements=int(state.runtimes.size))
        data = self.rows(g.with_configs(state.measured), state)
        prior = self.prior(data, state).mean(axis=0)
        state.refinement, result = tile_update(data.X, prior, state.runtimes[data.config_idx])
        return replace(result, measurements=int(state.runtimes.size))

    def _grow(self, g: Graph, state: GraphState) -> None:
        """The graph's tables and scale from its first reference grown with the fastest configs
        measured (reference_growth.py), when the run's statistics follow the reference; rebuilt
        only when those configs change."""
        if self.settings.reference != "file" or not self.growth.applies(g.collection):
            return
        elite = fastest(state.measured, state.runtimes, self.growth.elite)
        keys = tuple(config_keys(elite))
        if keys == state.elite:
            return
        new = self.new_state(g, grown(g, state.configs, elite, self.growth))
        state.static, state.reference, state.slots = new.static, new.reference, new.slots
        state.centre, state.scale = new.centre, new.scale
        state.seen, state.priors, state.elite = new.seen, new.priors, keys
