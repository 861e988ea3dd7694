"""Score test graphs with a trained run and turn them into checked submission rows."""
from __future__ import annotations

import json
from pathlib import Path

from features import FeatureSet

from .runs import ensemble_scores, load_models
from .submission import SubmissionError, check_rows, to_rows


class StaleRunError(RuntimeError):
    """The run cannot score these features (other feature code/settings, or a missing model)."""


def read_run(run_dir: Path) -> dict:
    path = Path(run_dir) / "run.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a trained run (no run.json)")
    return json.loads(path.read_text())


def check_run(record: dict, run_dir: Path, collections, signature: str) -> None:
    """Refuse a run trained on other features, or one lacking a collection's models."""
    trained = record["features"].get("signature")
    if trained != signature:
        raise StaleRunError(
            f"{run_dir}: trained on features {trained}, but the current feature code and "
            f"settings give {signature}; rerun `pipeline.py train`")
    missing = sorted(set(collections) - set(record["metrics"]))
    if missing:
        raise StaleRunError(f"{run_dir}: no models for {missing}; train them with "
                            f"`pipeline.py train --collections {' '.join(missing)}`")


def submission_rows(run_dir: Path, test_sets: dict[str, FeatureSet],
                    expected: dict[str, int]) -> list[tuple[str, str]]:
    """Rows for every test graph; checked against expected (ID -> configs in its file)."""
    rows = []
    without = read_run(run_dir)["train_config"].get("without", ())
    for collection, data in test_sets.items():
        data = data.without(without)
        rows += to_rows(collection, data.graph_ids, data.config_idx,
                        ensemble_scores(collection_models(run_dir, collection), data), data.ptr)
    check_rows(rows, expected)
    return rows


def collection_models(run_dir: Path, collection: str) -> list:
    """The run's models (one per seed) of a collection; StaleRunError if there are none."""
    models = load_models(run_dir, collection)
    if not models:
        raise StaleRunError(f"{run_dir}: model files for {collection} are missing")
    return models


__all__ = ["StaleRunError", "SubmissionError", "check_run", "collection_models", "read_run",
           "submission_rows"]
