"""Scores -> Kaggle rows `ID,TopConfigs`, checked before an atomic write.

ID = `<collection>:<file stem>`; TopConfigs = config indices joined by ';', fastest first:
the first min(5, c) for tile, a full permutation of 0..c-1 for layout.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from features import DataSource
from features.cache.store import write_atomically, writing
from features.npz.find import collection_dir, list_npz
from features.rows.feature_set import graph_slices
from features.schema import is_tile

from models.metrics import TILE_TOP_K, predicted_order

# An ID is written unquoted into a comma-separated file: a stem needing quotes (a comma, quote or
# line break) or otherwise unusual is refused before anything is written. Real stems are 32 hex
# digits (test files) or model names with '.', '_', '-'.
SAFE_STEM = re.compile(r"[A-Za-z0-9._+\-]+")


class SubmissionError(ValueError):
    """The rows about to be written would not be a valid submission."""


def files_to_score(source: DataSource) -> dict[str, list[Path]]:
    """The test files of every collection the data holds, checked for a complete submission:
    each collection has test files, every stem can be written as an ID, and the IDs equal
    those of the download's sample_submission.csv when it is present."""
    held = source.collections()
    if not held:
        raise SubmissionError(f"{source.npz_root}: holds no collection directory")
    files = {c: list_npz(source.npz_root, c, "test") for c in held}
    empty = [f"{c} ({source.npz_root / collection_dir(c) / 'test'})" for c in held if not files[c]]
    if empty:
        raise SubmissionError(f"no test files for {', '.join(empty)}: a submission needs a row "
                              f"for every test graph of every collection")
    unsafe = [f for fs in files.values() for f in fs if not SAFE_STEM.fullmatch(f.stem)]
    if unsafe:
        raise SubmissionError(f"{unsafe[0]}: the file name cannot be written as a submission ID "
                              f"(allowed: letters, digits, '._+-'); {len(unsafe)} such file(s)")
    if source.sample_submission is not None:
        _match_sample_submission(source.sample_submission,
                                 {f"{c}:{f.stem}" for c, fs in files.items() for f in fs})
    return files


def expected_configs(files: dict[str, list[Path]], test_sets: dict) -> dict[str, int]:
    """ID -> configs in its file, as the build counted them (a FeatureSet's meta
    'file_configs'), for every test file listed: a file the rows lack is an error here."""
    counts = {f"{c}:{gid}": n for c, data in test_sets.items()
              for gid, n in zip(data.graph_ids, data.meta["file_configs"])}
    missing = [f for c, fs in files.items() for f in fs if f"{c}:{f.stem}" not in counts]
    if missing:
        raise SubmissionError(f"{missing[0]}: no feature rows for this test file "
                              f"({len(missing)} such file(s))")
    return {f"{c}:{f.stem}": counts[f"{c}:{f.stem}"] for c, fs in files.items() for f in fs}


def _match_sample_submission(path: Path, ids: set[str]) -> None:
    with open(path, newline="") as fh:
        wanted = {row[0] for row in list(csv.reader(fh))[1:] if row}
    missing, extra = sorted(wanted - ids), sorted(ids - wanted)
    if missing or extra:
        raise SubmissionError(
            f"the test files do not match {path}: {len(missing)} of its IDs have no test file "
            f"(e.g. {missing[:3]}), {len(extra)} test files are not in it (e.g. {extra[:3]})")


def to_rows(collection: str, graph_ids, config_idx: np.ndarray, scores: np.ndarray,
            ptr: np.ndarray) -> list[tuple[str, str]]:
    rows = []
    for graph_id, s in zip(graph_ids, graph_slices(ptr)):
        order = config_idx[s][predicted_order(scores[s])]
        if is_tile(collection):
            order = order[:TILE_TOP_K]
        rows.append((f"{collection}:{graph_id}", ";".join(str(int(i)) for i in order)))
    return rows


def check_rows(rows: list[tuple[str, str]], expected: dict[str, int]) -> None:
    """expected: ID -> number of configs in its test file. Raises SubmissionError."""
    ids = [r[0] for r in rows]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise SubmissionError(f"duplicate IDs: {dupes[:5]}")
    missing, extra = sorted(set(expected) - set(ids)), sorted(set(ids) - set(expected))
    if missing or extra:
        raise SubmissionError(f"IDs differ from the test files: missing {missing[:5]}, "
                              f"unexpected {extra[:5]}")
    for row_id, top in rows:
        picks = [int(x) for x in top.split(";")] if top else []
        c = expected[row_id]
        if is_tile(row_id):
            want = min(TILE_TOP_K, c)
            ok = len(picks) == want and len(set(picks)) == want and all(0 <= p < c for p in picks)
            if not ok:
                raise SubmissionError(f"{row_id}: expected {want} distinct indices in 0..{c - 1}, "
                                      f"got {top[:80]!r}")
        elif sorted(picks) != list(range(c)):
            raise SubmissionError(f"{row_id}: expected a permutation of 0..{c - 1} "
                                  f"({c} indices), got {len(picks)} indices")


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    """Write atomically: a crash or a full disk leaves the previous file (or none), never half
    of one."""
    path = Path(path)
    with writing(f"the submission {path.name}", path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as fh:
            fh.write("ID,TopConfigs\n")
            for row_id, top in rows:
                fh.write(f"{row_id},{top}\n")
    return write_atomically(path, write, f"the submission {path.name}")
