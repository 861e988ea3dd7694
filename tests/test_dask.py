"""`--scheduler`: the feature build and training on a Dask LocalCluster of two worker processes
give the rows and (nearly) the scores of a single-process run, and a worker killed mid-build
costs a retry, never a half-written cache entry."""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import socket
import threading
import time

import numpy as np
import pytest
from scipy.stats import kendalltau

pytest.importorskip("distributed", reason="dask[distributed] is not installed (the dask extra)")
pytest.importorskip("dask.dataframe", reason="lightgbm.dask needs dask.dataframe (the dask extra)")

import pipeline  # noqa: E402
from features import FeatureConfig, build_entry, load_entry
from features.cache import dask_build
from models.cli.cluster import connect
from features.rows.feature_set import graph_slices
from features.npz.find import list_npz
from models import metrics
from models.training.dask_train import partition_bounds
from models.training.run_files import ensemble_scores, load_models

from .conftest import QUICK  # noqa: E402

FIELDS = ("X", "runtime", "config_idx", "dup_count", "ptr")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _same_rows(a, b) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.graph_ids == b.graph_ids and a.columns == b.columns


def _names(cache_root):
    return sorted(p.relative_to(cache_root).as_posix() for p in cache_root.rglob("*")
                  if p.is_file())


@pytest.mark.parametrize("collection, split", [("layout:nlp:random", "train"),
                                               ("tile:xla", "train")])
@pytest.mark.slow
def test_the_cluster_build_equals_the_single_process_build(collection, split, client, tiny_npz,
                                                           tmp_path):
    single, _ = build_entry(tiny_npz, collection, split, FeatureConfig(), tmp_path / "single",
                            pack=False)
    cluster, built = build_entry(tiny_npz, collection, split, FeatureConfig(),
                                 tmp_path / "cluster", pack=False, client=client)
    assert built
    _same_rows(load_entry(cluster), load_entry(single))
    # Same cache keys: every unit, part and entry has the name a local build gives it.
    assert _names(tmp_path / "cluster") == _names(tmp_path / "single")


