"""Score test graphs with trained runs and turn them into checked submission rows.

Runs compose: each collection is served by its own run, the one named for it or else the newest
that has a model for it, matches the current feature signature and was trained on this data.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from features import DataSource, FeatureConfig, FeatureSet, feature_signature, split_parts
from features.schema import collection_slug

from models.training.run_files import ensemble_scores, load_models, run_records
from models.training.run_record import RunRecord
from models.serving.stale import StaleRunError
from models.serving.submission import SubmissionError, check_rows, to_rows

MAX_LISTED_RUNS = 3


@dataclass(frozen=True)
class RunChoice:
    run_dir: Path
    record: RunRecord
    note: str = ""     # why the run's data differs from this data (accepted on request)

    @property
    def feature_config(self) -> FeatureConfig:
        return self.record.feature_config


def list_runs(runs_root: Path) -> list[tuple[Path, RunRecord]]:
    """Every finished run, newest first."""
    files = run_records(runs_root)[::-1]
    return [(f.parent, RunRecord.read(f.parent)) for f in files]


def choose_runs(runs_root: Path, source: DataSource, collections, given: dict,
                *, allow_other_data: bool = False) -> dict[str, RunChoice]:
    """collection -> the run that serves it. given: collection -> run dir (key None: for all)."""
    runs = list_runs(runs_root)
    out = {}
    for c in collections:
        run_dir = given.get(c, given.get(None))
        if run_dir is not None:
            record = RunRecord.read(run_dir)
            problem = unfit(record, run_dir, c, source, allow_other_data)
            if problem:
                raise StaleRunError(f"{run_dir} cannot serve {c}: {problem}")
            out[c] = RunChoice(Path(run_dir), record, other_data(record, c, source))
            continue
        out[c] = _newest_fit(runs, runs_root, c, source, allow_other_data)
    return out


def _newest_fit(runs, runs_root: Path, c: str, source: DataSource,
                allow_other_data: bool) -> RunChoice:
    """The newest run that can serve c, one whose rows had each file's own configs as their
    reference first: a file's statistics score its genetic search's configs better than a
    reference fixed per graph (the tuner's run, docs/reference.md "tune")."""
    rejected = []
    for run_dir, record in sorted(runs, key=lambda run: run[1].fixed_reference):
        problem = unfit(record, run_dir, c, source, allow_other_data)
        if not problem:
            return RunChoice(run_dir, record, other_data(record, c, source))
        rejected.append(f"{run_dir.name}: {problem}")
    why = "; ".join(rejected[:MAX_LISTED_RUNS]) if rejected else f"no runs under {runs_root}"
    raise StaleRunError(f"no trained run can serve {c} ({why}); train one with "
                        f"`pipeline.py train --collections {c}`, or name a run with --run")


def unfit(record: RunRecord, run_dir: Path, c: str, source: DataSource,
          allow_other_data: bool) -> str:
    """Why the run cannot serve collection c, or "" if it can."""
    if c not in record.metrics or not (Path(run_dir) / collection_slug(c)).is_dir():
        return f"no model for {c}"
    stale = stale_reason(record)
    if stale:
        return stale
    note = other_data(record, c, source)
    if note and not allow_other_data:
        return f"{note} (--allow-other-data uses it anyway)"
    return ""


def stale_reason(record: RunRecord) -> str:
    """"" when the run's features are what the current code and settings compute."""
    try:
        current = feature_signature(record.feature_config)
    except (TypeError, ValueError) as exc:
        return f"its feature settings are no longer valid ({exc})"
    if record.features.signature != current:
        return (f"trained on features {record.features.signature}, but the current "
                f"feature code and settings give {current}")
    return ""


def check_signature(record: RunRecord, run_dir: Path) -> None:
    stale = stale_reason(record)
    if stale:
        raise StaleRunError(f"{run_dir}: {stale}; rerun `pipeline.py train`")


def other_data(record: RunRecord, c: str, source: DataSource) -> str:
    """"" when the run's train files for c are this data's, else what differs."""
    trained = record.features.train_files.get(c)
    if trained == source.train_fingerprint(c):
        return ""
    if record.features.sample and not source.is_sample:
        return "trained on the generated sample, not on this data"
    return "trained on other train files than this data's"


def submission_rows(choices: dict[str, RunChoice], test_sets: dict[str, FeatureSet | Path],
                    expected: dict[str, int]) -> list[tuple[str, str]]:
    """Rows for every test graph (node rows, where a run's node learners score them, come with
    the test rows from the build); checked against expected (ID -> configs in its file).
    test_sets: each collection's rows, or its cache entry, read a part at a time (a whole
    graph's rows are in one part, and its scores depend on them alone)."""
    rows = []
    for collection, split in test_sets.items():
        choice = choices[collection]
        models = collection_models(choice.run_dir, collection)
        for data in split_parts(split):
            data = data.without(choice.record.without)
            rows += to_rows(collection, data.graph_ids, data.config_idx,
                            ensemble_scores(models, data), data.ptr)
    check_rows(rows, expected)
    return rows


def collection_models(run_dir: Path, collection: str) -> list:
    """The run's models (one per seed) of a collection; StaleRunError if there are none."""
    models = load_models(run_dir, collection)
    if not models:
        raise StaleRunError(f"{run_dir}: model files for {collection} are missing")
    return models


__all__ = ["RunChoice", "StaleRunError", "SubmissionError", "check_signature", "choose_runs",
           "collection_models", "submission_rows"]
