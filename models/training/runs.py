"""Training runs: one model (per seed) per collection, validated per graph, saved with provenance.

A run directory holds <collection>/seed-<i>/ native model files + params.json (layout also
the seed's partner: node-<i>/, its node learner, or regression-<i>/), and run.json
(models/training/run_record.py) recording the feature signature and cache keys, ranker
settings, seeds, library versions and every validation score. `submit` reads it back and
refuses models built on other features.
"""
from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from functools import reduce
from pathlib import Path

import numpy as np

from features import FeatureConfig, FeatureSet, load_entry, split_parts
from features.rows.feature_set import FEATURE_FAMILIES
from features.cache.signature import code_digest, imported_modules
from features.cache.store import atomic_dir, fingerprint
from features.cache.integrity import file_sum
from features.versions import library_versions
from features.npz.find import collection_dir
from models.overrides import at_least

from features.schema import collection_kind, collection_slug

from models.training import RANKERS, diagnostics
from models import metrics
from models.training.base import apply_overrides
from models.training.binned import BinnedRows, bin_rows, feature_columns
from models.training.lgbm import (REGRESSION_DEFAULTS, LightGBMRanker, RegressionParams,
                                  RegressionPartner, TreeParams)
from models.training.node_learner import NODE_COLLECTIONS, NodeModel, NodeParams
from models.training.run_files import mean_normalized, partner_kind
from models.training.run_record import RunFeatures, RunRecord
from models.training.family_split import family_folds, fit_family_stopped

MODELS_DIR = Path(__file__).resolve().parents[1]
N_RANDOM_ORDERS = 5
# Ranker parameters a run sets itself, so an override of them would be ignored: -> the option.
RUN_SET_PARAMS = {"seed": "--seed"}
# Collections where each lambdarank seed has a regression partner averaged in (as the node
# learner is on NODE_COLLECTIONS): family CV on the dev set chose both (docs/records/)
REGRESSION_PARTNER_COLLECTIONS = ("layout:xla:random", "layout:nlp:random")
# A split's rows, or the cache entry they are loaded from when training needs them, so `train`
# holds one collection's matrices at a time instead of every collection's.
Split = FeatureSet | Path


@dataclass(frozen=True)
class DemoSchedule:
    """`train` on the generated sample (no data found): the real code path on a short schedule.
    The sample's scores say nothing about real graphs, so the demo shows the whole path in
    seconds instead of the minutes of the full schedule (TrainConfig's), which real data keeps.
    A run on it records train_config.demo, its seeds, and each model's rounds in run.json."""
    seeds: int = 1
    rounds: int = 40           # n_estimators of every model: ranker, node learner, regression
    early_stopping: int = 10   # the early-stopped ones' patience

    def capped(self, params):
        """params (a ranker's or partner's settings) with the demo's rounds."""
        short = {"n_estimators": min(params.n_estimators, self.rounds),
                 "early_stopping": min(getattr(params, "early_stopping", 0), self.early_stopping)}
        return replace(params, **{k: v for k, v in short.items() if hasattr(params, k)})


DEMO = DemoSchedule()


