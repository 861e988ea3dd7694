"""A run's models fit again fold by fold, whole families held out, as `train --folds` fits them,
but kept: saved beside the run (<run>/folds-<K>/<collection>/fold-<f>/, with the graphs each fold
held out) and reused while the run and its train graphs are the same. What tune-sim --folds
scores each train graph with: models that never saw its family, as the held-out test's
families are never seen."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from features.cache.store import atomic_dir
from features.schema import collection_slug

from models.training.run_files import models_in, partner_kind
from models.training.run_record import RunRecord
from models.training.runs import TrainConfig, fit_partners, fit_seeds, rows_of
from models.training.family_split import family_folds

HELD = "held_out.json"


def run_config(record: RunRecord) -> TrainConfig:
    """The run's training settings, without its own cross-validation."""
    return TrainConfig(**{**record.train_config, "without": record.without, "folds": 0})


def fold_models(run_dir: Path, entry: Path, collection: str, folds: int,
                log=print) -> list[tuple[list, tuple[str, ...]]]:
    """(models, the train graphs they never saw) per fold of `entry`'s train graphs, fit with
    the run's settings on the other folds' graphs; ValueError when they hold one family."""
    record = RunRecord.read(run_dir)
    cfg = run_config(record)
    where = Path(run_dir) / f"folds-{folds}" / collection_slug(collection)
    graphs = sorted(rows_of(entry, cfg, matrix=False).graph_ids)
    held = _saved(where, graphs)
    if held is None:
        held = _fit(cfg, entry, collection, folds, where, log)
    return [(models_in(where / name, record.ranker), tuple(ids)) for name, ids in held.items()]


def _saved(where: Path, graphs: list[str]) -> dict | None:
    """The saved folds' held-out graphs, if they were fit on these train graphs."""
    try:
        saved = json.loads((where / HELD).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(saved, dict) and saved.get("graphs") == graphs
    return saved.get("held_out") if ok else None      # damaged or other graphs: fit again


def _fit(cfg: TrainConfig, entry: Path, collection: str, folds: int, where: Path,
         log) -> dict:
    train = rows_of(entry, cfg)
    fold_of = family_folds(train.graph_ids, folds, cfg.seed)
    if np.unique(fold_of).size < 2:
        raise ValueError(f"{collection}: the train graphs hold one model family; holding "
                         f"families out needs two or more")
    held = {}
    with atomic_dir(where, f"the {collection} fold models") as tmp:
        for f in np.unique(fold_of):
            log(f"{collection}: fitting fold {f + 1} of {np.unique(fold_of).size}")
            part = train.take_graphs(np.flatnonzero(fold_of != f))
            here = tmp / f"fold-{f}"
            here.mkdir()
            for i, m in enumerate(fit_seeds(cfg, part)):
                m.save(here / f"seed-{i}")
            for i, m in enumerate(fit_partners(cfg, part)):
                m.save(here / f"{partner_kind(m)}-{i}")
            held[here.name] = [train.graph_ids[i] for i in np.flatnonzero(fold_of == f)]
        (tmp / HELD).write_text(json.dumps({"folds": folds, "seed": cfg.seed,
                                            "graphs": sorted(train.graph_ids),
                                            "held_out": held}, indent=1))
    return held
