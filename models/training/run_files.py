"""A trained run read back: the newest run directory, a collection's models, their ensemble,
the validation table `train` prints.

A run directory holds run.json (models/training/run_record.py) and, per collection
(features.schema.collection_slug), one seed-* directory per model in the ranker's native format
(models/training/runs.py writes them). run.json records every other file's size and checksum
("files"): a model file that differs is refused, never loaded.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from features import FeatureSet
from features.cache.integrity import verify
from features.cache.store import CacheError
from features.schema import collection_slug

from models.metrics import METRIC_NAME

from models.training import RANKERS
from models.training.base import normalize_per_graph
from models.training.lgbm import RegressionPartner
from models.training.node_learner import NodeModel
from models.training.run_record import RUN_FILE, RunRecord

# A seed's partner, by the directory its model is saved in (<kind>-<seed>)
PARTNER_KINDS = {"node": NodeModel, "regression": RegressionPartner}

MAX_LISTED_GRAPHS = 10


def run_records(runs_root: Path) -> list[Path]:
    """The run.json of every finished run under runs_root, oldest first."""
    return sorted(Path(runs_root).glob(f"*/{RUN_FILE}"), key=lambda p: p.stat().st_mtime)


def latest_run(runs_root: Path, fixed_reference: bool | None = None) -> Path:
    """The newest run; with fixed_reference, the newest whose rows had (True: the tuner's) or
    had not (False: submit's and rank's) a reference fixed per graph, else the newest. A run
    whose record cannot be read is passed over in that choice, not an error."""
    runs = run_records(runs_root)
    if not runs:
        raise FileNotFoundError(f"no trained run under {runs_root}; run `pipeline.py train` first")
    if fixed_reference is not None:
        kinds = {p: _fixed(p.parent) for p in runs}
        runs = ([p for p in runs if kinds[p] is fixed_reference]
                or [p for p in runs if kinds[p] is not None] or runs)
    return runs[-1].parent


def _fixed(run_dir: Path) -> bool | None:
    try:
        return RunRecord.read(run_dir).fixed_reference
    except (CacheError, OSError, ValueError):
        return None


def load_models(run_dir: Path, collection: str) -> list:
    """The collection's models: each seed's ranker, then each seed's partner if any."""
    record = RunRecord.read(run_dir)
    check_model_files(run_dir, record, collection)
    return models_in(Path(run_dir) / collection_slug(collection), record.ranker)


def models_in(here: Path, ranker: str) -> list:
    """The models saved in one directory (seed-<i>, <partner kind>-<i>): rankers, then partners."""
    cls, _ = RANKERS[ranker]
    return ([cls.load(d) for d in _by_seed(here.glob("seed-*"))]
            + [kind.load(d) for name, kind in PARTNER_KINDS.items()
               for d in _by_seed(here.glob(f"{name}-*"))])


def _by_seed(dirs) -> list[Path]:
    """seed-2 before seed-10: in the order the seeds were trained."""
    return sorted(dirs, key=lambda d: int(d.name.rsplit("-", 1)[1]))


def first_seeds(models: list, seeds: int | None) -> list:
    """load_models' list cut to its first `seeds` seeds, each seed's ranker and partner (None:
    all of them); ValueError if the run has fewer."""
    if seeds is None:
        return models
    rankers = [m for m in models if not is_partner(m)]
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= len(rankers):
        raise ValueError(f"seeds must be 1 .. {len(rankers)} (the run's seeds), got {seeds}")
    return rankers[:seeds] + [m for m in models if is_partner(m)][:seeds]


def partner_kind(model) -> str:
    """The directory name (before -<seed>) a partner model is saved under."""
    return next(name for name, kind in PARTNER_KINDS.items() if isinstance(model, kind))


def is_partner(model) -> bool:
    """Whether the model is a seed's partner (averaged with the seed's ranker), not a ranker."""
    return isinstance(model, tuple(PARTNER_KINDS.values()))


def needs_nodes(models: list) -> bool:
    """Whether scoring with `models` needs the rows' node rows (FeatureSet.nodes)."""
    return any(isinstance(m, NodeModel) for m in models)


def check_model_files(run_dir: Path, record: RunRecord, collection: str) -> None:
    """DamagedCacheError naming the first of the collection's model files that is not what
    was written, and the command that trains the run again. Runs older than the record
    ("files") are not checked."""
    prefixes = tuple(f"{collection_slug(collection)}/{kind}-" for kind in ("seed", *PARTNER_KINDS))
    fix = f"retrain with: {record.retrain or 'python pipeline.py train'}"
    for name, expected in record.files.items():
        if name.startswith(prefixes):
            verify(Path(run_dir) / name, expected, fix)


def ensemble_scores(models, data: FeatureSet) -> np.ndarray:
    """Mean of per-graph min-max normalised scores (higher = faster)."""
    return mean_normalized([m.predict(data) for m in models], data.ptr)


def mean_normalized(per_model: list[np.ndarray], ptr: np.ndarray) -> np.ndarray:
    """The ensemble of ensemble_scores from each model's own scores."""
    return np.mean([normalize_per_graph(s, ptr) for s in per_model], axis=0)


def legend(record: RunRecord) -> list[str]:
    """What the table's columns mean, and why a cell of this run reads '-' or 0."""
    seeds, folds = record.seeds, record.train_config["folds"]
    by_collection = record.metrics.values()
    sd = ("0.000: one model, --seeds 1" if seeds == 1
          else f"sample sd (n - 1) over the {seeds} models of --seeds {seeds}")
    if folds < 2:
        cv = "'-': no cross-validation, --folds K for one"
    elif any(m["cv_mean"] is None for m in by_collection):
        cv = f"over --folds {folds}; '-' where the train graphs hold one family"
    else:
        cv = f"over --folds {folds}"
    metric = ", ".join(f"{kind} {name}" for kind, name in METRIC_NAME.items())
    empty = "; '-' with no scored graph" if any(m["mean"] is None for m in by_collection) else ""
    text = (f"columns: scored / unscrd = validation graphs in / left out of the mean; mean, min, "
            f"max = the per-graph score ({metric}{empty}); seed sd = spread of the per-seed "
            f"means ({sd}); random = random orders' mean; cv = held-out-family mean ({cv}); "
            f"sec = wall seconds")
    return textwrap.wrap(text, width=100, subsequent_indent="  ", break_on_hyphens=False)


def format_table(record: RunRecord) -> str:
    """Per-collection validation table: graphs scored and unscored, mean, per-graph min/max,
    seed spread, random order; then the unscored graphs and any warning."""
    head = (f"{'collection':<20} {'scored':>6} {'unscrd':>6} {'mean':>7} {'min':>7} {'max':>7} "
            f"{'seed sd':>7} {'random':>7} {'cv':>7} {'sec':>6}")
    lines = [head, "-" * len(head)]
    for c, m in record.metrics.items():
        cells = [m["mean"], m["min"], m["max"], m["seed_std"], m["random_mean"], m["cv_mean"]]
        unscored = len(m.get("unscored", []))   # older run.json files lack the split
        lines.append(f"{c:<20} {len(m['per_graph']) - unscored:>6} {unscored:>6} "
                     + " ".join(f"{x:>7.3f}" if x is not None else f"{'-':>7}" for x in cells)
                     + f" {m['seconds']:>6.1f}")
    final = f"{record.final:.4f}" if record.final is not None else "-"
    lines.append(f"{f'final (mean of {len(record.scored_collections)} collections)':<34} {final}")
    lines += legend(record)
    for c, m in record.metrics.items():
        if m.get("unscored"):
            shown = ", ".join(m["unscored"][:MAX_LISTED_GRAPHS])
            more = len(m["unscored"]) - MAX_LISTED_GRAPHS
            lines.append(f"unscored in {c} (one config or equal runtimes, not in the mean): "
                         f"{shown}" + (f" and {more} more" if more > 0 else ""))
    lines += [f"warning: {w}" for w in record.warnings]
    return "\n".join(lines)
