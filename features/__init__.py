"""Feature building: TpuGraphs npz files -> one row per (graph, config), cached by key.

The stages, in the order data flows: `hlo/` (a program's HLO text -> graph arrays), `npz/` (raw
files -> validated graph arrays), `graph/` (per-graph tables), `rows/` (feature rows and node
rows), `cache/` (the keyed cache and the builds that fill it). The names below are the face the
command line and models/ use.
"""
import os

# polars' allocator (jemalloc) keeps the pages it frees, so loading an entry part by part left
# about a second matrix resident: a 510 MB dev tile X loaded into a 285 MB process left
# 1,000 MB resident, and 664 MB with freed pages returned at once, for about 1 s more. Read
# when polars is first imported (so before the imports below); a user's own setting wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
# OpenMP threads (LightGBM's, XGBoost's, scikit-learn's, Numba's parallel kernels: GNU libgomp
# in the Linux wheels) spin at most 10,000 times (about 0.1 ms) when they wait, then sleep,
# instead of libgomp's 300,000 (about 3 ms): with another process on one of two cores, a thread
# spinning at a barrier held a core while the thread it waited for had none, and a LambdaRank
# fit took 3.0-5.1x its time on two idle cores, 2.3-2.9x spinning less (a busy core's share is
# 2x); not spinning at all costs 17-52% on idle cores, spinning less 0-5% (the runs' spread)
# (issue 61; docs/records/speed_shared_machine.md). Read when each OpenMP runtime
# loads, so here, before any is imported (models/__init__.py imports this package first); a
# user's own setting of either variable wins. LLVM's runtime (macOS) reads KMP_BLOCKTIME.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "10000"

from features.cache.build import (  # noqa: E402
    BadFilesError, build_entries, build_entry, load_entry, load_or_build, split_parts,
    uses_pool)
from features.cache.entries import default_config_rows, read_meta  # noqa: E402
from features.cache.signature import feature_signature  # noqa: E402
from features.cache.store import reclaim_stale  # noqa: E402
from features.npz.graph import DataFormatError, Graph  # noqa: E402
from features.npz.data_source import DataSource, resolve_data, sample_source  # noqa: E402
from features.rows.feature_set import FeatureSet  # noqa: E402
from features.rows.table import FeatureConfig  # noqa: E402
from features.schema import COLLECTIONS, SPLITS  # noqa: E402

__all__ = ["BadFilesError", "COLLECTIONS", "SPLITS", "DataFormatError", "DataSource",
           "FeatureConfig", "FeatureSet", "Graph", "build_entries", "build_entry",
           "default_config_rows", "feature_signature", "load_entry", "load_or_build", "read_meta",
           "reclaim_stale", "resolve_data", "sample_source", "split_parts", "uses_pool"]
