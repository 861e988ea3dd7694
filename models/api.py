"""A trained run as a cost model an autotuner can call: rank the candidate configs of one graph.

    model = CostModel.load(run_dir)
    ranking = model.rank(node_feat=..., node_opcode=..., edge_index=..., node_config_ids=...,
                         node_splits=..., node_config_feat=candidates)     # (c, nc, 18)
    ranking.order[:10]      # candidate indices, predicted fastest first

Features and models are exactly `submit`'s (features.table.graph_table, models.serving.predict), so a
test file ranks identically through either. An autotuner asks again and again about one graph
with new candidates, so what depends only on the graph is computed once and kept, keyed by the
graph's content (features.table.static_key), for the last `cache_size` graphs.
"""
from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from features import COLLECTIONS, FeatureConfig, Graph
from features.candidate_checks import (InvalidLayoutError, graph_family, invalid_candidates,
                                       refuse_invalid)
from features.candidates import (candidate_kind, candidate_rows, collection_from_path,
                                 graph_from_arrays, npz_keys, read_candidates)
from features.io import DataFormatError
from features.sample import SAMPLE_MARKER
from features.schema import is_tile
from features.table import GraphStatic, graph_static, static_key

from .metrics import TILE_TOP_K, predicted_order
from .serving.predict import StaleRunError, check_signature, collection_models, read_run
from .training.run_files import ensemble_scores

# A layout graph outside the TpuGraphs tree gets the random-search model: random search covers
# the config space evenly, as an autotuner's proposals do, where the genetic 'default' search
# stays close to the compiler default.
DEFAULT_COLLECTION = {"tile": "tile:xla", "layout": "layout:xla:random"}
# What rank does with candidates whose layouts no tensor can have: refuse them, or score them -inf
INVALID_CHOICES = ("error", "score")


class MissingModelError(LookupError, ValueError):
    """The run has no model for the collection asked for (it was trained without it)."""


class SampleTrainedWarning(UserWarning):
    """The run was trained on the generated sample: its scores say nothing about real graphs."""


class FamilyMismatchWarning(UserWarning):
    """The graph looks like the other family (xla vs nlp, by its opcodes) than the model's."""


@dataclass(frozen=True)
class Ranking:
    collection: str
    scores: np.ndarray    # (c,) float64 per candidate, higher = predicted faster
    order: np.ndarray     # (c,) int64 candidate indices, predicted fastest first

    def top(self, k: int | None = None) -> list[tuple[int, float]]:
        """[(candidate index, score)] of the k predicted fastest (all when k is None)."""
        return [(int(i), float(self.scores[i])) for i in self.order[:k]]


