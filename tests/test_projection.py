"""The full download's projection (models/bench/projection.py) and the unit costs behind it."""
from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from features import FeatureConfig
from features.cache.units import UNITS_PER_PART
from models.bench import projection as pj
from models.bench import stages as st
from models.bench import run

TRAIN = pj.TrainUnits(load=0.0, fit=0.0, check=0.0, predict=0.0, bin_memory=0.0,
                      fit_memory=0.0, check_memory=0.0, held_memory=0.0, columns=300)
ZERO = pj.UnitCosts(floor=0.0, read=0.0, featurize=0.0, graph=0.0, tile_file=0.0, entry=0.0,
                    pool=0.0, workers=2, baseline_mb=0.0, tile=TRAIN,
                    layout_xla=replace(TRAIN, columns=600), layout_nlp=replace(TRAIN, columns=800))
LAYOUT = pj.Counts(files=(10, 2, 3), configs=(5000.0, 4000.0, 1000.0), nodes=3000.0,
                   config_nodes=400.0)
TILE = pj.Counts(files=(100, 10, 20), configs=(1500.0,) * 3, nodes=40.0, config_nodes=0.0)
ROUNDS = 300   # LAMBDARANK_DEFAULTS' n_estimators, both kinds


def test_featurized_is_the_expected_union_of_two_uniform_draws():
    rng = np.random.default_rng(0)
    c, selected = 3000, 2000
    sizes = [np.union1d(rng.choice(c, selected, replace=False),
                        rng.choice(c, pj.STAT_CONFIGS, replace=False)).size for _ in range(400)]
    assert pj.featurized(c, selected) == pytest.approx(np.mean(sizes), rel=0.005)
    assert pj.featurized(800, 800) == 800     # a small file: every config, once


def test_layout_build_is_counts_times_unit_costs():
    u = replace(ZERO, read=1e-9, featurize=2e-9, graph=1e-6, entry=2.0, pool=1.5)
    p = pj.project("layout:xla:random", LAYOUT, u)
    # train files keep 1,000 rows and featurize them with the 1,000-config stats sample:
    # 1000 + 1000 - 1000 * 1000 / 5000 = 1,800; valid files 1000 + 1000 - 250 = 1,750
    train = 10 * (5000 * 400 * 1e-9 + 1800 * 400 * 2e-9 + 3000 * 1e-6) / 2 + 2.0 + 1.5
    valid = 2 * (4000 * 400 * 1e-9 + 1750 * 400 * 2e-9 + 3000 * 1e-6) / 2 + 2.0 + 1.5
    assert p.build_s == pytest.approx(train + valid)
    # test files: 1,000 configs, every one featurized
    assert p.submit_s == pytest.approx(3 * (1000 * 400 * 3e-9 + 3000 * 1e-6) / 2 + 2.0 + 1.5)
    assert p.train_rows == 10_000 and p.train_s == 0
    # one build process starts no pool
    assert pj.project("layout:xla:random", LAYOUT, replace(u, workers=1)).build_s == \
        pytest.approx(2 * (train - 3.5) + 2.0 + 2 * (valid - 3.5) + 2.0)


def test_train_files_are_read_up_to_max_read_configs_layout():
    cfg = FeatureConfig(max_read_configs_layout=1500)
    p = pj.project("layout:xla:random", LAYOUT, replace(ZERO, read=1e-9), cfg)
    # train files stop at 1,500 configs; validation and test files are read whole
    assert p.build_s == pytest.approx((10 * 1500 + 2 * 4000) * 400e-9 / 2)
    assert p.submit_s == pytest.approx(3 * 1000 * 400e-9 / 2)


