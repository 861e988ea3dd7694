"""Scores -> Kaggle rows `ID,TopConfigs`, checked before an atomic write.

ID = `<collection>:<file stem>`; TopConfigs = config indices joined by ';', fastest first:
the first min(5, c) for tile, a full permutation of 0..c-1 for layout.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .metrics import TILE_TOP_K, predicted_order


class SubmissionError(ValueError):
    """The rows about to be written would not be a valid submission."""


def to_rows(collection: str, graph_ids, config_idx: np.ndarray, scores: np.ndarray,
            ptr: np.ndarray) -> list[tuple[str, str]]:
    rows = []
    for g, graph_id in enumerate(graph_ids):
        s = slice(ptr[g], ptr[g + 1])
        order = config_idx[s][predicted_order(scores[s])]
        if collection.startswith("tile"):
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
        if row_id.startswith("tile"):
            want = min(TILE_TOP_K, c)
            ok = len(picks) == want and len(set(picks)) == want and all(0 <= p < c for p in picks)
            if not ok:
                raise SubmissionError(f"{row_id}: expected {want} distinct indices in 0..{c - 1}, "
                                      f"got {top[:80]!r}")
        elif sorted(picks) != list(range(c)):
            raise SubmissionError(f"{row_id}: expected a permutation of 0..{c - 1} "
                                  f"({c} indices), got {len(picks)} indices")


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    """Write atomically: a crash leaves the previous file (or none), never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        fh.write("ID,TopConfigs\n")
        for row_id, top in rows:
            fh.write(f"{row_id},{top}\n")
    os.replace(tmp, path)
    return path
