"""A trained run as the cost model of an autotuner: rank candidate configs of a graph, learn from
the configs it measures, save and load what it learnt.

    model = CostModel.load(run_dir)
    graph = dict(node_feat=..., node_opcode=..., edge_index=..., node_config_ids=...,
                 node_splits=...)
    ranking = model.rank(**graph, node_config_feat=candidates)     # (c, nc, 18)
    ranking.order[:10]      # candidate indices, predicted fastest first
    model.update(**graph, node_config_feat=measured, runtimes=seconds)
    model.save(path); CostModel.load(path)

The face is those four verbs; what a model holds is public and read-only: `trained` (the run's
models and settings, trained_run.py), `state()` (what save writes, saved_state.py), `cache`
(the graphs kept, graph_cache.py), `growth` (how a graph's reference grows with its
measurements, and a CNN search's first one with the model's own picks, reference_growth.py;
a load setting, not saved). Ranking a file is
`models.api.rank_file(model, path)`.

Scores mean the same in every call: a config's score depends on the graph and the config, never
on the other candidates. The within-graph statistics among the features and each seed model's
scale come from the graph's reference configs (models/api/graph_state.py), fixed the first time
a graph is seen: `reference=` if given (a uniform sample of the tuner's search space is a good
one), else that call's candidates, unless they are too few (models/api/reference.py); for a
transformer graph of a file-reference run, grown with its measurements (`growth`). Features
and models are `submit`'s, so a test file ranks identically through either. What depends only
on the graph is computed once and kept, keyed by the graph's content, for the last `cache_size`
graphs (graphs with measurements are never dropped).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from features import Graph
from models.api.candidate_checks import (InvalidLayoutError, graph_family, invalid_candidates,
                                         refuse_invalid)
from models.api.candidates import candidate_kind, config_key, graph_from_arrays
from features.npz.graph import DataFormatError
from features.schema import is_tile, program_family

from models.metrics import predicted_order
from models.serving.predict import StaleRunError, check_signature, collection_models
from models.training.run_files import first_seeds
from models.training.run_record import RunRecord
from models.api import saved_state
from models.api.graph_arrays import GraphArrays
from models.api.graph_cache import GraphCache
from models.api.graph_state import GraphState, Scorer, graph_key
from models.api.model_choice import DEFAULT_COLLECTION, MissingModelError, choose_collection
from models.api.reference import (DrawnReferenceWarning, distinct, drawn_message,
                                  shortfall, too_few_message)
from models.api.refine import UpdateResult
from models.api.reference_growth import Growth, model_grown
from models.api.saved_state import LearntGraph, SavedState
from models.api.trained_run import TrainedRun, trained_on_sample
from features.graph.layout_space import REFERENCE_CONFIGS, drawn_reference
from features.rows.table import fixed_reference

# What rank does with candidates whose layouts no tensor can have: refuse them, or score them -inf
INVALID_CHOICES = ("error", "score")


class SampleTrainedWarning(UserWarning):
    """The run was trained on the generated sample: its scores say nothing about real graphs."""


class ReferenceCoverageWarning(UserWarning):
    """Candidates set layout sections the graph's reference never sets (see CostModel.rank)."""


class FamilyMismatchWarning(UserWarning):
    """The graph looks like the other family (xla vs nlp, by its opcodes) than the model's."""


@dataclass(frozen=True)
class Ranking:
    collection: str
    scores: np.ndarray    # (c,) float64 per candidate, higher = predicted faster
    order: np.ndarray     # (c,) int64 candidate indices, predicted fastest first
    spread: np.ndarray    # (c,) how unsure: the seed models' disagreement (0 for one seed),
                          # with a layout graph's node-effects posterior sd once it has
                          # measurements (graph_state.Scorer.scores)

    def top(self, k: int | None = None) -> list[tuple[int, float]]:
        """[(candidate index, score)] of the k predicted fastest (all when k is None)."""
        return [(int(i), float(self.scores[i])) for i in self.order[:k]]


