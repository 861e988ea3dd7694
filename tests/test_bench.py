"""The benchmark's measuring helpers, errors, and its report on a small run."""
from __future__ import annotations

import json
import multiprocessing
import pickle
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from models.bench import projection as pj
from models.bench import run
from models.bench import stages as st
from models.bench.run import FLOOR, run_bench, format_bench
from models.training.runs import TrainConfig


def _allocate(mb: int) -> int:
    block = np.ones(mb * 2**20, np.uint8)
    return int(block.sum())


@pytest.mark.slow
def test_each_stage_reports_its_own_peak_memory():
    # A large peak in the parent (as input generation leaves) must not show up in its children:
    # a spawned child's ru_maxrss starts from it.
    _allocate(800)
    parent_peak = st.peak_rss_mb()
    record = st.Recorder(log=lambda _: None)
    assert record("big", _allocate, 400, items=400, unit="MB") == 400 * 2**20
    record("small", _allocate, 1)
    big, small = record.stages["big"], record.stages["small"]
    assert big.peak_rss_mb >= 400
    assert big.peak_rss_mb - small.peak_rss_mb > 300  # the imports are in both
    assert small.peak_rss_mb < parent_peak - 500
    assert big.seconds > 0 and big.throughput.endswith("MB/s")


def _stage(name, seconds, rss=100.0):
    return st.Stage(name, [st.Run(s, rss) for s in seconds], 100, "configs")


def test_stage_statistics_and_pairwise_ratios():
    floor = _stage("floor: numpy.load", [1.0, 4.0, 2.0])
    build = _stage("build", [1.2, 4.8, 2.2])
    assert build.seconds == 2.2 and build.seconds_range == (1.2, 4.8)
    # Run i against floor run i: the machine slowing down 4x in round 2 cancels out.
    np.testing.assert_allclose(build.ratios_to(floor), [1.2, 1.2, 1.1])
    with pytest.raises(ValueError, match="one pair per round"):
        _stage("short", [1.0]).ratios_to(floor)


def test_notes_are_medians_over_rounds_or_their_least_times():
    rounds = [{"fit": 3.0, "split": {"read": 0.1, "peak_mb": 5.0}},
              {"fit": 1.0, "split": {"read": 0.3, "peak_mb": 7.0}},
              {"fit": 2.0, "split": {"read": 0.2, "peak_mb": 6.0}}]
    assert st.round_notes(rounds) == {"fit": 2.0, "split": {"read": 0.2, "peak_mb": 6.0}}
    # memory is not a time: the median still
    assert st.round_notes(rounds, fastest=True) == {"fit": 1.0,
                                                    "split": {"read": 0.1, "peak_mb": 6.0}}


def test_bad_input_fails_before_anything_is_generated(tmp_path):
    with pytest.raises(ValueError, match="--repeat 0"):
        run_bench(tmp_path, st.QUICK, repeat=0)
    not_npz = tmp_path / "graph.npz"
    not_npz.write_text("not a zip")
    with pytest.raises(Exception, match="graph.npz"):
        run_bench(tmp_path, st.QUICK, rank_file=not_npz)
    assert not (tmp_path / "bench").exists()


TINY = st.BenchSpec(layout_configs=1_500, layout_config_nodes=12, layout_nodes=200,
                    tile_kernels=12, hlo_blocks=20, train_rounds=5, layout_train_rows=1_500)


def _in_this_process(fn, *args):
    """measure's twin without a fresh child per stage (seconds of imports each); what goes to
    and comes from a stage is pickled as a child's would be."""
    fn, args = pickle.loads(pickle.dumps((fn, args)))
    start = time.perf_counter()
    result = fn(*args)
    seconds = time.perf_counter() - start
    return st.Run(seconds, st.peak_rss_mb()), pickle.loads(pickle.dumps(result))


def _bench_in_one_child(root, spec):
    """run_bench with every stage in this process, a spawned child of the test's: the stages'
    own code and the report alike, their memory not their own (the test above checks that),
    and what a stage does to its process (the ranking stage pins it to one core) stays here."""
    logged = []
    st.measure = _in_this_process
    return run_bench(root, spec, workers=2, repeat=1, log=logged.append), logged


