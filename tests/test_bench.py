"""The benchmark's measuring helpers and report (the full run is the `bench` command)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.bench import feature_stages as fb
from models.bench.run import BenchResult, format_bench, run_bench


def _allocate(mb: int) -> int:
    block = np.ones(mb * 2**20, np.uint8)
    return int(block.sum())


def test_each_stage_reports_its_own_peak_memory():
    # A large peak in the parent (as input generation leaves) must not show up in its children:
    # a spawned child's ru_maxrss starts from it.
    _allocate(800)
    parent_peak = fb.peak_rss_mb()
    record = fb.Recorder(log=lambda _: None)
    assert record("big", _allocate, 400, items=400, unit="MB") == 400 * 2**20
    record("small", _allocate, 1)
    big, small = record.stages["big"], record.stages["small"]
    assert big.peak_rss_mb >= 400
    assert big.peak_rss_mb - small.peak_rss_mb > 300  # the imports are in both
    assert small.peak_rss_mb < parent_peak - 500
    assert big.seconds > 0 and big.throughput.endswith("MB/s")


def _stage(name, seconds, rss=100.0):
    return fb.Stage(name, [fb.Run(s, rss) for s in seconds], 100, "configs")


def test_stage_statistics_and_pairwise_ratios():
    floor = _stage("floor: numpy.load", [1.0, 4.0, 2.0])
    build = _stage("build", [1.2, 4.8, 2.2])
    assert build.seconds == 2.2 and build.seconds_range == (1.2, 4.8)
    # Run i against floor run i: the machine slowing down 4x in round 2 cancels out.
    np.testing.assert_allclose(build.ratios_to(floor), [1.2, 1.2, 1.1])
    with pytest.raises(ValueError, match="one pair per round"):
        _stage("short", [1.0]).ratios_to(floor)


def test_notes_are_medians_over_rounds():
    rounds = [{"fit": 3.0, "split": {"read": 0.1}}, {"fit": 1.0, "split": {"read": 0.3}},
              {"fit": 2.0, "split": {"read": 0.2}}]
    assert fb.median_notes(rounds) == {"fit": 2.0, "split": {"read": 0.2}}


def _result(spec, generated=True):
    stages = [_stage("floor: numpy.load", [2.0, 4.0, 2.0], 900.0),
              _stage("floor: inflate only", [1.0, 2.0, 1.0], 300.0),
              _stage("build layout file, all configs, cold (npz)", [2.5, 6.8, 2.4], 1500.0)]
    notes = {"split": {"read": 0.1, "per_graph": 0.2, "rows": 0.3, "slots": 0.1, "static": 0.1,
                       "per_config": 1.0},
             "per_config_seconds": {10: 0.001, 100: 0.01}, "int8_mb": 100.0,
             "train": {"all_s": 1.0, "rows": 10, "whole_s": 1.5, "small_s": 0.2,
                       "small_rows": 1, "watch_s": 0.9, "fit_rows": 8, "watched_rows": 2,
                       "predict_s": 0.1},
             "tile_rows": 10, "warm_kernels_s": 95.0}
    conditions = fb.Conditions(2, 2, (1.5, 0.5, 0.25), {"python": "3.11.7", "numpy": "1.26.4"})
    inputs = fb.Inputs(Path("big.npz"), Path("npz"), generated)
    return BenchResult(spec, inputs, conditions, (2.0, 1.0, 0.5), stages, notes)


def test_full_report_states_conditions_and_judges_the_targets():
    text = format_bench(_result(fb.BenchSpec()))
    assert "2 CPUs (2 usable)" in text and "1.50 / 0.50 / 0.25 before the run" in text
    assert "python 3.11.7, numpy 1.26.4" in text and "generated in this run" in text
    assert "3 runs per stage" in text
    # median of 1.25, 1.70, 1.20; the peak is judged against 3 x 100 + 1024 MB
    # against inflating alone: 2.5, 3.4, 2.4
    assert ("all configs, cold (npz): 1.25x the decompression floor (runs 1.20-1.70x; 2.50x "
            "inflating alone), peak RSS 1500 MB; 1.5x target met, peak RSS target MISSED") in text
    assert "= 1324 MB" in text and "100.0 us/config" in text
    assert "compiled where not cached, in 95.0 s, untimed" in text


def test_quick_report_has_no_verdicts():
    text = format_bench(_result(fb.QUICK, generated=False))
    assert "reused from an earlier run" in text and "1.25x the decompression floor" in text
    assert "target met" not in text and "MISSED" not in text and "not judged with --quick" in text


def test_bench_needs_at_least_one_run(tmp_path):
    with pytest.raises(ValueError, match="--repeat 0"):
        run_bench(tmp_path, fb.QUICK, repeat=0)
    assert not (tmp_path / "bench").exists()


def test_file_stages_run_on_a_file_larger_than_the_stats_sample(tmp_path):
    # Files above per_config.STAT_CONFIGS configs draw a stats sample; the stages that featurize
    # a file's first configs must cut every per-config array alike (a full bench once crashed).
    spec = fb.BenchSpec(layout_configs=1_200, layout_config_nodes=8, layout_nodes=80,
                        tile_kernels=1, config_steps=(1_200,))
    path, generated = fb.ensure_layout_file(tmp_path, spec)
    assert generated
    split = fb.split_stage(path, tmp_path / "packed", 0.1)   # 0.1 MB: several chunks
    assert split["configs"] == 1_200 and min(split.values()) > 0
    assert fb.per_config_stage(path, tmp_path / "packed", 600, 0.1) > 0