@dataclass(frozen=True)
class TrainConfig:
    ranker: str = "lambdarank"
    # models per collection, their normalised scores averaged: 3 seeds hedge one seed's bad pick
    # (tile: a kernel at 0.65 for one seed, never below 0.88 for three; records, r34)
    seeds: int = 3
    seed: int = 0               # first seed; model i uses seed + i
    folds: int = 0              # >1: also cross-validate over the train and valid graphs,
                                # whole families held out per fold (>= families: one each)
    overrides: dict = field(default_factory=dict)   # ranker params, e.g. {"num_leaves": 63}
    without: tuple[str, ...] = ()   # feature families left out (ablation), see FEATURE_FAMILIES
    allow_no_valid: bool = False  # train collections without usable validation graphs
    # beside each seed's ranker, a partner whose scores are averaged in: a node learner
    # (node_learner.py) on NODE_COLLECTIONS, a regression beside lambdarank on
    # REGRESSION_PARTNER_COLLECTIONS; False: the ranker alone
    partners: bool = True
    demo: bool = False          # DEMO's schedule (the generated sample), not the full one

    def __post_init__(self):
        if self.ranker not in RANKERS:
            raise ValueError(f"unknown ranker {self.ranker!r}; choose from {sorted(RANKERS)}")
        at_least(self, seeds=1, seed=0, folds=0)
        if self.folds == 1:
            raise ValueError("folds must be 0 (no cross-validation) or at least 2, got 1")
        ignored = sorted(set(self.overrides) & set(RUN_SET_PARAMS))
        if ignored:
            raise ValueError(f"{ignored} cannot be overridden: the run sets them "
                             f"({', '.join(RUN_SET_PARAMS[k] for k in ignored)})")
        for defaults in RANKERS[self.ranker][1].values():   # bad keys or values fail here
            apply_overrides(defaults, self.overrides)
        unknown = sorted(set(self.without) - set(FEATURE_FAMILIES))
        if unknown:
            raise ValueError(f"unknown feature families {unknown}; "
                             f"known: {sorted(FEATURE_FAMILIES)}")

    def params_for(self, collection: str):
        _, defaults = RANKERS[self.ranker]
        return apply_overrides(self.scheduled(defaults[collection_kind(collection)]),
                               self.overrides)

    def node_params(self, collection: str) -> NodeParams | None:
        """The node learner's settings for a collection, None where it has none."""
        if not self.partners or collection not in NODE_COLLECTIONS:
            return None
        return self.scheduled(NodeParams(num_threads=self.params_for(collection).num_threads))

    def regression_partner(self, collection: str) -> RegressionParams | None:
        """The regression partner's settings for a collection, None where it has none."""
        if (not self.partners or self.ranker != "lambdarank"
                or collection not in REGRESSION_PARTNER_COLLECTIONS):
            return None
        return self.scheduled(replace(REGRESSION_DEFAULTS[collection_kind(collection)],
                                      num_threads=self.params_for(collection).num_threads))

    def scheduled(self, params):
        """A model's default settings on this run's schedule (--set overrides come after)."""
        return DEMO.capped(params) if self.demo else params


def on_schedule(cfg: TrainConfig, sample: bool, seeds: int | None) -> TrainConfig:
    """cfg on the schedule its data calls for: DEMO's on the generated sample, the full one on
    real data; `seeds` (given on the command line, None: not) win over either's."""
    if sample:
        cfg = replace(cfg, demo=True, seeds=DEMO.seeds)
    return cfg if seeds is None else replace(cfg, seeds=seeds)


def schedule_line(cfg: TrainConfig) -> str:
    """What a demo run says before it trains."""
    full = TreeParams()
    return (f"a demo schedule on the generated sample: {cfg.seeds} seed(s), at most "
            f"{DEMO.rounds} rounds a model (early stopping after {DEMO.early_stopping}); real "
            f"data (--data-dir) trains the full schedule ({TrainConfig.seeds} seeds, up to "
            f"{full.n_estimators} rounds a ranker)")


