"""A trained run as the cost model of an autotuner: rank candidate configs of a graph, learn from
the configs it measures, save and load what it learnt.

    model = CostModel.load(run_dir)
    graph = dict(node_feat=..., node_opcode=..., edge_index=..., node_config_ids=...,
                 node_splits=...)
    ranking = model.rank(**graph, node_config_feat=candidates)     # (c, nc, 18)
    ranking.order[:10]      # candidate indices, predicted fastest first
    model.update(**graph, node_config_feat=measured, runtimes=seconds)
    model.save(path); CostModel.load(path)

Scores mean the same in every call: a config's score depends on the graph and the config, never
on the other candidates. The within-graph statistics among the features and each seed model's
scale come from the graph's reference configs (models/api/graph_state.py), fixed the first time
a graph is seen: `reference=` if given (a uniform sample of the tuner's search space is a good
one), else that call's candidates, unless they are too few (models/api/reference.py). Features
and models are `submit`'s, so a test file ranks identically through either. What depends only
on the graph is computed once and kept, keyed by the graph's content, for the last `cache_size`
graphs (graphs with measurements are never dropped).
"""
from __future__ import annotations

import json
import os
import shutil
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from features import COLLECTIONS, FeatureConfig, Graph
from models.api.candidate_checks import (InvalidLayoutError, graph_family, invalid_candidates,
                                         refuse_invalid)
from models.api.candidates import (GRAPH_KEYS, candidate_kind, collection_from_path, config_key,
                                   graph_arrays, graph_from_arrays, is_program_text, npz_keys,
                                   read_candidates, read_program_candidates)
from features.npz.graph import DataFormatError
from features.outputs import check_dir
from models.sample.generate import SAMPLE_MARKER
from features.schema import is_tile

from models.metrics import TILE_TOP_K, predicted_order
from models.serving.predict import StaleRunError, check_signature, collection_models
from models.training.run_files import first_seeds
from models.training.run_record import RunRecord
from models.api.graph_state import GraphState, Scorer, graph_key
from models.api.reference import (DRAWN, DrawnReferenceWarning, distinct, drawn_message,
                                  shortfall, too_few_message)
from models.api.refine import Refinement, UpdateResult
from features.graph.layout_space import drawn_reference
from features.rows.table import fixed_reference

# A layout graph outside the TpuGraphs tree gets the random-search model: random search covers
# the config space evenly, as an autotuner's proposals do, where the genetic 'default' search
# stays close to the compiler default.
DEFAULT_COLLECTION = {"tile": "tile:xla", "layout": "layout:xla:random"}
# A program's own layouts (`tune PROGRAM`, `rank PROGRAM.hlo --configs`) get its family's
# 'default' collection model, the one default for programs: tune searches from the compiler
# default, as the dataset's genetic 'default' search did, and rank is given what tune writes;
# the family's 'random' model where the run lacks it.
PROGRAM_SEARCHES = ("default", "random")
SAVED = "cost_model.json"
# What rank does with candidates whose layouts no tensor can have: refuse them, or score them -inf
INVALID_CHOICES = ("error", "score")


