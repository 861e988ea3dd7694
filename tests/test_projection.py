"""The projection of the full download's time (models/bench/projection.py) and its unit costs."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from features import PARALLEL_MIN_BYTES, FeatureConfig
from models.bench import feature_stages as fb
from features.io import list_npz
from features.schema import COLLECTIONS
from models.bench import projection as pj
from models.bench import train as tb
from models.bench.run import BASELINE, FEW_CONFIGS_BUILD, BenchResult, unit_costs

ZERO = pj.UnitCosts(read=0.0, featurize=0.0, graph=0.0, static=0.0, tile_file=0.0,
                    entry=0.0, train_round=0.0, train=0.0, pair=0.0, layout_row=0.0,
                    watched=0.0, predict=0.0,
                    tile_columns=300, layout_columns=600, workers=2)


def test_featurized_is_the_expected_union_of_two_uniform_draws():
    rng = np.random.default_rng(0)
    c, selected = 3000, 2000
    sizes = [np.union1d(rng.choice(c, selected, replace=False),
                        rng.choice(c, pj.STAT_CONFIGS, replace=False)).size for _ in range(400)]
    assert pj.featurized(c, selected) == pytest.approx(np.mean(sizes), rel=0.005)
    assert pj.featurized(800, 800) == 800     # a small file: every config, once


def test_layout_build_time_is_counts_times_unit_costs():
    n = pj.Counts(files=(10, 2, 3), configs=(5000.0, 4000.0, 1000.0), nodes=3000.0,
                  config_nodes=400.0)
    p = pj.project("layout:xla:random", n, replace(ZERO, read=1e-9, graph=1e-6))
    # read: every config of every file; graph: every node of every graph; two workers
    assert p.build_s == pytest.approx((10 * 5000 + 2 * 4000) * 400e-9 / 2 + 12 * 3000e-6 / 2)
    assert p.submit_s == pytest.approx(3 * (1000 * 400e-9 + 3000e-6) / 2)
    cap = FeatureConfig().max_train_configs_layout
    assert p.train_rows == 10 * cap and p.train_s == 0
    e = pj.project("layout:xla:random", n, replace(ZERO, entry=2.0))   # one per split
    assert (e.build_s, e.submit_s) == (4.0, 2.0)
    # a layout entry's own cost, once measured, replaces the tile entry's; tile keeps its own
    e = pj.project("layout:xla:random", n, replace(ZERO, entry=2.0, layout_entry=3.0))
    assert (e.build_s, e.submit_s) == (6.0, 3.0)
    t = pj.project("tile:xla", n, replace(ZERO, entry=2.0, layout_entry=3.0))
    assert (t.build_s, t.submit_s) == (4.0, 2.0)
    # starting the workers: every split above PARALLEL_MIN_BYTES of more than one file
    big, small = PARALLEL_MIN_BYTES, PARALLEL_MIN_BYTES - 1
    w = pj.project("layout:xla:random", replace(n, input_bytes=(big, small, big)),
                   replace(ZERO, pool=1.5))
    assert (w.build_s, w.submit_s) == (1.5, 1.5)
    one = pj.project("layout:xla:random", replace(n, files=(1, 2, 3)), replace(ZERO, pool=1.5))
    assert (one.build_s, one.submit_s) == (1.5, 1.5)
    serial = pj.project("layout:xla:random", n, replace(ZERO, pool=1.5, workers=1))
    assert (serial.build_s, serial.submit_s) == (0.0, 0.0)
    f = pj.project("layout:xla:random", n, replace(ZERO, featurize=1e-9))
    rows = 10 * pj.featurized(5000, cap) + 2 * pj.featurized(4000, 1000)
    assert f.build_s == pytest.approx(rows * 400e-9 / 2)


def test_train_files_are_read_up_to_max_read_configs_layout():
    n = pj.Counts(files=(10, 2, 3), configs=(5000.0, 4000.0, 1000.0), nodes=3000.0,
                  config_nodes=400.0)
    cfg = FeatureConfig(max_read_configs_layout=1500)
    p = pj.project("layout:xla:random", n, replace(ZERO, read=1e-9), cfg)
    # train files stop at 1,500 configs; validation and test files are read whole
    assert p.build_s == pytest.approx((10 * 1500 + 2 * 4000) * 400e-9 / 2)
    assert p.submit_s == pytest.approx(3 * 1000 * 400e-9 / 2)
    assert p.train_rows == 10 * min(1500, cfg.max_train_configs_layout)


def test_training_time_grows_with_rows_rounds_and_columns():
    n = pj.Counts(files=(100, 10, 10), configs=(1500.0,) * 3, nodes=40.0, config_nodes=0.0)
    u = replace(ZERO, train=1e-9)
    base = pj.project("tile:xla", n, u, rounds=100)
    assert base.train_rows == 100 * FeatureConfig().max_train_configs_tile
    # twice the rounds: the refit twice as long, the probe's fixed early_stopping tail not
    assert 1.5 * base.train_s < pj.project("tile:xla", n, u, rounds=200).train_s < 2 * base.train_s
    assert pj.project("tile:xla", n, replace(u, tile_columns=600), rounds=100).train_s == \
        pytest.approx(2 * base.train_s)
    assert pj.project("tile:xla", replace(n, files=(200, 10, 10)), u, rounds=100).train_s == \
        pytest.approx(2 * base.train_s)


def test_counts_of_a_tree_match_its_arrays(tiny_npz):
    counts = pj.counts_of(tiny_npz)
    assert set(counts) == set(COLLECTIONS)
    for collection, n in counts.items():
        configs, nodes, config_nodes = [], [], []
        for s, split in enumerate(pj.SPLIT_NAMES):
            files = list_npz(tiny_npz, collection, split)
            assert n.files[s] == len(files)
            assert n.input_bytes[s] == sum(f.stat().st_size for f in files)
            arrays = [np.load(f) for f in files]
            per_file = [len({a["config_feat"][i].tobytes() for i in range(len(a["config_feat"]))})
                        if collection == "tile:xla" and split == "train"
                        else a["config_runtime"].size for a in arrays]
            assert n.configs[s] == pytest.approx(np.mean(per_file))
            nodes += [a["node_feat"].shape[0] for a in arrays]
            config_nodes += [a["node_config_ids"].size if "node_config_ids" in a else 0
                             for a in arrays]
        assert n.nodes == pytest.approx(np.mean(nodes))
        assert n.config_nodes == pytest.approx(np.mean(config_nodes))


def _bench_result(spec: fb.BenchSpec) -> BenchResult:
    """Stage times built from chosen unit costs, so unit_costs must recover them."""
    c, nc = spec.layout_configs, spec.layout_config_nodes
    read, featurize, graph_s, static_s = 2e-9, 5e-9, 0.5, 0.8
    read_c = pj.configs_read(c, FeatureConfig())          # a prefix, if the defaults cut one
    done = pj.featurized(read_c, FeatureConfig().max_train_configs_layout)
    few = graph_s + static_s + 0.7          # the same graph, FEW_CONFIGS configs
    default = read_c * nc * read + done * nc * featurize + few
    every = c * nc * read + c * nc * featurize + few
    stages = [fb.Stage(name, [fb.Run(t, 100.0)]) for name, t in (
        ("build layout file, default settings, cold (npz)", default),
        ("build layout file, all configs, cold (npz)", every),
        (FEW_CONFIGS_BUILD, few),
        (f"build tile collection ({spec.tile_kernels} kernels, 2 workers)", 10.0),
        ("build an entry of one tile file (2 workers)", 1.5),
        ("start 2 build workers, stop them", 1.2), (BASELINE, 0.0))]
    notes = {"split": {"per_graph": graph_s, "static": static_s},
             "train": {**_fits(per_round=0.01, row=3e-9, pair=4e-10, watched=2e-7,
                                predict=1e-10), "load_s": 0.5, "x_mb": 150.0,
                       "one_column_load_s": 0.2 + 100_000 * 6e-8,
                       "start_mb": 120.0, "load_peak_mb": 345.0, "loaded_mb": 300.0,
                       "small_x_mb": 15.0, "small_fit_mb": 40.0, "fit_mb": 175.0},
             "layout_train": {"small_rows": 10_000, "large_rows": 30_000,
                              "small_s": tb.LAYOUT_ROUNDS * (0.003 + 10_000 * 4e-6),
                              "large_s": tb.LAYOUT_ROUNDS * (0.003 + 30_000 * 4e-6)},
             "ranking": {"parts": {"columns": 650}}, "command_s": 3.5}
    return BenchResult(spec, fb.Inputs(Path("x"), Path("y"), False),
                       fb.Conditions(2, 2, (0.0, 0.0, 0.0), {}), (0.0, 0.0, 0.0), stages, notes)


def test_unit_costs_recover_the_costs_behind_the_stage_times():
    spec = fb.BenchSpec()
    u = unit_costs(_bench_result(spec), workers=2)
    assert u.read == pytest.approx(2e-9) and u.featurize == pytest.approx(5e-9)
    assert u.graph == pytest.approx(0.5 / spec.layout_nodes)
    assert u.static == pytest.approx(0.8 / spec.layout_config_nodes)
    assert u.tile_file == pytest.approx(10.0 * 2 / spec.tile_kernels)
    assert u.train_round == pytest.approx(0.01) and u.train == pytest.approx(3e-9)
    assert u.pair == pytest.approx(4e-10) and u.layout_row == pytest.approx(4e-6)
    assert u.layout_round == pytest.approx(0.003)
    assert u.entry == pytest.approx(1.5) and u.layout_entry == pytest.approx(0.7)
    assert u.pool == pytest.approx(1.2)
    # 100,000 rows of 50 columns (150 MB) loaded in 0.5 s (0.2 s an entry, 60 ns a value: one
    # column took 0.206 s), peaking 225 MB above the start and leaving 180 MB more resident; the
    # probe added 40 MB on a tenth of them, 175 MB on all: 1 MB per MB and 25 MB whatever the size
    assert u.load == pytest.approx(6e-8) and u.entry_load == pytest.approx(0.2)
    assert u.matrix_memory == pytest.approx(1.2)
    assert u.load_memory == pytest.approx(1.5)
    assert u.fit_extra == pytest.approx(1.0) and u.fit_fixed_mb == pytest.approx(25.0)
    assert u.baseline_mb == 120.0
    assert u.watched == pytest.approx(2e-7) and u.predict == pytest.approx(1e-10)
    assert (u.tile_columns, u.layout_columns, u.workers, u.command) == (50, 650, 2, 3.5)


def _fits(per_round, row, pair, watched, predict, cols=50):
    """train_bench.train_stage's measurements of fits that cost exactly this: 400 graphs of
    250 rows, every tenth in the small fit, the first 320 fitted while the rest are watched."""
    sizes = np.full(400, 250)
    counts = {"rows": 100_000, "small_rows": 10_000, "fit_rows": 80_000, "watched_rows": 20_000,
              "pairs": tb.pairs(sizes, 20), "whole_pairs": tb.pairs(sizes, 250),
              "small_pairs": tb.pairs(sizes[::10], 20), "fit_pairs": tb.pairs(sizes[:320], 20)}

    def cost(n, p, w=0):
        return tb.ROUNDS * (per_round + row * n * cols + pair * p + watched * w)
    return {**counts, "columns": cols, "all_s": cost(100_000, counts["pairs"]),
            "whole_s": cost(100_000, counts["whole_pairs"]),
            "small_s": cost(10_000, counts["small_pairs"]),
            "watch_s": cost(80_000, counts["fit_pairs"], 20_000),
            "predict_s": predict * tb.ROUNDS * 100_000}


def test_pairs_are_each_row_against_its_group_up_to_the_truncation():
    assert tb.pairs(np.array([3, 30]), 20) == 3 * 3 + 30 * 20
    assert tb.pairs(np.array([3, 30]), 1000) == 9 + 900
    # a 1,200-row group trains as three sub-groups of 400 (max_group_size 500)
    assert tb.pairs(np.array([1200]), 1000) == 3 * 400 * 400


def test_projection_is_judged_only_at_full_size():
    p = [pj.Projection("tile:xla", 100.0, 1500.0, 300.0, 10, 9000.0)]
    judged = "\n".join(pj.format_projection(p, "t", judged=True))
    assert "31.7 min" in judged and "30-minute target MISSED" in judged
    # three commands starting at 20 s each add a minute
    assert "32.7 min with 3 command starts of 20.0 s" in "\n".join(
        pj.format_projection(p, "t", judged=True, command_s=20.0))
    assert "8,192 MB target MISSED" in judged
    assert "target" not in "\n".join(pj.format_projection(p, "t", judged=False))


def test_download_counts_stay_within_the_largest_published_file():
    # A mean file cannot hold more node_config_feat than the largest one does (2.6 GB float32)
    for collection, n in pj.DOWNLOAD.items():
        for configs in n.configs:
            assert configs * n.config_nodes <= pj.MAX_CONFIG_NODE_UNITS, collection


def test_layout_rounds_cost_their_own_fixed_part():
    n = pj.Counts(files=(10, 2, 2), configs=(5000.0, 1000.0, 1000.0), nodes=3000.0,
                  config_nodes=600.0)
    tile_round = pj.project("layout:xla:random", n, replace(ZERO, train_round=0.01), rounds=100)
    own = pj.project("layout:xla:random", n, replace(ZERO, train_round=0.01, layout_round=0.03),
                     rounds=100)
    assert tile_round.train_s > 0 and own.train_s == pytest.approx(3 * tile_round.train_s)
    assert pj.project("tile:xla", n, replace(ZERO, train_round=0.01, layout_round=0.03),
                      rounds=100).train_s == pytest.approx(tile_round.train_s)
    # a layout round measured at nothing is nothing, not a tile round
    assert pj.project("layout:xla:random", n, replace(ZERO, train_round=0.01, layout_round=0.0),
                      rounds=100).train_s == 0


def test_loading_and_validation_are_billed_to_train_and_submit():
    n = pj.Counts(files=(100, 10, 20), configs=(1500.0,) * 3, nodes=40.0, config_nodes=0.0)
    rows = {"train": 100 * FeatureConfig().max_train_configs_tile, "valid": 10 * 1500,
            "test": 20 * 1500}
    load = pj.project("tile:xla", n, replace(ZERO, load=1e-9))
    assert load.train_s == pytest.approx((rows["train"] + rows["valid"]) * 300 * 1e-9)
    assert load.submit_s == pytest.approx(rows["test"] * 300 * 1e-9)
    # every entry read costs its fixed part: train's checks and loads, submit's test entry
    entries = pj.project("tile:xla", n, replace(ZERO, entry_load=0.25))
    assert (entries.train_s, entries.submit_s) == (pj.TRAIN_LOADS * 0.25, 0.25)
    # the valid rows are predicted twice (score, then round by round), the test rows once
    p = pj.project("tile:xla", n, replace(ZERO, predict=1e-9), rounds=100)
    assert p.train_s == pytest.approx(pj.VALID_PASSES * rows["valid"] * 100e-9)
    assert p.submit_s == pytest.approx(rows["test"] * 100e-9)


def test_train_peak_is_the_largest_collection_held_alone():
    """train holds one collection at a time, its valid rows only after its fit."""
    n = pj.Counts(files=(100, 10, 20), configs=(1500.0,) * 3, nodes=40.0, config_nodes=0.0)
    u = replace(ZERO, load_memory=1.8, matrix_memory=1.5, fit_extra=0.5, fit_fixed_mb=40.0)
    p = pj.project("tile:xla", n, u)
    train_mb = 100 * FeatureConfig().max_train_configs_tile * 300 * 4 / 2**20
    valid_mb = 10 * 1500 * 300 * 4 / 2**20
    assert p.peak_mb == pytest.approx(1.5 * train_mb + 0.5 * train_mb + 40)
    few_train = pj.project("tile:xla", replace(n, files=(1, 10, 20)),
                           replace(u, fit_fixed_mb=0.0))
    assert few_train.peak_mb == pytest.approx(1.8 * valid_mb)   # the valid rows, after the fit
    assert pj.project("tile:xla", n, replace(u, load_memory=9.0)).peak_mb == \
        pytest.approx(9 * train_mb)                                 # a load above its fit
    other = pj.Projection("layout:nlp:random", 0, 0, 0, 10, peak_mb=150.0)
    assert pj.train_peak_mb([p, other], 200.0) == pytest.approx(200 + p.peak_mb)
    assert few_train.peak_mb < 150 and pj.train_peak_mb([few_train, other], 200.0) == 350.0


def test_an_older_bench_json_projects_without_its_retired_field(tiny_npz, tmp_path):
    """fit_memory (older benches) counted the matrix itself: read as fit_extra it would count
    the matrix twice, so it is left out and the default stands."""
    import json
    from dataclasses import asdict
    from models.bench.run import projection_for
    units = replace(ZERO, matrix_memory=1.0, load_memory=1.0)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"units": {**asdict(units), "fit_memory": 2.96}}))
    got = {p.collection: p for p in projection_for(tiny_npz, path)}
    n = pj.counts_of(tiny_npz)["tile:xla"]
    rows = n.files[0] * min(n.configs[0], FeatureConfig().max_train_configs_tile)
    train_mb = rows * 300 * 4 / 2**20
    assert got["tile:xla"].peak_mb == pytest.approx(
        max((1.0 + pj.UnitCosts.fit_extra) * train_mb,
            n.files[1] * n.configs[1] * 300 * 4 / 2**20))