@dataclass
class CollectionResult:
    collection: str
    per_graph: np.ndarray       # NaN for graphs that cannot be scored
    random_per_graph: np.ndarray
    seed_per_graph: np.ndarray  # (seeds, graphs): each seed model's own per-graph score
    graph_ids: tuple[str, ...]
    seconds: float
    cv_graph_ids: tuple[str, ...] = ()
    cv_per_graph: np.ndarray | None = None   # (seeds, cv_pool graphs), see cross_validate
    ranker_seed_means: list[float] = field(default_factory=list)  # each seed's ranker alone,
                                                                  # without its partner
    rounds: list[int] = field(default_factory=list)  # per seed, chosen on held-out families
    default_per_graph: np.ndarray | None = None   # 'compiler default first' (models/diagnostics)
    stages: dict = field(default_factory=dict)    # wall seconds per training stage
    stage_peak_mb: dict = field(default_factory=dict)   # the process's peak RSS within each

    @property
    def mean(self) -> float:
        return metrics.collection_score(self.per_graph)

    @property
    def seed_means(self) -> list[float]:
        return [metrics.collection_score(s) for s in self.seed_per_graph]

    @property
    def cv_seed_means(self) -> list[float]:
        rows = self.cv_per_graph if self.cv_per_graph is not None else ()
        return [metrics.collection_score(s) for s in rows]

    @property
    def cv_mean(self) -> float:
        """The mean of the seeds' held-out-family scores (each graph's seeds are not ensembled:
        the fold models are not kept)."""
        means = self.cv_seed_means
        return float(np.mean(means)) if means else float("nan")

    @property
    def unscored(self) -> tuple[str, ...]:
        return tuple(g for g, s in zip(self.graph_ids, self.per_graph) if not np.isfinite(s))

    def summary(self) -> dict:
        finite = self.per_graph[np.isfinite(self.per_graph)]
        return {"mean": _finite_or_none(self.mean),
                "min": float(finite.min()) if finite.size else None,
                "max": float(finite.max()) if finite.size else None,
                "n_scored": int(finite.size), "unscored": list(self.unscored),
                "seed_means": [_finite_or_none(m) for m in self.seed_means],
                "seed_std": _finite_or_none(metrics.seed_spread(self.seed_means)),
                "random_mean": _finite_or_none(metrics.collection_score(self.random_per_graph)),
                "cv_mean": _finite_or_none(self.cv_mean),
                "cv_seed_means": [_finite_or_none(m) for m in self.cv_seed_means],
                "ranker_seed_means": [_finite_or_none(m) for m in self.ranker_seed_means],
                "rounds": self.rounds,
                "per_graph": _by_graph(self.graph_ids, self.per_graph),
                "seed_per_graph": [_by_graph(self.graph_ids, s) for s in self.seed_per_graph],
                "cv_seed_per_graph": [_by_graph(self.cv_graph_ids, s)
                                      for s in (self.cv_per_graph if self.cv_per_graph
                                                is not None else ())],
                "seconds": round(self.seconds, 2),
                **self._references(), "stages": {k: round(v, 3) for k, v in self.stages.items()},
                "stage_peak_mb": {k: round(v) for k, v in self.stage_peak_mb.items()}}

    def _references(self) -> dict:
        """Per-graph scores of random order and of 'compiler default first'."""
        out = {"random_per_graph": _by_graph(self.graph_ids, self.random_per_graph)}
        if self.default_per_graph is not None:
            out["default_per_graph"] = _by_graph(self.graph_ids, self.default_per_graph)
            out["default_mean"] = _finite_or_none(metrics.collection_score(self.default_per_graph))
        return out


def _by_graph(graph_ids, values: np.ndarray) -> dict:
    return dict(zip(graph_ids, map(_finite_or_none, values)))


def _finite_or_none(x: float):
    return float(x) if np.isfinite(x) else None


def random_reference(collection: str, data: FeatureSet, seed: int) -> np.ndarray:
    """Per-graph score of random orderings, averaged over a few draws."""
    rng = np.random.default_rng(seed)
    draws = [metrics.per_graph_scores(collection, rng.random(data.X.shape[0]), data.runtime,
                                      data.ptr) for _ in range(N_RANDOM_ORDERS)]
    return np.mean(np.vstack(draws), axis=0) if draws[0].size else draws[0]


def fit_source(cfg: TrainConfig, data: FeatureSet, split: Split | None = None,
               fit_final=None) -> FeatureSet | BinnedRows:
    """What every seed's ranker (and regression partner) fits: for LightGBM, the rows binned
    once (binned.py), from data's matrix or, where data holds no columns, streamed from the
    entry `split` (with data kept beside the bins where fit_final.needs_matrix: a cluster's
    refits take the rows); for XGBoost, data as it is."""
    cls, _ = RANKERS[cfg.ranker]
    if not issubclass(cls, LightGBMRanker):
        return data
    first = cls(replace(cfg.params_for(data.collection), seed=cfg.seed))
    source = data if data.columns or not isinstance(split, Path) else split
    columns = data.columns if source is data else feature_columns(split, cfg.without)
    binned = bin_rows(source, list(columns), first.grouping, first.labels, first.lgb_params(),
                      bare=data)
    return replace(binned, matrix=data) if getattr(fit_final, "needs_matrix", False) else binned


def matrix_needed(cfg: TrainConfig, fit_final=None) -> bool:
    """Whether training needs the float32 rows in memory, not only their bins: XGBoost, a
    cluster's fits, and cross-validation (its held-out graphs are predicted)."""
    cls, _ = RANKERS[cfg.ranker]
    return (getattr(fit_final, "needs_matrix", False) or cfg.folds >= 2
            or not issubclass(cls, LightGBMRanker))


def fit_seeds(cfg: TrainConfig, train: FeatureSet | BinnedRows, fit_final=None):
    """One model per seed, each early-stopped on held-out train families (never on valid).
    fit_final: see family_split.fit_family_stopped."""
    cls, _ = RANKERS[cfg.ranker]
    if isinstance(train, FeatureSet):
        train = fit_source(cfg, train, fit_final=fit_final)
    return seed_fits(cls, cfg.params_for(train.collection), cfg, train, fit_final)