class MissingModelError(LookupError, ValueError):
    """The run has no model for the collection asked for (it was trained without it)."""


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

    def __init__(self, models: dict[str, list], settings: FeatureConfig, *,
                 cache_size: int = 8, source: str = "", without: tuple[str, ...] = (),
                 trained_on: str = "", trained_on_sample: bool = False,
                 seeds: int | None = None):
        self.models, self.settings, self.source = models, settings, source
        self.without = tuple(without)   # feature families the run left out
        self.cache_size = cache_size
        self._graphs: OrderedDict[str, tuple[Graph, GraphState]] = OrderedDict()
        self.cache_hits = self.cache_misses = 0
        self.trained_on, self.trained_on_sample = trained_on, trained_on_sample
        self.seeds = seeds    # load's choice of the run's seeds (None: all), kept by save

    @classmethod
    def load(cls, path: str | Path, *, cache_size: int = 8,
             seeds: int | None = None) -> "CostModel":
        """A run made by `pipeline.py train`, or a model saved by `save` (with its graphs'
        references and measurements); StaleRunError if the run was trained on other feature
        code or settings than the current ones. `description` names the run and its data; a
        SampleTrainedWarning if that was the generated sample. seeds: score with the run's
        first `seeds` seeds only (each seed's model costs time in every call), None: all of
        them; a saved model keeps the seeds it was saved with."""
        path = Path(path)
        if (path / SAVED).is_file():
            return _load_saved(cls, path, cache_size, seeds)
        record = RunRecord.read(path)
        check_signature(record, path)    # also for settings this code no longer has
        models = {c: first_seeds(collection_models(path, c), seeds) for c in record.collections}
        model = cls(models, record.feature_config, cache_size=cache_size, source=str(path),
                    without=record.without, trained_on=record.trained_on,
                    trained_on_sample=_trained_on_sample(record), seeds=seeds)
        if model.trained_on_sample:
            warnings.warn(f"{path} was trained on the generated sample ({model.trained_on}): "
                          f"its scores say nothing about real graphs; train on real data",
                          SampleTrainedWarning, stacklevel=2)
        return model

    def fresh(self) -> "CostModel":
        """The same trained models with nothing learnt (no graph seen): where every search
        of an evaluation starts."""
        return CostModel(self.models, self.settings, cache_size=self.cache_size,
                         source=self.source, without=self.without, trained_on=self.trained_on,
                         trained_on_sample=self.trained_on_sample, seeds=self.seeds)

    @property
    def description(self) -> str:
        """Which run this is and what it was trained on, for a log line."""
        sample = " (the generated sample)" if self.trained_on_sample else ""
        return (f"run {self.source or '(in memory)'}, trained on "
                f"{self.trained_on or 'unrecorded data'}{sample}")

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
        passed again. `collection` picks the model
        (default tile:xla / layout:xla:random; a FamilyMismatchWarning when the graph looks
        like the other family); `name` stands for a file stem (graph id) and names the input in
        errors (DataFormatError).

        A layout slot group must be all -1 or a permutation of its tensor's dimensions
        (models.api.candidate_checks): anything else raises InvalidLayoutError naming the
        candidate, node and group, or with invalid="score" scores -inf and ranks last."""
        _check_invalid_choice(invalid)
        g = self._graph(dict(node_feat=node_feat, node_opcode=node_opcode, edge_index=edge_index,
                             node_config_ids=node_config_ids, node_splits=node_splits,
                             node_config_feat=node_config_feat, config_feat=config_feat),
                        collection, name)
        _warn_on_family(g)
        return self._rank_valid(g, invalid, reference)

    def rank_file(self, path: str | Path, *, collection: str | None = None,
                  invalid: str = "error", configs: str | Path | None = None) -> Ranking:
        """Rank every config of an npz file; config_runtime may be missing or zero. The collection
        comes from `collection`, else the file's place in a TpuGraphs tree, else its keys (a
        FamilyMismatchWarning as in `rank`, except for a file in the tree). `invalid` as in
        `rank`. A program's HLO text (any file but an npz) is ranked on the layouts in
        `configs` (a .npy of (c, nc, 18), or an npz holding node_config_feat)."""
        path = Path(path)
        _check_invalid_choice(invalid)
        if is_program_text(path):   # the same checks and ranking as a file's candidates
            g = read_program_candidates(path, configs, lambda opcodes: self._collection(
                "layout", collection or self.program_collection(opcodes)))
            _warn_on_family(g)
            return self._rank_valid(g, invalid)
        if configs is not None:
            raise ValueError(f"{path} is an npz file, which holds its own configs; configs= "
                             f"(--configs) goes with a program's HLO text")
        kind = candidate_kind(npz_keys(path), path)
        in_tree = None if collection else collection_from_path(path)
        g = read_candidates(path, self._collection(kind, collection or in_tree))
        if in_tree is None:     # the tree's collection is the data's own label, not a guess
            _warn_on_family(g)
        return self._rank_valid(g, invalid)

    def _rank_valid(self, g: Graph, invalid: str, reference=None) -> Ranking:
        """rank_graph over the candidates with valid layouts; the others refused, or put last
        with score -inf (the valid ones scored as if passed alone: scores do not depend on
        the batch)."""
        bad = np.zeros(0, bool) if is_tile(g.collection) else invalid_candidates(g)
        if not bad.any():
            return self.rank_graph(g, reference)
        if invalid == "error":
            refuse_invalid(g, bad)
        valid = np.flatnonzero(~bad)
        scores, spread = np.full(bad.size, -np.inf), np.zeros(bad.size)
        order = np.zeros(0, np.int64)
        if valid.size:
            part = self.rank_graph(g._replace(node_config_feat=g.node_config_feat[valid],
                                              config_runtime=g.config_runtime[valid]), reference)
            scores[valid], spread[valid] = part.scores, part.spread
            order = valid[part.order]
        return Ranking(g.collection, scores, np.concatenate([order, np.flatnonzero(bad)]), spread)

    def rank_graph(self, g: Graph, reference=None) -> Ranking:
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
        g = self._graph(dict(node_feat=node_feat, node_opcode=node_opcode, edge_index=edge_index,
                             node_config_ids=node_config_ids, node_splits=node_splits,
                             node_config_feat=node_config_feat, config_feat=config_feat),
                        collection, name)
        runtimes = _runtimes(runtimes, g, name)
        _refuse_invalid(g)
        scorer, state = self._state(g, reference)
        return scorer.update(g.with_configs(getattr(g, config_key(g.collection)), runtimes),
                             state)

    def save(self, path: str | Path) -> Path:
        """The run's models, and every graph's reference and measurements, in one directory
        (native LightGBM/XGBoost files, npz arrays, JSON); CostModel.load(path) restores it."""
        return _save(self, Path(path))

    def _graph(self, arrays: dict, collection: str | None, name: str) -> Graph:
        given = [k for k, v in arrays.items() if v is not None]
        kind = candidate_kind(given, Path(name))
        return graph_from_arrays(arrays, self._collection(kind, collection), name=name)

    def _state(self, g: Graph, reference, restore: bool = False) -> tuple[Scorer, GraphState]:
        scorer = Scorer(self.models[g.collection], self.settings, self.without)
        key = graph_key(g)
        if key in self._graphs:
            self.cache_hits += 1
            self._graphs.move_to_end(key)
            return scorer, self._graphs[key][1]
        self.cache_misses += 1
        configs, origin = self._reference(g, reference, restore)
        state = scorer.new_state(g, configs)
        state.origin = origin
        self._keep(key, g, state)
        return scorer, state

    def _reference(self, g: Graph, reference, restore: bool = False) -> tuple[np.ndarray, str]:
        """(the configs fixing a new graph's statistics, where they came from): reference=,
        else the call's own configs, else, when those are too few (models/api/reference.py),
        layouts drawn from the graph's space (with a warning) or, for tile, an error; a run
        whose rows had a fixed reference (FeatureConfig.reference) has it for every graph.
        restore: a saved model's reference, taken as it is."""
        own = getattr(g, config_key(g.collection))
        fixed = fixed_reference(g, self.settings)
        if fixed is not None:    # the run's rows were set against it: it is every graph's
            return fixed.node_config_feat, f"the run's fixed reference ({DRAWN} drawn layouts)"
        if reference is None:
            need = shortfall(g, own)
            if not need:
                return own, f"the {len(own)} configs of its first call"
            if is_tile(g.collection):
                raise ValueError(too_few_message(g, distinct(own), need, given=False))
            warnings.warn(drawn_message(g, distinct(own), need), DrawnReferenceWarning,
                          stacklevel=5)
            return self._checked(g, drawn_reference(g)), f"{DRAWN} layouts drawn from its layout space"
        configs = self._checked(g, reference)
        need = 0 if restore else shortfall(g, configs)
        if need:
            raise ValueError(too_few_message(g, distinct(configs), need, given=True))
        return configs, f"the {len(configs)} configs passed as reference="

    def _checked(self, g: Graph, reference) -> np.ndarray:
        """reference configs validated as g's (DataFormatError, InvalidLayoutError)."""
        ref = self._graph({**graph_arrays(g), config_key(g.collection): reference}, g.collection,
                          f"{g.graph_id} reference")
        _refuse_invalid(ref)
        return getattr(ref, config_key(g.collection))

    def _keep(self, key: str, g: Graph, state: GraphState) -> None:
        self._graphs[key] = (g, state)
        for old in list(self._graphs):
            if len(self._graphs) <= self.cache_size:
                break
            # what was learnt is never dropped, nor the graph asked about now
            if old != key and self._graphs[old][1].measured is None:
                del self._graphs[old]

    def program_collection(self, node_opcode: np.ndarray) -> str:
        """The model for a program's own layouts: its family's (xla or nlp, by its opcodes)
        first of PROGRAM_SEARCHES the run has, else DEFAULT_COLLECTION's layout model."""
        family = graph_family(np.asarray(node_opcode)) or "xla"
        return next((f"layout:{family}:{search}" for search in PROGRAM_SEARCHES
                     if f"layout:{family}:{search}" in self.models), DEFAULT_COLLECTION["layout"])

    def _collection(self, kind: str, collection: str | None) -> str:
        chosen = collection or DEFAULT_COLLECTION[kind]
        if chosen not in COLLECTIONS:
            raise ValueError(f"unknown collection {chosen!r}; expected one of {COLLECTIONS}")
        if chosen.split(":")[0] != kind:
            raise ValueError(f"{kind} candidates cannot be ranked by the {chosen} model")
        if chosen not in self.models:
            raise MissingModelError(f"{self.source or 'this model'} has no model for {chosen}; "
                                    f"it has {sorted(self.models)}")
        return chosen


def _refuse_invalid(g: Graph) -> None:
    """InvalidLayoutError for layout configs no tensor can have (references, measurements)."""
    if not is_tile(g.collection):
        bad = invalid_candidates(g)
        if bad.any():
            refuse_invalid(g, bad)


def _check_invalid_choice(invalid: str) -> None:
    if invalid not in INVALID_CHOICES:
        raise ValueError(f"invalid={invalid!r}: expected one of {INVALID_CHOICES}")


def _warn_on_family(g: Graph) -> None:
    """FamilyMismatchWarning when a layout graph's opcodes say xla and the model is nlp's, or
    the other way round (models.api.candidate_checks.graph_family)."""
    model_family = g.collection.split(":")[1]
    family = None if is_tile(g.collection) else graph_family(g.node_opcode)
    if family is not None and family != model_family:
        looks = {"xla": "a convolutional (xla) graph", "nlp": "a transformer (nlp) graph"}[family]
        warnings.warn(f"{g.path} looks like {looks} by its opcodes (share of convolutions among "
                      f"its conv and dot nodes) but is ranked by the {g.collection} model; name a "
                      f"layout:{family}:* collection if it is one",
                      FamilyMismatchWarning, stacklevel=3)


def _trained_on_sample(record: RunRecord) -> bool:
    """The run's data was the generated sample: the default fallback (run.json's 'sample'), or
    a tree holding the sample's marker named as --data-dir."""
    if record.features.sample:
        return True
    data = Path(record.trained_on)
    return any((d / SAMPLE_MARKER).is_file() for d in (data, data.parent, data.parent.parent))


def _runtimes(runtimes, g: Graph, name: str) -> np.ndarray:
    r = np.asarray(runtimes, np.float64)
    c = getattr(g, config_key(g.collection)).shape[0]
    if r.shape != (c,) or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(f"{name}: runtimes must be {c} finite positive numbers, one per "
                         f"measured config; got shape {r.shape}")
    return r


def _save(model: CostModel, path: Path) -> Path:
    if not model.source:
        raise ValueError("save: this CostModel was not loaded from a run directory")
    check_dir(path, replaced=True)     # a file there, a file above it, or no write access
    if path.exists() and not (path / SAVED).is_file():
        raise FileExistsError(f"save: {path} exists and is not a saved cost model; not replacing it")
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(model.source, tmp / "run")
    graphs = []
    for i, (g, state) in enumerate(model._graphs.values()):
        arrays = {**graph_arrays(g), "reference": state.configs}
        if state.measured is not None:
            arrays.update(measured=state.measured, runtimes=state.runtimes)
        np.savez(tmp / f"graph-{i}.npz", **arrays)
        if state.refinement is not None:
            state.refinement.save(tmp / f"graph-{i}.refine.txt")
        graphs.append({"file": f"graph-{i}.npz", "collection": g.collection, "name": g.graph_id,
                       "refinement_weight": None if state.refinement is None
                       else state.refinement.weight})
    (tmp / SAVED).write_text(json.dumps({"run": "run", "trained_run": model.source,
                                         "seeds": model.seeds, "graphs": graphs}, indent=1))
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)
    return path


