"""The benchmark's measuring helper and report (the full run is the `bench` command)."""
from __future__ import annotations

import numpy as np

from features import bench as fb
from models.bench import format_bench


def _allocate(mb: int) -> int:
    block = np.ones(mb * 2**20, np.uint8)
    return int(block.sum())


def test_measure_reports_the_child_peak_memory():
    small, _ = fb.measure("small", _allocate, 1)
    big, result = fb.measure("big", _allocate, 300, items=300, unit="MB")
    assert result == 300 * 2**20
    assert big.peak_rss_mb - small.peak_rss_mb > 250
    assert big.seconds > 0 and big.throughput.endswith("MB/s")


def test_report_compares_against_the_floor():
    stages = [fb.Stage("floor: numpy.load", 2.0, 900.0, 100, "configs"),
              fb.Stage("build layout file, all configs, cold (npz)", 2.5, 1500.0, 100, "configs")]
    notes = {"split": {"read": 0.1, "per_graph": 0.2, "rows": 0.3, "per_config": 1.0},
             "per_config_seconds": {10: 0.001, 100: 0.01}, "int8_mb": 100.0,
             "fit_seconds": 1.0, "predict_seconds": 0.1, "tile_rows": 10}
    text = format_bench(stages, notes)
    assert "all configs, cold (npz): 1.25x the decompression floor (target 1.5x)" in text
    assert "1324 MB" in text and "100.0 us/config" in text