def seed_fits(cls, params, cfg: TrainConfig, train: FeatureSet | BinnedRows, fit_final) -> list:
    """cfg.seeds fits of cls, seeds cfg.seed.., each on every train graph for the rounds its own
    probe found on held-out train families (the seeds watch different families)."""
    return [fit_family_stopped(cls, replace(params, seed=cfg.seed + i), train, fit_final)
            for i in range(cfg.seeds)]


def fit_partners(cfg: TrainConfig, train: FeatureSet, fit_final=None,
                 source: FeatureSet | BinnedRows | None = None) -> list:
    """One partner per seed where the collection has them: node learners (train.nodes made)
    or regressions (early-stopped like the rankers, on `source` if given: fit_source's);
    else none."""
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    node, regression = cfg.node_params(train.collection), cfg.regression_partner(train.collection)
    if node is not None and train.nodes is not None:
        return [NodeModel(replace(node, seed=s)).fit(train) for s in seeds]
    if regression is not None:
        source = source if source is not None else fit_source(cfg, train, fit_final=fit_final)
        return seed_fits(RegressionPartner, regression, cfg, source, fit_final)
    return []


def seed_scores(models: list, partners: list, data: FeatureSet) -> list[np.ndarray]:
    """Each seed's scores of data's rows: its ranker's, averaged with its partner's (each
    min-max scaled per graph) where there is one."""
    return blended([m.predict(data) for m in models], [n.predict(data) for n in partners],
                   data.ptr)


def blended(ranker: list[np.ndarray], partner: list[np.ndarray], ptr: np.ndarray) -> list:
    """seed_scores from each model's own scores."""
    if not partner:
        return ranker
    return [mean_normalized([r, n], ptr) for r, n in zip(ranker, partner)]


def cv_pool(cfg: TrainConfig, train: FeatureSet, valid: Split) -> FeatureSet:
    """The graphs cross-validation holds families out of: the train and valid splits together
    (every family the data has, the valid split's own families too), or just train without
    folds (nothing is cross-validated)."""
    if cfg.folds < 2:
        return train
    return train.joined(rows_of(valid, cfg))


def cross_validate(cfg: TrainConfig, train: FeatureSet, fit_final=None) -> np.ndarray:
    """(seeds, train graphs) score of each train graph by the models that did not see its family,
    one row per seed (models early-stop on other families of their own training part); no rows
    without folds. Folds do not depend on the model's seed, so every seed scores every graph
    held out in the same company, and two runs compare graph by graph (models/evaluation/compare.py)."""
    if cfg.folds < 2:
        return np.zeros((0, train.n_graphs))
    fold_of = family_folds(train.graph_ids, cfg.folds, cfg.seed)
    if np.unique(fold_of).size < 2:
        return np.zeros((0, train.n_graphs))
    scores = np.full((cfg.seeds, train.n_graphs), np.nan)
    for f in np.unique(fold_of):
        held_idx = np.flatnonzero(fold_of == f)
        held = train.take_graphs(held_idx)
        part = train.take_graphs(np.flatnonzero(fold_of != f))
        per_seed = seed_scores(fit_seeds(cfg, part, fit_final), fit_partners(cfg, part, fit_final),
                               held)
        for i, s in enumerate(per_seed):
            scores[i, held_idx] = metrics.per_graph_scores(train.collection, s, held.runtime,
                                                           held.ptr)
    return scores


def loaded(split: Split, columns: tuple[str, ...] | None = None) -> FeatureSet:
    """A split's rows: a FeatureSet as it is, an entry read (only `columns` if given)."""
    return split if isinstance(split, FeatureSet) else load_entry(split, columns)


def rows_of(split: Split, cfg: TrainConfig, matrix: bool = True) -> FeatureSet:
    """A split's rows without cfg.without's families (matrix False, from an entry: its targets
    and graphs alone, no columns); their node rows (built with them on NODE_ROW_COLLECTIONS
    beside 'full' rows) kept only where the collection has a node learner."""
    return as_trained(loaded(split, None if matrix else ()), cfg)