def test_train_and_submit_are_rows_times_rounds_times_unit_costs():
    t = pj.TrainUnits(load=1e-8, fit=2e-6, check=3e-7, predict=1e-7, bin_memory=0.0,
                      fit_memory=0.5, check_memory=2.0, held_memory=0.3, columns=300)
    p = pj.project("tile:xla", TILE, replace(ZERO, tile=t, tile_file=0.01))
    kept = FeatureConfig().max_train_configs_tile     # rows a tile train graph keeps
    train, valid, test = 100 * kept, 10 * 1500, 20 * 1500
    assert p.train_rows == train
    assert p.train_s == pytest.approx((train + valid) * 300 * 1e-8 + train * ROUNDS * 2e-6
                                      + valid * ROUNDS * 3e-7)
    assert p.submit_s == pytest.approx(20 * 0.01 / 2 + test * 300 * 1e-8 + test * ROUNDS * 1e-7)
    assert p.build_s == pytest.approx(110 * 0.01 / 2)
    # the train rows are held as bins while fitted; then what the fit left, and the valid or
    # test rows scored a part (UNITS_PER_PART files) at a time: the larger of the two
    assert p.peak_mb == pytest.approx(max(0.5 * train * 4, 0.3 * train * 4 + 2.0 * test * 4,
                                          train * 16) * 300 / 2**20)
    many = pj.project("tile:xla", replace(TILE, files=(100, 10, 2000)), replace(ZERO, tile=t))
    part = UNITS_PER_PART["tile"] * 1500
    assert many.peak_mb == pytest.approx((0.3 * train + 2.0 * part) * 4 * 300 / 2**20)
    binned = replace(t, fit_memory=50.0)
    assert pj.project("tile:xla", TILE, replace(ZERO, tile=binned)).peak_mb == \
        pytest.approx(50.0 * train * 300 * 4 / 2**20)
    # binning: per row, and LightGBM's sample of at most SAMPLE_ROWS rows in float64, twice
    sampled = replace(t, bin_memory=2.5)
    assert pj.project("tile:xla", TILE, replace(ZERO, tile=sampled)).peak_mb == \
        pytest.approx((2.5 * train * 300 * 4 + train * 300 * 16) / 2**20)
    # 500,000 train rows: the sample of them stops growing
    big = replace(TILE, files=(500_000 // kept, 10, 20))
    assert pj.project("tile:xla", big, replace(ZERO, tile=sampled)).peak_mb == \
        pytest.approx((2.5 * 500_000 * 300 * 4 + pj.SAMPLE_ROWS * 300 * 16) / 2**20)
    few = pj.project("tile:xla", replace(TILE, files=(1, 10, 0)), replace(ZERO, tile=t))
    assert few.peak_mb == pytest.approx((0.3 * kept + 2.0 * valid) * 300 * 4 / 2**20)
    assert 2.0 * valid * 4 > kept * 16    # the valid rows' above the sample of the train rows


def test_each_layout_collection_is_priced_by_its_own_programs_columns():
    """nlp rows carry more columns than xla rows (Z_GROUP_COLLECTIONS): the bench trains both,
    and each collection's training is priced from the units measured on its own kind."""
    xla = replace(TRAIN, load=1e-8, fit=2e-6, columns=600)
    nlp = replace(xla, fit=3e-6, columns=800)
    u = replace(ZERO, layout_xla=xla, layout_nlp=nlp)
    rows = 10 * FeatureConfig().max_train_configs_layout
    valid = 2 * FeatureConfig().max_valid_configs
    for collection, t in (("layout:xla:default", xla), ("layout:xla:random", xla),
                          ("layout:nlp:default", nlp), ("layout:nlp:random", nlp)):
        assert pj.project(collection, LAYOUT, u).train_s == pytest.approx(
            (rows + valid) * t.columns * 1e-8 + rows * ROUNDS * t.fit), collection
    assert [pj.units_name(c) for c in pj.TRAINED.values()] == list(pj.TRAINED)


def test_the_floor_inflates_every_layout_files_node_config_feat_once():
    u = replace(ZERO, floor=1e-8, workers=2)
    # every split's files whole (train files too): (10 x 5,000 + 2 x 4,000 + 3 x 1,000)
    # configs x 400 configurable nodes; tile files have no node_config_feat
    assert pj.project_floor(u, {"a": LAYOUT, "tile": TILE}) == \
        pytest.approx(61_000 * 400 * 1e-8 / 2)
    # the download's configs x configurable nodes, collection by collection (DOWNLOAD's comment)
    units = ((61 + 7) * 7572 + 8 * 1000) * 780 + ((69 + 7) * 7572 + 8 * 1000) * 780 \
        + ((198 + 20) * 71600 + 17 * 1000) * 504 + ((207 + 20) * 71600 + 17 * 1000) * 504
    assert pj.project_floor(u) == pytest.approx(units * 1e-8 / 2)
    assert pj.project_floor(replace(u, workers=1)) == pytest.approx(units * 1e-8)


# a floor of 600 s on two processes
FLOOR_UNIT = 600.0 * 2 / 16_938_551_040


def test_the_report_judges_the_targets_at_full_size_and_names_the_dominant_stage():
    p = [pj.Projection("tile:xla", 100.0, 1500.0, 300.0, 10, 7000.0),
         pj.Projection("layout:nlp:random", 60.0, 0.0, 0.0, 10, 9000.0)]
    summary = pj.summarize(p, replace(ZERO, floor=FLOOR_UNIT, baseline_mb=1000.0))
    # 1,960 s end to end against a floor of 600 s; the baseline under the largest peak
    assert summary.floor_s == pytest.approx(600.0) and summary.end_to_end_s == 1960.0
    assert summary.ratio == pytest.approx(1960.0 / 600.0) and summary.peak_mb == 10_000.0
    assert summary.record() == pytest.approx({"end_to_end_s": 1960.0, "floor_s": 600.0,
                                              "ratio": 1960.0 / 600.0, "peak_mb": 10_000.0})
    judged = pj.format_projection(p, summary, judged=True)
    assert judged[-2] == ("end to end 32.7 min = 3.3 x the floor (10.0 min), peak 10,000 MB; "
                          "3 x floor target MISSED, 4,096 MB target MISSED")
    assert judged[-1] == "dominant: train of tile:xla, 25.0 min (77% of the total)"
    assert judged[2].split() == ["tile:xla", "100", "1500", "300", "10", "7000"]
    assert "target" not in "\n".join(pj.format_projection(p, summary, judged=False))
    one = [replace(p[0], train_s=100.0, peak_mb=3000.0)]
    fits = pj.format_projection(one, pj.summarize(one, replace(ZERO, floor=FLOOR_UNIT,
                                                               baseline_mb=100.0)), judged=True)
    assert fits[-2].endswith("= 0.8 x the floor (10.0 min), peak 3,100 MB; "
                             "3 x floor target met, 4,096 MB target met")
    assert pj.summarize(one, ZERO).ratio == float("inf")   # no floor measured


def test_download_counts_stay_within_the_largest_published_file():
    # A mean file cannot hold more node_config_feat than the largest one does (2.6 GB float32)
    for collection, n in pj.DOWNLOAD.items():
        for configs in n.configs:
            assert configs * n.config_nodes <= pj.MAX_CONFIG_NODE_UNITS, collection


def _train_notes(rows, columns, rounds, fit, check, predict, load, x_mb, peaks):
    return {"rows": rows, "columns": columns, "rounds": rounds, "x_mb": x_mb,
            "loaded_values": rows * columns, "load_s": load * rows * columns,
            "bin": 0.25 * fit * rows * rounds, "fit": 0.75 * fit * rows * rounds,
            "validate": predict * rows * rounds, "report data": (check - predict) * rows * rounds,
            "bin_peak_mb": peaks[0] + pj.sample_mb(rows, columns), "fit_peak_mb": peaks[0],
            "held_peak_mb": peaks[2], "check_peak_mb": peaks[1], "part_mb": x_mb / 2,
            "valid_rows": rows}


def test_unit_costs_recover_the_costs_behind_the_stage_times():
    """Stage times made from chosen unit costs, as the bench's stages would measure them."""
    spec, w = st.BenchSpec(), 2
    c, nc = spec.layout_configs, spec.layout_config_nodes
    read, featurize, tables, entry = 2e-9, 5e-9, 1.2, 0.7
    done = pj.featurized(c, FeatureConfig().max_train_configs_layout)
    few = tables + entry
    times = {run.BASELINE: (0.0, 300.0), run.FLOOR: (2.7, 0.0), run.FEW_BUILD: (few, 0.0),
             run.DEFAULT_BUILD: (few + nc * (c * read + done * featurize), 0.0),
             run.ALL_BUILD: (few + nc * c * (read + featurize), 0.0),
             run.TILE_BUILD.format(workers=w): (10.0, 0.0), run.POOL.format(workers=w): (1.2, 0.0),
             run.TRAIN.format(kind="tile:xla", rounds=spec.train_rounds): (50.0, 1300.0),
             run.TRAIN.format(kind="layout:xla:random", rounds=spec.train_rounds): (20.0, 500.0),
             run.TRAIN.format(kind="layout:nlp:random", rounds=spec.train_rounds): (25.0, 600.0)}
    stages = [st.Stage(name, [st.Run(*v)]) for name, v in times.items()]
    notes = {"graph_tables_s": tables, "train": {
        "tile": _train_notes(400_000, 300, 100, 3e-6, 4e-7, 1e-7, 6e-8, 500.0,
                             (550.0, 1300.0, 400.0)),
        "layout_xla": _train_notes(50_000, 650, 100, 8e-6, 9e-7, 2e-7, 5e-8, 100.0,
                                   (500.0, 400.0, 350.0)),
        "layout_nlp": _train_notes(50_000, 820, 100, 1e-5, 9e-7, 2e-7, 5e-8, 100.0,
                                   (500.0, 400.0, 350.0))}}
    r = run.BenchResult(spec, st.Inputs(Path("x"), False), st.conditions(), (0.0,) * 3, stages,
                        notes, notes, w)
    u = run.unit_costs(r)
    assert u.floor == pytest.approx(2.7 / (c * nc))
    assert u.read == pytest.approx(read) and u.featurize == pytest.approx(featurize)
    assert u.graph == pytest.approx(tables / spec.layout_nodes)
    assert u.entry == pytest.approx(entry) and u.pool == 1.2 and u.baseline_mb == 300.0
    assert u.tile_file == pytest.approx(10.0 * w / spec.tile_kernels)
    # memory over the baseline (300), per MB of the train rows (x_mb) or of a valid part
    # (x_mb / 2); the check's over what the fit left held
    assert u.tile == pytest.approx(pj.TrainUnits(6e-8, 3e-6, 4e-7, 1e-7, 0.5, 0.5, 3.6, 0.2,
                                                 300))
    assert u.layout_xla == pytest.approx(pj.TrainUnits(5e-8, 8e-6, 9e-7, 2e-7, 2.0, 2.0, 1.0,
                                                       0.5, 650))
    assert u.layout_nlp == pytest.approx(pj.TrainUnits(5e-8, 1e-5, 9e-7, 2e-7, 2.0, 2.0, 1.0,
                                                       0.5, 820))


def test_the_fastest_projection_takes_each_stages_fastest_run_and_the_medians_memory():
    """The same stages run twice more, slower: the projection from each stage's fastest run is
    the one-run projection, and the ratio from the medians shows the load."""
    spec, w = st.BenchSpec(), 2
    names = [run.BASELINE, run.FLOOR, run.FEW_BUILD, run.DEFAULT_BUILD, run.ALL_BUILD,
             run.TILE_BUILD.format(workers=w), run.POOL.format(workers=w)]
    seconds = dict(zip(names, [0.0, 2.7, 2.0, 30.0, 60.0, 10.0, 1.2]))
    rounds = [{"graph_tables_s": 1.2 * k, "train": {
        kind: _train_notes(50_000, 300, 100, 3e-6 * k, 4e-7 * k, 1e-7 * k, 6e-8 * k, 100.0,
                           (500.0 * k, 400.0 * k, 350.0 * k)) for kind in pj.TRAINED}}
        for k in (1, 3, 2)]   # the rounds' notes: times and peaks 1x, 3x, 2x

    def result(factors):
        stages = [st.Stage(n, [st.Run(t * k, 300.0) for k in factors])
                  for n, t in seconds.items()]
        return run.BenchResult(spec, st.Inputs(Path("x"), False), st.conditions(), (0.0,) * 3,
                               stages, st.round_notes(rounds[:len(factors)]),
                               st.round_notes(rounds[:len(factors)], fastest=True), w)
    once, loaded = result([1]), result([1, 3, 2])
    fast = run.unit_costs(loaded, fastest=True)
    assert run.unit_costs(loaded).floor == pytest.approx(2 * fast.floor)   # median 2x, min 1x
    timed = ("load", "fit", "check", "predict")
    for kind in pj.TRAINED:
        f, o, m = (getattr(x, kind) for x in (fast, run.unit_costs(once), run.unit_costs(loaded)))
        assert [getattr(f, k) for k in timed] == pytest.approx([getattr(o, k) for k in timed])
        assert f.fit_memory == m.fit_memory != o.fit_memory   # memory: the medians' figures
    builds = {k: v for k, v in asdict(fast).items() if k not in pj.TRAINED}
    assert builds == pytest.approx({k: v for k, v in asdict(run.unit_costs(once)).items()
                                    if k not in pj.TRAINED})
    # the medians: every time twice the fastest, so the end to end and the floor are twice
    # theirs and the ratio is the same
    median, least = run.download_summary(run.unit_costs(loaded)), run.download_summary(fast)
    assert least.floor_s == pytest.approx(2.7 / (spec.layout_configs * spec.layout_config_nodes)
                                          * 16_938_551_040 / w)
    assert median.floor_s == pytest.approx(2 * least.floor_s)
    assert median.end_to_end_s == pytest.approx(2 * least.end_to_end_s)
    assert median.ratio == pytest.approx(least.ratio)
    assert least.ratio == pytest.approx(least.end_to_end_s / least.floor_s)