def _die_once(marker: str, npz_file, *args):
    """A task that kills its own worker process the first time any task runs it."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return _real_unit_bytes(npz_file, *args)
    os.kill(os.getpid(), signal.SIGKILL)


_real_unit_bytes = dask_build.unit_bytes


@pytest.mark.slow
def test_a_worker_killed_mid_build_is_retried_and_leaves_no_half_entry(client, tiny_npz,
                                                                       tmp_path, monkeypatch):
    collection = "layout:nlp:random"
    marker = tmp_path / "killed"
    monkeypatch.setattr(dask_build, "unit_bytes", functools.partial(_die_once, str(marker)))
    entry, _ = build_entry(tiny_npz, collection, "train", FeatureConfig(), tmp_path / "cache",
                           pack=False, client=client)
    assert marker.exists(), "no worker was killed: the test proved nothing"
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["files_built_this_run"] == len(list_npz(tiny_npz, collection, "train"))
    single, _ = build_entry(tiny_npz, collection, "train", FeatureConfig(), tmp_path / "single",
                            pack=False)
    _same_rows(load_entry(entry), load_entry(single))
    assert not [n for n in _names(tmp_path / "cache") if ".tmp-" in n]


def test_partitions_hold_whole_groups_of_about_equal_rows():
    sizes = np.array([5, 1, 7, 3, 3, 9, 2])
    bounds = partition_bounds(sizes, 3)
    assert bounds[0] == 0 and bounds[-1] == sizes.size and np.all(np.diff(bounds) > 0)
    rows = [sizes[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])]
    assert len(rows) == 3 and max(rows) - min(rows) <= sizes.max()
    # More workers than groups: one group each, no empty partition.
    assert partition_bounds(np.array([4, 4]), 5).tolist() == [0, 1, 2]


def _run(cache, cluster: bool) -> dict:
    runs = [json.loads(p.read_text()) | {"dir": p.parent}
            for p in (cache / "runs").glob("*/run.json")]
    [run] = [r for r in runs if (r.get("cluster") is not None) == cluster]
    return run


@pytest.mark.parametrize("ranker", ["lambdarank", "xgboost"])
@pytest.mark.slow
def test_training_on_the_cluster_scores_like_a_single_process_run(ranker, client, tiny_root,
                                                                  tmp_path):
    client.wait_for_workers(2, timeout=60)   # the kill test's worker may still be restarting
    collections = ["layout:nlp:random", "layout:xla:random"]
    common = ["--data-dir", str(tiny_root), "--cache-dir", str(tmp_path), "--workers", "1",
              "--collections", *collections, "--ranker", ranker, "--seeds", "1", *QUICK]
    assert pipeline.main(["train", *common]) == 0
    assert pipeline.main(["train", *common, "--scheduler", client.scheduler.address]) == 0
    local, cluster = _run(tmp_path, cluster=False), _run(tmp_path, cluster=True)
    assert cluster["cluster"] == {"workers": 2}
    for c in collections:
        # Rounds are chosen by the same local probe; only the final fit ran on the cluster.
        assert cluster["metrics"][c]["rounds"] == local["metrics"][c]["rounds"]
    # The cluster's model ranks the valid configs like the local one (a few-round fit differs in
    # its details: seen 0.64-0.96 Kendall between the two models' scores, ~0 for unrelated
    # models) and scores no worse. The mean of 2 tiny validation graphs moves between two such
    # fits (one seed's, cluster - local: seen -0.013 and +0.049), so only a clear loss counts.
    assert cluster["final"] > local["final"] - 0.02
    for c in collections:
        valid = load_entry(next((tmp_path / "features").glob(
            f"{c.replace(':', '-')}-valid-*")))
        near, far = load_models(local["dir"], c), load_models(cluster["dir"], c)
        assert [type(m) for m in near] == [type(m) for m in far]   # lambdarank: its partner too
        for a, b in zip(near, far):
            agreement = [kendalltau(a.predict(valid)[rows], b.predict(valid)[rows])[0]
                         for rows in graph_slices(valid.ptr)]
            assert min(agreement) > 0.5, (c, type(a).__name__, agreement)
    # The saved file is the native one `submit` and `rank` load, and it is the model scored.
    valid = load_entry(next((tmp_path / "features").glob("layout-nlp-random-valid-*")))
    score = metrics.collection_score(metrics.per_graph_scores(
        valid.collection, ensemble_scores(load_models(cluster["dir"], "layout:nlp:random"), valid),
        valid.runtime, valid.ptr))
    assert score == pytest.approx(cluster["metrics"]["layout:nlp:random"]["mean"])


def test_a_scheduler_address_gets_a_client_and_one_line_naming_the_cluster(client):
    client.wait_for_workers(2, timeout=60)
    lines = []
    with connect(client.scheduler.address, 5, log=lines.append) as remote:
        assert remote.scheduler.address == client.scheduler.address
    assert lines == [f"running on a Dask cluster at {client.scheduler.address}: 2 workers, "
                     f"2 threads"]


@pytest.mark.slow
def test_a_local_cluster_run_prints_a_local_run_plus_one_line(tiny_root, tmp_path, capsys):
    args = ["build-features", "--data-dir", str(tiny_root), "--collections", "tile:xla",
            "--splits", "valid", "--workers", "1"]
    assert pipeline.main([*args, "--cache-dir", str(tmp_path / "local")]) == 0
    local = capsys.readouterr().out.splitlines()
    assert pipeline.main([*args, "--cache-dir", str(tmp_path / "dask"), "--scheduler",
                          "local"]) == 0
    cluster = capsys.readouterr().out.splitlines()
    banner = [line for line in cluster if line not in local and "Dask" in line]
    assert len(banner) == 1 and len(cluster) == len(local) + 1
    n = os.cpu_count()
    assert re.fullmatch(rf"running on a Dask cluster started for this command \(--scheduler "
                        rf"local\) at tcp://[\d.]+:\d+: {n} workers, {n} threads", banner[0])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _silent_server():
    """A port that accepts connections and never answers (as a web server waits for a
    request line): Dask's own connect timeout does not cover it."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        for conn, _ in accepted:
            conn.close()
        server.close()


@pytest.mark.parametrize("peer", ["closed", "silent"])
@pytest.mark.slow
def test_an_unanswering_scheduler_is_an_error_after_the_timeout_naming_it(peer, tiny_root,
                                                                          tmp_path, capsys):
    with contextlib.ExitStack() as stack:
        address = (f"tcp://127.0.0.1:{_closed_port()}" if peer == "closed"
                   else stack.enter_context(_silent_server()))
        start = time.perf_counter()
        code = pipeline.main(["build-features", "--data-dir", str(tiny_root), "--cache-dir",
                              str(tmp_path), "--scheduler", address, "--scheduler-timeout",
                              "1.5"])
        took = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2 and 1.4 < took < 8, took
    assert err.startswith(f"error: --scheduler {address}: no Dask scheduler answered within "
                          f"1.5 s (--scheduler-timeout)")
    assert "Traceback" not in err and not (tmp_path / "features").exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_the_scheduler_timeout_must_be_a_positive_number(value, capsys):
    with pytest.raises(SystemExit) as exc:
        pipeline.main(["train", "--scheduler-timeout", value])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"--scheduler-timeout: must be a positive number of seconds, got '{value}'" in err