def parts_of(split: Split, cfg: TrainConfig):
    """rows_of a part at a time (features.split_parts): for scoring, never the whole matrix."""
    for part in split_parts(split):
        part = as_trained(part, cfg)
        yield part
        del part     # not held while the next part is read


def as_trained(data: FeatureSet, cfg: TrainConfig) -> FeatureSet:
    """data as the run's models take it: without cfg.without's families, node rows only where
    the collection has a node learner."""
    data = data.without(cfg.without)
    return data if cfg.node_params(data.collection) is not None else replace(data, nodes=None)


def usable(valid: FeatureSet) -> bool:
    """Whether the validation graphs can score the run."""
    return bool(metrics.scorable(valid.runtime, valid.ptr).any())


def check_splits(cfg: TrainConfig, data: dict, data_root: str | None) -> list[str]:
    """Before any training: an empty train split is an error; a valid split with no scorable
    graph is one too unless cfg.allow_no_valid, then a warning for the table."""
    warnings = []
    for c, (train, valid) in data.items():
        where = f" ({Path(data_root) / collection_dir(c)})" if data_root else ""
        if train.n_graphs == 0:
            raise ValueError(f"{c}: the train split has no graphs{where}; train needs them "
                             f"(leave the collection out with --collections)")
        if usable(valid):
            continue
        what = ("the valid split has no graphs" if valid.n_graphs == 0 else
                f"none of the {valid.n_graphs} valid graphs can be scored (one config or equal "
                f"runtimes)")
        if not cfg.allow_no_valid:
            raise ValueError(f"{c}: {what}{where}; the validation score needs them "
                             f"(--allow-no-valid trains without one)")
        warnings.append(f"{c}: {what}: no validation score (early stopping watched held-out "
                        f"train families as always)")
    return warnings


def train_collection(cfg: TrainConfig, train: Split, valid: Split, out_dir: Path,
                     is_default: np.ndarray | None = None, fit_final=None,
                     log=print) -> CollectionResult:
    """is_default: (valid rows,) bool, the row's config is the compiler default (for the report).
    fit_final: see family_split.fit_family_stopped. An entry is loaded here, the valid rows only
    once the train rows are let go: one matrix is held at a time."""
    start, clock = time.perf_counter(), diagnostics.Stopwatch()
    with clock("load"):
        split, train = train, rows_of(train, cfg, matrix=matrix_needed(cfg, fit_final))
    partner = ("a node learner" if train.nodes is not None else
               "a regression" if cfg.regression_partner(train.collection) else None)
    with clock("bin"):
        source = fit_source(cfg, train, split, fit_final)
    columns = source.columns
    log(f"training {cfg.ranker} on {train.collection}: {train.n_graphs} graphs, "
        f"{train.runtime.size} rows x {len(columns)} features"
        + (f", with {partner} beside each seed" if partner else ""))
    with clock("fit"):
        models = fit_seeds(cfg, source, fit_final)
        partners = fit_partners(cfg, train, fit_final, source)
    with clock("cross-validate"):
        pool = cv_pool(cfg, train, valid)
        cv, cv_ids = cross_validate(cfg, pool, fit_final), pool.graph_ids
    del train, source, pool
    with clock("load valid"):       # targets and graphs; the rows come a part at a time
        split, valid = valid, replace(rows_of(valid, cfg, matrix=False), nodes=None)
    with clock("validate"):
        for i, m in enumerate(models):
            m.save(out_dir / f"seed-{i}")
        for i, m in enumerate(partners):
            m.save(out_dir / f"{partner_kind(m)}-{i}")
        predictions, head = predicted(models + partners, parts_of(split, cfg))
        scores, seed_per_graph, ranker_means = validate(predictions[:len(models)],
                                                        predictions[len(models):], valid)
        per_graph = metrics.per_graph_scores(valid.collection, scores, valid.runtime, valid.ptr)
    with clock("report data"):
        diagnostics.save(out_dir, models, valid, head, scores, is_default, columns)
    return CollectionResult(valid.collection, per_graph, random_reference(
        valid.collection, valid, cfg.seed), seed_per_graph, valid.graph_ids,
        time.perf_counter() - start, cv_graph_ids=cv_ids, cv_per_graph=cv,
        ranker_seed_means=ranker_means, rounds=[int(m.stopped_at_) for m in models],
        default_per_graph=diagnostics.default_first_per_graph(valid, is_default),
        stages=clock.seconds, stage_peak_mb=clock.peak_mb)