class CostModel:
    """Scores candidate configs of a graph with one trained model per collection."""

    def __init__(self, trained: TrainedRun, *, cache_size: int = 8, growth: Growth = Growth()):
        self.trained = trained
        self.cache = GraphCache(cache_size)
        self.growth = growth    # how a graph's reference grows (reference_growth.py)

    @classmethod
    def load(cls, path: str | Path, *, cache_size: int = 8, seeds: int | None = None,
             growth: Growth = Growth()) -> "CostModel":
        """A run made by `pipeline.py train`, or a model saved by `save` (with its graphs'
        references and measurements); StaleRunError if the run was trained on other feature
        code or settings than the current ones. `description` names the run and its data; a
        SampleTrainedWarning if that was the generated sample. seeds: score with the run's
        first `seeds` seeds only (each seed's model costs time in every call), None: all of
        them; a saved model keeps the seeds it was saved with. growth: how a layout graph's
        reference grows with its measurements, and a search's first reference of a CNN graph
        with the model's own picks (start_reference; models/api/reference_growth.py;
        Growth(elite=0): never)."""
        path = Path(path)
        if saved_state.is_saved(path):
            return cls._load_saved(saved_state.read(path), path, cache_size, seeds, growth)
        record = RunRecord.read(path)
        check_signature(record, path)    # also for settings this code no longer has
        models = {c: first_seeds(collection_models(path, c), seeds) for c in record.collections}
        model = cls(TrainedRun(models, record.feature_config, source=str(path),
                               without=record.without, trained_on=record.trained_on,
                               trained_on_sample=trained_on_sample(record), seeds=seeds),
                    cache_size=cache_size, growth=growth)
        if model.trained.trained_on_sample:
            warnings.warn(f"{path} was trained on the generated sample "
                          f"({model.trained.trained_on}): "
                          f"its scores say nothing about real graphs; train on real data",
                          SampleTrainedWarning, stacklevel=2)
        return model

    @property
    def description(self) -> str:
        """Which run this is and what it was trained on, for a log line."""
        return self.trained.description

    def rank(self, *, node_feat, node_opcode, edge_index, node_config_ids=None,
             node_splits=None, node_config_feat=None, config_feat=None, reference=None,
             collection: str | None = None, name: str = "graph",
             invalid: str = "error") -> Ranking:
        """Rank candidates given as arrays, named as in the dataset: layout candidates as
        node_config_feat (c, nc, 18) with node_config_ids (nc,), tile ones as config_feat (c, 24).
        No runtimes. `reference`: configs (same layout) fixing the graph's statistics, its
        models' scale and which layout sections its tables expect, the first time the graph is
        seen (default: these candidates; it should cover the sections the search varies, else
        a ReferenceCoverageWarning). A reference is never too small (models/api/reference.py):
        a first call of fewer than 20 distinct layouts gets 200 random valid layouts of the
        graph's own space instead (DrawnReferenceWarning), one of fewer than 2 tiles, or too
        small a reference=, is a ValueError saying what to pass. A graph dropped from the cache
        (see `cache_size`) gets a new reference when it comes back, unless `reference=` is
        passed again. A run trained with a fixed reference (FeatureConfig.reference "drawn")
        has its own for every layout graph: reference= changes nothing. `collection` picks the
        model
        (default tile:xla / layout:xla:random; a FamilyMismatchWarning when the graph looks
        like the other family); `name` stands for a file stem (graph id) and names the input in
        errors (DataFormatError).

        A layout slot group must be all -1 or a permutation of its tensor's dimensions
        (models.api.candidate_checks): anything else raises InvalidLayoutError naming the
        candidate, node and group, or with invalid="score" scores -inf and ranks last."""
        check_invalid_choice(invalid)
        graph = GraphArrays(node_feat, node_opcode, edge_index, node_config_ids, node_splits)
        g = self._graph({**graph.kwargs(), "node_config_feat": node_config_feat,
                         "config_feat": config_feat}, collection, name)
        _warn_on_family(g)
        return self._rank_valid(g, invalid, reference)

    def _rank_valid(self, g: Graph, invalid: str, reference=None) -> Ranking:
        """_rank_graph over the candidates with valid layouts; the others refused, or put last
        with score -inf (the valid ones scored as if passed alone: scores do not depend on
        the batch)."""
        bad = np.zeros(0, bool) if is_tile(g.collection) else invalid_candidates(g)
        if not bad.any():
            return self._rank_graph(g, reference)
        if invalid == "error":
            refuse_invalid(g, bad)
        valid = np.flatnonzero(~bad)
        scores, spread = np.full(bad.size, -np.inf), np.zeros(bad.size)
        order = np.zeros(0, np.int64)
        if valid.size:
            part = self._rank_graph(g._replace(node_config_feat=g.node_config_feat[valid],
                                               config_runtime=g.config_runtime[valid]), reference)
            scores[valid], spread[valid] = part.scores, part.spread
            order = valid[part.order]
        return Ranking(g.collection, scores, np.concatenate([order, np.flatnonzero(bad)]), spread)

    def _rank_graph(self, g: Graph, reference=None) -> Ranking:
        """Rank the configs of a validated test-split Graph (see models.api.candidates)."""
        scorer, state = self._state(g, reference)
        if state.slots is not None and np.any(g.slots() > state.slots):
            warnings.warn(f"{g.path}: candidates set layout sections that the graph's reference "
                          f"({state.origin}) never sets; the graph's tables follow the "
                          f"reference: pass a reference= that covers what the search varies",
                          ReferenceCoverageWarning, stacklevel=3)
        scores, spread = scorer.scores(g, state)
        return Ranking(g.collection, scores, predicted_order(scores), spread)

    def update(self, *, runtimes, node_feat, node_opcode, edge_index, node_config_ids=None,
               node_splits=None, node_config_feat=None, config_feat=None, reference=None,
               collection: str | None = None, name: str = "graph") -> UpdateResult:
        """Learn from measured configs of a graph (arrays as in `rank`, `runtimes` (c,) in any
        unit, lower = faster): later scores of this graph start from the trained model and
        move towards what was measured, more as measurements accumulate (layout: what each
        node's layout adds to the runtime, models/api/node_effects.py; tile: a booster over
        the score, refine.py). `reference` as in `rank` (used only when the graph is new; else
        the measured configs become its reference). Returns an UpdateResult: the graph's
        measurements so far, how many the learner used, which learner, its weight, and why
        they were used or set aside."""
        graph = GraphArrays(node_feat, node_opcode, edge_index, node_config_ids, node_splits)
        g = self._graph({**graph.kwargs(), "node_config_feat": node_config_feat,
                         "config_feat": config_feat}, collection, name)
        runtimes = _runtimes(runtimes, g, name)
        _refuse_invalid(g)
        scorer, state = self._state(g, reference)
        return scorer.update(g.with_configs(getattr(g, config_key(g.collection)), runtimes),
                             state)

    def save(self, path: str | Path) -> Path:
        """The run's models, and every graph's reference and measurements, in one directory
        (native LightGBM/XGBoost files, npz arrays, JSON); CostModel.load(path) restores it."""
        return saved_state.write(self.state(), Path(path))

    def state(self) -> SavedState:
        """What save writes and load restores: the run, and each graph kept (self.cache) with
        its reference, measurements and tile booster."""
        graphs = tuple(LearntGraph(GraphArrays.of_graph(g), g.collection, g.graph_id, s.configs,
                                   s.measured, s.runtimes, s.refinement) for g, s in self.cache)
        return SavedState(self.trained.source, self.trained.source, self.trained.seeds, graphs)

    @classmethod
    def _load_saved(cls, saved: SavedState, path: Path, cache_size: int,
                    seeds: int | None, growth: Growth) -> "CostModel":
        if seeds is not None and seeds != saved.seeds:   # its refinements fit those seeds
            raise ValueError(f"{path} was saved with seeds={saved.seeds}; load it without "
                             f"seeds=, or load its run ({saved.trained_run}) with seeds={seeds}")
        model = cls.load(saved.run, cache_size=max(cache_size, len(saved.graphs)),
                         seeds=saved.seeds, growth=growth)
        for learnt in saved.graphs:
            model._restore(learnt)
        model.cache.hits = model.cache.misses = 0
        return model

    def _restore(self, learnt: LearntGraph) -> None:
        """A saved graph's state, taken as it was: its reference as saved (the first one), its
        growth and node effects refit from its measurements (functions of them), its booster
        as saved."""
        g = self._graph({**learnt.arrays.kwargs(), config_key(learnt.collection): learnt.reference},
                        learnt.collection, learnt.name)
        scorer, state = self._state(g, learnt.reference, restore=True)
        if learnt.measured is not None:
            state.measured, state.runtimes = learnt.measured, learnt.runtimes
            if not is_tile(g.collection):
                scorer.relearn(g, state)
        if learnt.refinement is not None:
            state.refinement = learnt.refinement

    def _graph(self, arrays: dict, collection: str | None, name: str) -> Graph:
        given = [k for k, v in arrays.items() if v is not None]
        kind = candidate_kind(given, Path(name))
        chosen = choose_collection(self.trained.models, kind, collection, self.trained.source)
        return graph_from_arrays(arrays, chosen, name=name)

    def _state(self, g: Graph, reference, restore: bool = False) -> tuple[Scorer, GraphState]:
        scorer = self._scorer(g.collection)
        key = graph_key(g)
        state = self.cache.get(key)
        if state is not None:
            return scorer, state
        configs, origin = self._reference(g, reference, restore)
        state = scorer.new_state(g, configs)
        state.origin = origin
        self.cache.keep(key, g, state)
        return scorer, state

    def _scorer(self, collection: str) -> Scorer:
        return Scorer(self.trained.models[collection], self.trained.settings,
                      self.trained.without, self.growth)

    def _reference(self, g: Graph, reference, restore: bool = False) -> tuple[np.ndarray, str]:
        """(the configs fixing a new graph's statistics, where they came from): reference=,
        else the call's own configs, else, when those are too few (models/api/reference.py),
        layouts drawn from the graph's space (with a warning) or, for tile, an error; a run
        whose rows had a fixed reference (FeatureConfig.reference) has it for every graph.
        restore: a saved model's reference, taken as it is."""
        own = getattr(g, config_key(g.collection))
        fixed = fixed_reference(g, self.trained.settings)
        if fixed is not None:    # the run's rows were set against it: it is every graph's
            return (fixed.node_config_feat,
                    f"the run's fixed reference ({REFERENCE_CONFIGS} drawn layouts)")
        if reference is None:
            need = shortfall(g, own)
            if not need:
                return own, f"the {len(own)} configs of its first call"
            if is_tile(g.collection):
                raise ValueError(too_few_message(g, distinct(own), need, given=False))
            warnings.warn(drawn_message(g, distinct(own), need), DrawnReferenceWarning,
                          stacklevel=5)
            return (self._checked(g, drawn_reference(g)),
                    f"{REFERENCE_CONFIGS} layouts drawn from its layout space")
        configs = self._checked(g, reference)
        need = 0 if restore else shortfall(g, configs)
        if need:
            raise ValueError(too_few_message(g, distinct(configs), need, given=True))
        return configs, f"the {len(configs)} configs passed as reference="

    def _checked(self, g: Graph, reference) -> np.ndarray:
        """reference configs validated as g's (DataFormatError, InvalidLayoutError)."""
        arrays = {**GraphArrays.of_graph(g).kwargs(), config_key(g.collection): reference}
        ref = self._graph(arrays, g.collection, f"{g.graph_id} reference")
        _refuse_invalid(ref)
        return getattr(ref, config_key(g.collection))


