"""Rows of generated sample graphs for every (collection, feature set); usage: OUT.npz"""
import sys
from pathlib import Path
import numpy as np
from models.sample.generate import ensure_sample
from tests.conftest import TINY
from features.npz.find import list_npz
from features.npz.read import read_graph
from features.rows.table import FeatureConfig, file_table, graph_table
from features.schema import COLLECTIONS

root = Path("/tmp/wt72/tiny")
ensure_sample(root, TINY)
npz = root / "npz_all" / "npz"
out = {}
for collection in COLLECTIONS:
    for split in ("train", "valid"):
        path = list_npz(npz, collection, split)[0]
        for fs in ("basic", "full"):
            for ref in ("file", "drawn"):
                cfg = FeatureConfig(feature_set=fs, reference=ref)
                t = file_table(path, collection, split, cfg)
                k = f"{collection}_{split}_{fs}_{ref}"
                out[k + "_X"] = t.X
                out[k + "_cols"] = np.array(t.columns)
                out[k + "_idx"] = t.rows.config_idx
                if t.nodes is not None:
                    for name, v in t.nodes._asdict().items():
                        if isinstance(v, np.ndarray):
                            out[k + "_nodes_" + name] = v
np.savez(sys.argv[1], **out)
print(len(out), "arrays")
