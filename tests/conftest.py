"""Shared fixtures: a tiny generated TpuGraphs tree (made once per session) and a seeded rng."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from models.sample.generate import SampleSpec, ensure_sample

TINY = SampleSpec(seed=7, tile_graphs=(10, 4, 3), tile_configs=(12, 60), layout_graphs=(4, 2, 2),
                  xla_nodes=(60, 120), nlp_nodes=(40, 80), layout_configs=(150, 400),
                  test_layout_configs=120)


# The least a feature build runs every kernel on: one graph of each split per collection.
WARM_UP = SampleSpec(seed=3, tile_graphs=(1, 1, 1), tile_configs=(12, 20), layout_graphs=(1, 1, 1),
                     xla_nodes=(40, 60), nlp_nodes=(30, 40), layout_configs=(60, 80),
                     test_layout_configs=40)
ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """Compile the two kernels that take minutes (features/rows/compiled.py) into Numba's
    on-disk cache before the tests, when they are not there yet (a fresh clone): a feature
    build on two workers compiles them side by side (features/cache/compile_ahead.py), where
    the first test to need them would compile them one after the other. Not when only
    collecting."""
    if config.option.collectonly:
        return
    import subprocess
    import tempfile

    from features.rows.compiled import compiled, slow_kernels

    if all(compiled(kernel) for kernel in slow_kernels(None)):
        return
    with tempfile.TemporaryDirectory(prefix="warm-up-") as tmp:
        ensure_sample(Path(tmp) / "tiny", WARM_UP)
        done = subprocess.run([sys.executable, "pipeline.py", "build-features", "--data-dir",
                               str(Path(tmp) / "tiny"), "--cache-dir", str(Path(tmp) / "cache"),
                               "--workers", "2"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise pytest.UsageError(f"the tests' warm-up (tests/conftest.py) failed:\n"
                                f"{done.stdout}{done.stderr}")


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    """The download-style root (holding npz_all/npz/...) of a small generated dataset."""
    root = tmp_path_factory.mktemp("tpugraphs") / "tiny"
    ensure_sample(root, TINY)
    return root


@pytest.fixture(scope="session")
def tiny_npz(tiny_root) -> Path:
    return tiny_root / "npz_all" / "npz"


# The realistic dev data (shared/tpugraphs_dev, or $TPUGRAPHS_DEV); tests on it skip without it.
DEV = Path(os.environ.get("TPUGRAPHS_DEV",
                          Path(__file__).resolve().parents[2] / "shared" / "tpugraphs_dev"))


@pytest.fixture(scope="session")
def dev_npz() -> Path:
    """The dev data's npz directory (tile/, layout/ under it); skips the test when absent."""
    if not (DEV / "npz_all" / "npz").is_dir():
        pytest.skip(f"no dev data at {DEV}")
    return DEV / "npz_all" / "npz"


# The dev valid split's families with no version in train (shared/tpugraphs_dev/README.md, "valid:
# families with no relative in train"): the plainest transfer measure the dev set has.
DEV_NEW_FAMILIES = {
    "layout:nlp": ("xlnet", "roformer", "esm", "phi", "mixtral", "whisper"),
    "layout:xla": ("vit", "swin", "mit", "cspnet", "hgnet"),
}


def dev_new_families(collection: str) -> tuple[str, ...]:
    """The new families of a layout collection ('layout:nlp:random' -> the nlp ones)."""
    return DEV_NEW_FAMILIES[collection.rsplit(":", 1)[0]]


QUICK = ["--set", "n_estimators=40", "--set", "early_stopping=10"]
# The tiny tree's tile graphs hold about 300 train rows: leaves of tile's default 100 rows leave a
# tree a split or two, ties decide the picks, and whether a run beats random is a coin toss.
QUICK_LGBM = [*QUICK, "--set", "min_data_in_leaf=20"]


def quick(ranker: str = "lambdarank") -> list[str]:
    """QUICK's settings for a ranker (XGBoost has no min_data_in_leaf)."""
    return QUICK if ranker == "xgboost" else QUICK_LGBM


@pytest.fixture(scope="session")
def trained(tiny_root, tmp_path_factory):
    """Features and a quick LambdaRank run on the tiny tree: (cache dir, the common CLI args)."""
    import pipeline

    cache = tmp_path_factory.mktemp("cache")
    common = ["--data-dir", str(tiny_root), "--cache-dir", str(cache), "--workers", "1"]
    assert pipeline.main(["build-features", *common]) == 0
    assert pipeline.main(["train", "--ranker", "lambdarank", *common, *QUICK_LGBM]) == 0
    return cache, common


@pytest.fixture(scope="session")
def trained_run(trained) -> Path:
    """The directory of the `trained` run: the LambdaRank run holding all five collections
    (other tests add runs of other rankers or fewer collections to the same cache)."""
    from features.schema import COLLECTIONS

    cache, _ = trained
    runs = [p.parent for p in (cache / "runs").glob("lambdarank-*/run.json")
            if set(json.loads(p.read_text())["metrics"]) == set(COLLECTIONS)]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def make_ranking(rng: np.random.Generator, sizes, n_features: int = 6,
                 collection: str = "layout:xla:random"):
    """Synthetic FeatureSet with known structure: log runtime = 2*x0 - x1 + small noise, plus a
    per-graph offset the rankers must ignore."""
    from features import FeatureSet

    sizes = np.asarray(sizes)
    n = int(sizes.sum())
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    graph = np.repeat(np.arange(sizes.size), sizes)
    log_rt = 2 * X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=n) + 3 * graph
    return FeatureSet(X=X, runtime=np.exp(log_rt), config_idx=np.concatenate(
        [np.arange(s) for s in sizes]).astype(np.int64), dup_count=np.ones(n, np.int32),
        ptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        graph_ids=tuple(f"g{i}" for i in range(sizes.size)), collection=collection,
        columns=tuple(f"f{i}" for i in range(n_features)))
