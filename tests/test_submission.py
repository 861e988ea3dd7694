"""Submission rows: ID format, tile top-5, layout permutations, and the pre-write checks."""
from __future__ import annotations

import numpy as np
import pytest

from models.serving.submission import SubmissionError, check_rows, to_rows, write_csv


def test_layout_rows_are_full_permutations_fastest_first():
    scores = np.array([0.1, 0.9, 0.5, 0.3])
    rows = to_rows("layout:xla:random", ["abc"], np.arange(4), scores, np.array([0, 4]))
    assert rows == [("layout:xla:random:abc", "1;2;3;0")]


def test_tile_rows_take_top_five_or_fewer():
    scores = np.arange(7, dtype=float)
    ptr = np.array([0, 7])
    rows = to_rows("tile:xla", ["t"], np.arange(7), scores, ptr)
    assert rows[0][1] == "6;5;4;3;2"
    rows = to_rows("tile:xla", ["t"], np.arange(3), scores[:3], np.array([0, 3]))
    assert rows[0][1] == "2;1;0"


def test_rows_use_config_positions_not_row_positions():
    rows = to_rows("layout:nlp:default", ["g"], np.array([2, 0, 1]), np.array([1.0, 3.0, 2.0]),
                   np.array([0, 3]))
    assert rows[0][1] == "0;1;2"


@pytest.mark.parametrize("rows, message", [
    ([("tile:xla:a", "0;1;2;3;4"), ("tile:xla:a", "0;1;2;3;4")], "duplicate"),
    ([("tile:xla:a", "0;1;2;3;4")], "missing"),
    ([("tile:xla:a", "0;1;2;3"), ("layout:xla:default:b", "0;1;2")], "5 distinct"),
    ([("tile:xla:a", "0;0;1;2;3"), ("layout:xla:default:b", "0;1;2")], "5 distinct"),
    ([("tile:xla:a", "0;1;2;3;4"), ("layout:xla:default:b", "0;1;1")], "permutation"),
    ([("tile:xla:a", "0;1;2;3;9"), ("layout:xla:default:b", "0;1;2")], "0..8"),
])
def test_check_rows_rejects_bad_submissions(rows, message):
    with pytest.raises(SubmissionError, match=message):
        check_rows(rows, {"tile:xla:a": 9, "layout:xla:default:b": 3})


def test_write_csv_is_atomic_and_readable(tmp_path):
    path = write_csv(tmp_path / "sub.csv", [("tile:xla:a", "1;0")])
    assert path.read_text() == "ID,TopConfigs\ntile:xla:a,1;0\n"
    assert not list(tmp_path.glob("*.tmp"))