def _load_saved(cls, path: Path, cache_size: int, seeds: int | None) -> CostModel:
    record = json.loads((path / SAVED).read_text())
    if seeds is not None and seeds != record.get("seeds"):   # its refinements fit those seeds
        raise ValueError(f"{path} was saved with seeds={record.get('seeds')}; load it without "
                         f"seeds=, or load its run ({record['trained_run']}) with seeds={seeds}")
    model = cls.load(path / record["run"], cache_size=max(cache_size, len(record["graphs"])),
                     seeds=record.get("seeds"))
    for entry in record["graphs"]:
        with np.load(path / entry["file"]) as z:
            arrays = {k: z[k] for k in z.files}
        g = model._graph({**{k: arrays[k] for k in GRAPH_KEYS if k in arrays},
                          config_key(entry["collection"]): arrays["reference"]},
                         entry["collection"], entry["name"])
        scorer, state = model._state(g, arrays["reference"], restore=True)
        if "measured" in arrays:
            state.measured, state.runtimes = arrays["measured"], arrays["runtimes"]
            if not is_tile(g.collection):    # node effects are refit: a function of these
                scorer.relearn(g, state)
        if entry["refinement_weight"] is not None:
            state.refinement = Refinement.load(path / entry["file"].replace(".npz", ".refine.txt"),
                                               entry["refinement_weight"])
    model.cache_hits = model.cache_misses = 0
    return model


def format_ranking(ranking: Ranking, *, top: int | None = None, as_json: bool = False) -> str:
    """The top configs (default: 5 for tile, all for layout) as a table or as JSON."""
    if top is None and is_tile(ranking.collection):
        top = TILE_TOP_K
    picks = ranking.top(top)
    if as_json:
        return json.dumps({"collection": ranking.collection,
                           "n_candidates": int(ranking.order.size),
                           "configs": [i for i, _ in picks], "scores": [s for _, s in picks]})
    lines = [f"{ranking.collection}: {len(picks)} of {ranking.order.size} configs, "
             f"predicted fastest first (score: higher = faster)",
             f"{'rank':>5} {'config':>7} {'score':>8}"]
    lines += [f"{r:>5} {i:>7} {s:>8.4f}" for r, (i, s) in enumerate(picks, 1)]
    return "\n".join(lines)


__all__ = ["DEFAULT_COLLECTION", "CostModel", "DataFormatError", "DrawnReferenceWarning",
           "FamilyMismatchWarning",
           "InvalidLayoutError", "MissingModelError", "Ranking", "ReferenceCoverageWarning",
           "SampleTrainedWarning",
           "StaleRunError", "format_ranking"]