class CostModel:
    """Scores candidate configs of a graph with one trained model per collection.

    The within-graph statistics among the features (z-scores of the config features, how often
    each node's layout value occurs) are taken over the configs present, that is, over the
    candidates passed to one call: rank a graph's candidates together, not one at a time."""

    def __init__(self, models: dict[str, list], settings: FeatureConfig, *,
                 cache_size: int = 8, source: str = "", without: tuple[str, ...] = (),
                 trained_on: str = "", trained_on_sample: bool = False):
        self.models, self.settings, self.source = models, settings, source
        self.without = tuple(without)   # feature families the run left out
        self.cache_size = cache_size
        self._static: OrderedDict[str, GraphStatic] = OrderedDict()
        self.cache_hits = self.cache_misses = 0
        self.trained_on, self.trained_on_sample = trained_on, trained_on_sample

    @classmethod
    def load(cls, run_dir: str | Path, *, cache_size: int = 8) -> "CostModel":
        """Every collection's models of a run made by `pipeline.py train`; StaleRunError if the
        run was trained on other feature code or settings than the current ones. `description`
        names the run and its data; a SampleTrainedWarning if that was the generated sample."""
        run_dir = Path(run_dir)
        record = read_run(run_dir)
        check_signature(record, run_dir)    # also for settings this code no longer has
        settings = FeatureConfig(**record["features"]["settings"])
        models = {c: collection_models(run_dir, c) for c in record["metrics"]}
        model = cls(models, settings, cache_size=cache_size, source=str(run_dir),
                    without=tuple(record["train_config"].get("without", ())),
                    trained_on=record["features"].get("data", ""),
                    trained_on_sample=_trained_on_sample(record))
        if model.trained_on_sample:
            warnings.warn(f"{run_dir} was trained on the generated sample ({model.trained_on}): "
                          f"its scores say nothing about real graphs; train on real data",
                          SampleTrainedWarning, stacklevel=2)
        return model

    @property
    def description(self) -> str:
        """Which run this is and what it was trained on, for a log line."""
        sample = " (the generated sample)" if self.trained_on_sample else ""
        return (f"run {self.source or '(in memory)'}, trained on "
                f"{self.trained_on or 'unrecorded data'}{sample}")

    def rank(self, *, node_feat, node_opcode, edge_index, node_config_ids=None,
             node_splits=None, node_config_feat=None, config_feat=None,
             collection: str | None = None, name: str = "graph",
             invalid: str = "error") -> Ranking:
        """Rank candidates given as arrays, named as in the dataset: layout candidates as
        node_config_feat (c, nc, 18) with node_config_ids (nc,), tile ones as config_feat (c, 24).
        No runtimes. `collection` picks the model (default tile:xla / layout:xla:random; a
        FamilyMismatchWarning when the graph looks like the other family); `name` stands for a
        file stem (graph id) and names the input in errors (DataFormatError).

        A layout slot group must be all -1 or a permutation of its tensor's dimensions
        (features.candidate_checks): anything else raises InvalidLayoutError naming the
        candidate, node and group, or with invalid="score" scores -inf and ranks last."""
        arrays = dict(node_feat=node_feat, node_opcode=node_opcode, edge_index=edge_index,
                      node_config_ids=node_config_ids, node_splits=node_splits,
                      node_config_feat=node_config_feat, config_feat=config_feat)
        given = [k for k, v in arrays.items() if v is not None]
        kind = candidate_kind(given, Path(name))
        _check_invalid_choice(invalid)
        g = graph_from_arrays(arrays, self._collection(kind, collection), name=name)
        _warn_on_family(g)
        return self._rank_valid(g, invalid)

    def rank_file(self, path: str | Path, *, collection: str | None = None,
                  invalid: str = "error") -> Ranking:
        """Rank every config of an npz file; config_runtime may be missing or zero. The collection
        comes from `collection`, else the file's place in a TpuGraphs tree, else its keys (a
        FamilyMismatchWarning as in `rank`, except for a file in the tree). `invalid` as in
        `rank`."""
        path = Path(path)
        kind = candidate_kind(npz_keys(path), path)
        _check_invalid_choice(invalid)
        in_tree = None if collection else collection_from_path(path)
        g = read_candidates(path, self._collection(kind, collection or in_tree))
        if in_tree is None:     # the tree's collection is the data's own label, not a guess
            _warn_on_family(g)
        return self._rank_valid(g, invalid)

    def _rank_valid(self, g: Graph, invalid: str) -> Ranking:
        """rank_graph over the candidates with valid layouts; the others refused, or put last
        with score -inf (the valid ones scored as if passed alone)."""
        if is_tile(g.collection):
            return self.rank_graph(g)
        bad = invalid_candidates(g)
        if not bad.any():
            return self.rank_graph(g)
        if invalid == "error":
            refuse_invalid(g, bad)
        scores = np.full(bad.size, -np.inf)
        valid = np.flatnonzero(~bad)
        order = np.zeros(0, np.int64)
        if valid.size:
            part = self.rank_graph(g._replace(node_config_feat=g.node_config_feat[valid],
                                              config_runtime=g.config_runtime[valid]))
            scores[valid] = part.scores
            order = valid[part.order]
        return Ranking(g.collection, scores, np.concatenate([order, np.flatnonzero(bad)]))

    def rank_graph(self, g: Graph) -> Ranking:
        """Rank the configs of a validated test-split Graph (see features.candidates)."""
        data = candidate_rows(g, self.settings, self._graph_static(g)).without(self.without)
        scores = ensemble_scores(self.models[g.collection], data)
        return Ranking(g.collection, scores, data.config_idx[predicted_order(scores)])

    def _graph_static(self, g: Graph) -> GraphStatic:
        key = static_key(g)
        if key in self._static:
            self.cache_hits += 1
            self._static.move_to_end(key)
            return self._static[key]
        self.cache_misses += 1
        static = graph_static(g, self.settings)
        self._static[key] = static
        if len(self._static) > self.cache_size:
            self._static.popitem(last=False)
        return static

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


def _check_invalid_choice(invalid: str) -> None:
    if invalid not in INVALID_CHOICES:
        raise ValueError(f"invalid={invalid!r}: expected one of {INVALID_CHOICES}")


def _warn_on_family(g: Graph) -> None:
    """FamilyMismatchWarning when a layout graph's opcodes say xla and the model is nlp's, or
    the other way round (features.candidate_checks.graph_family)."""
    model_family = g.collection.split(":")[1]
    family = None if is_tile(g.collection) else graph_family(g.node_opcode)
    if family is not None and family != model_family:
        looks = {"xla": "a convolutional (xla) graph", "nlp": "a transformer (nlp) graph"}[family]
        warnings.warn(f"{g.path} looks like {looks} by its opcodes (share of convolutions among "
                      f"its conv and dot nodes) but is ranked by the {g.collection} model; name a "
                      f"layout:{family}:* collection if it is one",
                      FamilyMismatchWarning, stacklevel=3)


def _trained_on_sample(record: dict) -> bool:
    """The run's data was the generated sample: the default fallback (run.json's 'sample'), or
    a tree holding the sample's marker named as --data-dir."""
    if record["features"].get("sample"):
        return True
    data = Path(record["features"].get("data", ""))
    return any((d / SAMPLE_MARKER).is_file() for d in (data, data.parent, data.parent.parent))


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


__all__ = ["DEFAULT_COLLECTION", "CostModel", "DataFormatError", "FamilyMismatchWarning",
           "InvalidLayoutError", "MissingModelError", "Ranking", "SampleTrainedWarning",
           "StaleRunError", "format_ranking"]