def fresh(model: CostModel, models: dict | None = None) -> CostModel:
    """The same trained models (or `models`, collection -> models, in their place: one seed's,
    a fold's) and settings with nothing learnt (no graph seen): where every search of an
    evaluation starts."""
    trained = model.trained if models is None else replace(model.trained, models=models)
    return CostModel(trained, cache_size=model.cache.size, growth=model.growth)


def start_reference(model: CostModel, graph: GraphArrays, reference: np.ndarray,
                    collection: str, name: str = "graph") -> np.ndarray:
    """The reference a search starting from `reference` (layouts it drew) gives `model` for the
    graph: grown by the model's own picks (reference_growth.model_grown) for a file-reference
    run's graphs of the families model.growth names, else `reference` itself. The model
    keeps nothing of it: each step is scored as a model that never saw the graph would."""
    g = model._graph({**graph.kwargs(), "node_config_feat": reference, "config_feat": None},
                     collection, name)
    if model.trained.settings.reference != "file" or not model.growth.starts(g.collection):
        return reference
    _refuse_invalid(g)
    scorer = model._scorer(g.collection)

    def score(configs: np.ndarray) -> np.ndarray:
        ref = g.with_configs(configs)
        return scorer.prior_of(ref, scorer.new_state(ref, configs))[0]
    return model_grown(g, g.node_config_feat, score, model.growth)