@pytest.mark.slow
def test_a_small_run_reports_every_stage_the_projection_and_the_ranking(tmp_path):
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result, logged = pool.submit(_bench_in_one_child, tmp_path, TINY).result()
    text = format_bench(result)
    lines = text.splitlines()
    assert lines[0].startswith("bench: 1,500-config layout file, 12 tile kernels (reduced sizes")
    assert "1 run per stage" in lines[0] and "not judged" in lines[0]
    assert lines[1].startswith("machine: ") and "load average" in lines[1]
    assert "lightgbm" in lines[2] and "generated in this run" in lines[3]
    table = {s.name: s for s in result.stages}
    assert len(table) == 13 and all(len(s.runs) == 1 for s in table.values())
    assert all(f"  {name} ..." in logged for name in table)
    for name, s in table.items():   # one line of the table per stage, its ratio to the floor
        row = next(line for line in lines if line.startswith(name + " "))
        assert f"{s.seconds:.2f}" in row and f"{s.peak_rss_mb:.0f}" in row
        ratio = f"{np.median(s.ratios_to(table[FLOOR])):.2f}"
        last = ratio if name.startswith("build layout file") else f"{s.peak_rss_mb:.0f}"
        assert row.split()[-1] == last
    for collection in ("tile:xla", "layout:xla:default", "layout:nlp:random"):
        assert any(line.startswith(collection + " ") for line in lines)
    assert any(line.startswith("dominant: ") for line in lines)
    saved = json.loads((result.inputs.root / "bench.json").read_text())
    # the ratio against the floor stage's time, per configurable-node config, times the
    # download's (every split of every layout file, whole), on the bench's two processes
    floor_stage = table[FLOOR]
    units = sum((f * c) * n.config_nodes for n in pj.DOWNLOAD.values()
                for f, c in zip(n.files, n.configs))
    per_unit = 1 / (TINY.layout_configs * TINY.layout_config_nodes * 2)
    for pick, floor_s in (("median", floor_stage.seconds), ("fastest", floor_stage.fastest)):
        projected = saved["projection"][pick]
        assert projected["floor_s"] == pytest.approx(floor_s * units * per_unit)
        assert projected["ratio"] == pytest.approx(projected["end_to_end_s"] / floor_s
                                                   / (units * per_unit))
    median = saved["projection"]["median"]
    assert median["end_to_end_s"] == pytest.approx(pj.end_to_end_s(pj.project_download(
        run.unit_costs(result))))
    ratio = (f"end to end {median['end_to_end_s'] / 60:.1f} min = {median['ratio']:.1f} x the "
             f"floor ({median['floor_s'] / 60:.1f} min), peak {median['peak_mb']:,.0f} MB")
    assert ratio in lines   # not judged: no targets after it
    fastest = saved["projection"]["fastest"]
    assert (f"from each stage's fastest run (the least load): end to end "
            f"{fastest['end_to_end_s'] / 60:.1f} min = {fastest['ratio']:.1f} x the floor") in text
    models = 2 * TrainConfig.seeds    # each seed's lambdarank and its regression partner
    assert f"per 1,000 layout candidates, with a default run's {models} models" in text
    assert "CostModel.load(run, seeds=1)" in text
    # the tuner round searches with what `tune` uses: a default collection's rankers and nodes
    assert f"on layout:xla:default's {models} models (`tune`'s default" in text
    # and a transformer's, whose reference grows with the measurements
    assert f"on layout:nlp:default's {models} models" in text and "grown again" in text
    assert saved["units"]["workers"] == 2 and saved["units"]["tile"]["columns"] > 0
    # the same layout file trained as each program's collection: nlp rows z-score more groups
    assert saved["units"]["layout_nlp"]["columns"] > saved["units"]["layout_xla"]["columns"]
    assert set(saved["stages"][0]) >= {"name", "runs"}