def degenerate_seeds(result: CollectionResult, first_seed: int) -> list[str]:
    """A warning for each seed whose validation mean is below random order's: a model that
    learnt nothing usable is averaged in, and the run should say so, not only show a spread."""
    random = metrics.collection_score(result.random_per_graph)
    rounds = result.rounds or [None] * len(result.seed_means)
    return [f"{result.collection} seed {first_seed + i}: validation mean {mean:.3f} is below "
            f"random order's {random:.3f} ({r} rounds kept); it is averaged into the run's "
            f"scores" for i, (mean, r) in enumerate(zip(result.seed_means, rounds))
            if mean < random]


def predicted(models: list, parts) -> tuple[list[np.ndarray], FeatureSet | None]:
    """Every model's scores of the parts' rows, in order, one part's matrix held at a time;
    and the first whole graphs within diagnostics.HISTORY_ROWS rows (at least one) with their
    features: what the report's metric by round scores."""
    scores, heads, rows, full = [[] for _ in models], [], 0, False
    for part in parts:
        for out, m in zip(scores, models):
            out.append(m.predict(part))
        if not full:
            fit = int(np.searchsorted(part.ptr, diagnostics.HISTORY_ROWS - rows, "right")) - 1
            n = min(max(fit, 0 if heads else 1), part.n_graphs)
            heads.append(part.take_graphs(np.arange(n)))
            rows, full = rows + heads[-1].runtime.size, n < part.n_graphs
        del part     # not held while the next part is read
    head = reduce(FeatureSet.joined, heads) if heads else None
    return [np.concatenate(s) if s else np.zeros(0) for s in scores], head


def validate(ranker: list[np.ndarray], partner: list[np.ndarray], valid: FeatureSet):
    """The run's scores of the valid rows (as submit's ensemble_scores) from each seed's
    ranker's and partner's scores, (seeds, graphs) each seed's per-graph score, and each
    seed's ranker's mean without its partner."""
    per_seed = [metrics.per_graph_scores(valid.collection, s, valid.runtime, valid.ptr)
                for s in blended(ranker, partner, valid.ptr)]
    alone = [metrics.collection_score(metrics.per_graph_scores(valid.collection, r, valid.runtime,
                                                               valid.ptr)) for r in ranker]
    return (mean_normalized(ranker + partner, valid.ptr),
            np.array(per_seed).reshape(len(ranker), -1), alone)


def run_code_digest(models_dir: Path = MODELS_DIR) -> str:
    """The code that makes a run: this module and every module of models/ it imports,
    transitively (training, metrics, settings); the feature code is the feature signature's."""
    return code_digest(imported_modules([models_dir / "training" / "runs.py"], models_dir),
                       models_dir)


def run_key(cfg: TrainConfig, feature_keys: dict, cluster: dict | None = None) -> str:
    params = {c: asdict(cfg.params_for(c)) for c in feature_keys}
    nodes = {c: asdict(p) for c in feature_keys if (p := cfg.node_params(c)) is not None}
    partners = {c: asdict(p) for c in feature_keys
                if (p := cfg.regression_partner(c)) is not None}
    # A cluster's models differ a little from a local fit's (data-parallel histograms), so
    # they get their own run; local runs keep the key they always had.
    where = {"cluster": cluster} if cluster else {}
    return fingerprint(ranker=cfg.ranker, seeds=cfg.seeds, seed=cfg.seed, folds=cfg.folds,
                       params=params, features=feature_keys, without=sorted(cfg.without),
                       code=run_code_digest(), **where,
                       **({"node_learner": nodes} if nodes else {}),
                       **({"regression_partner": partners} if partners else {}))