def _refuse_invalid(g: Graph) -> None:
    """InvalidLayoutError for layout configs no tensor can have (references, measurements)."""
    if not is_tile(g.collection):
        bad = invalid_candidates(g)
        if bad.any():
            refuse_invalid(g, bad)


def check_invalid_choice(invalid: str) -> None:
    if invalid not in INVALID_CHOICES:
        raise ValueError(f"invalid={invalid!r}: expected one of {INVALID_CHOICES}")


def _warn_on_family(g: Graph) -> None:
    """FamilyMismatchWarning when a layout graph's opcodes say xla and the model is nlp's, or
    the other way round (models.api.candidate_checks.graph_family)."""
    model_family = program_family(g.collection)
    family = None if is_tile(g.collection) else graph_family(g.node_opcode)
    if family is not None and family != model_family:
        looks = {"xla": "a convolutional (xla) graph", "nlp": "a transformer (nlp) graph"}[family]
        warnings.warn(f"{g.path} looks like {looks} by its opcodes (share of convolutions among "
                      f"its conv and dot nodes) but is ranked by the {g.collection} model; name a "
                      f"layout:{family}:* collection if it is one",
                      FamilyMismatchWarning, stacklevel=3)


def _runtimes(runtimes, g: Graph, name: str) -> np.ndarray:
    r = np.asarray(runtimes, np.float64)
    c = getattr(g, config_key(g.collection)).shape[0]
    if r.shape != (c,) or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(f"{name}: runtimes must be {c} finite positive numbers, one per "
                         f"measured config; got shape {r.shape}")
    return r


__all__ = ["DEFAULT_COLLECTION", "CostModel", "DataFormatError", "DrawnReferenceWarning",
           "FamilyMismatchWarning",
           "InvalidLayoutError", "MissingModelError", "Ranking", "ReferenceCoverageWarning",
           "SampleTrainedWarning",
           "StaleRunError", "fresh"]
