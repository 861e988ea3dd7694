"""Peak memory per training stage (models/training/memory.py, diagnostics.Stopwatch): a stage's
own peak, the process's life-long peak kept across the resets."""
from __future__ import annotations

import numpy as np
import pytest

from models.training import memory
from models.training.diagnostics import Stopwatch

pytestmark = pytest.mark.skipif(not memory.reset_peak(), reason="needs Linux's clear_refs")


def test_each_stage_has_its_own_peak_and_the_life_long_peak_survives():
    clock = Stopwatch()
    with clock("big"):
        block = np.ones(300 * 2**20 // 8)      # 300 MB, touched
        del block
    with clock("small"):
        np.ones(2**20).sum()
    assert clock.peak_mb["big"] >= clock.peak_mb["small"] + 250
    assert memory.peak_rss_mb() >= clock.peak_mb["big"]
    assert set(clock.seconds) == {"big", "small"}