def train_run(cfg: TrainConfig, data: dict[str, tuple[Split, Split]],
              runs_root: Path, feature_info: RunFeatures, log=print,
              default_rows: dict[str, np.ndarray] | None = None,
              client=None) -> tuple[Path, RunRecord]:
    """Train every collection in `data`, then publish the run directory atomically.

    feature_info: what the rows were built from (its build seconds and cache keys are filled in
    here).
    default_rows: per collection, which validation rows hold the compiler's default config.
    client: a dask.distributed Client; each final fit then runs on its cluster
    (models/training/dask_train.py), the rounds still chosen here
    (family_split.fit_family_stopped)."""
    if not data:
        raise ValueError("no collections to train")
    bare = {c: (loaded(t, ()), loaded(v, ())) for c, (t, v) in data.items()}   # no features
    warnings = check_splits(cfg, bare, feature_info.data)
    metas = {c: (t.meta, v.meta) for c, (t, v) in bare.items()}
    del bare   # its targets are loaded again with each collection's rows
    keys = {c: {"train": t.get("key"), "valid": v.get("key")} for c, (t, v) in metas.items()}
    fit_final, cluster = None, None
    if client is not None:
        from models.training.dask_train import cluster_fit
        fit_final = cluster_fit(client)
        cluster = {"workers": len(client.scheduler_info()["workers"])}
    run_dir = Path(runs_root) / f"{cfg.ranker}-{run_key(cfg, keys, cluster)}"
    if cfg.demo:
        log(schedule_line(cfg))
    # Equal settings make the same run: one trained meanwhile by another command is replaced.
    with atomic_dir(run_dir, "the trained run") as tmp:
        results = {}
        for collection, (train, valid) in data.items():
            results[collection] = train_collection(cfg, train, valid,
                                                   tmp / collection_slug(collection),
                                                   (default_rows or {}).get(collection),
                                                   fit_final, log)
        built = replace(feature_info, build_seconds=_build_seconds(metas), keys=keys)
        warnings += [w for r in results.values() for w in degenerate_seeds(r, cfg.seed)]
        record = replace(_run_record(cfg, results, built, warnings), cluster=cluster,
                         retrain=retrain_command(cfg, list(data), runs_root, feature_info),
                         files={f.relative_to(tmp).as_posix(): file_sum(f)
                                for f in sorted(tmp.rglob("*")) if f.is_file()})
        record.write(tmp)
    return run_dir, record


def retrain_command(cfg: TrainConfig, collections: list[str], runs_root: Path,
                    feature_info: RunFeatures) -> str:
    """The `train` command that makes this run again, into the same directory: what the
    message of a damaged model file asks to run (run_files.check_model_files)."""
    args = ["python", "pipeline.py", "train", "--cache-dir", str(Path(runs_root).parent),
            "--ranker", cfg.ranker, "--collections", *collections]
    if feature_info.data and not feature_info.sample:
        args += ["--data-dir", feature_info.data]
    # A demo run's seeds are the demo's unless given: compare with the schedule it ran on
    default = on_schedule(TrainConfig(ranker=cfg.ranker), cfg.demo, None)
    for name, option in (("seeds", "--seeds"), ("seed", "--seed"), ("folds", "--folds")):
        if getattr(cfg, name) != getattr(default, name):
            args += [option, str(getattr(cfg, name))]
    args += [a for k, v in cfg.overrides.items() for a in ("--set", f"{k}={v}")]
    args += [a for family in cfg.without for a in ("--without", family)]
    args += ["--allow-no-valid"] if cfg.allow_no_valid else []
    args += [] if cfg.partners else ["--ranker-alone"]
    settings, defaults = feature_info.settings, asdict(FeatureConfig())
    args += [a for k, v in settings.items() if v != defaults.get(k)
             for a in ("--feature", f"{k}={v}")]
    return shlex.join(args)


def _run_record(cfg: TrainConfig, results: dict, built: RunFeatures,
                warnings: list[str]) -> RunRecord:
    final = metrics.final_score({c: r.mean for c, r in results.items()})
    return RunRecord(
        ranker=cfg.ranker, train_config=asdict(cfg),
        params={c: asdict(cfg.params_for(c)) for c in results},
        node_params={c: asdict(p) for c in results if (p := cfg.node_params(c)) is not None},
        regression_partner_params={c: asdict(p) for c in results
                                   if (p := cfg.regression_partner(c)) is not None},
        features=built, metrics={c: r.summary() for c, r in results.items()},
        warnings=tuple(warnings), final=_finite_or_none(final),
        final_collections=tuple(c for c, r in results.items() if np.isfinite(r.mean)),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), git=_git_describe(),
        versions=library_versions("lightgbm", "xgboost", "numpy"))


def _build_seconds(metas: dict[str, tuple[dict, dict]]) -> dict:
    """Wall time of the build that made each feature cache entry (maybe by an earlier command)."""
    return {c: {"train": t.get("wall_seconds_this_run"), "valid": v.get("wall_seconds_this_run")}
            for c, (t, v) in metas.items()}


def _git_describe() -> str | None:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=MODELS_DIR,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
