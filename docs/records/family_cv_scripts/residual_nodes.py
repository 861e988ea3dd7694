"""One-off (issue 58, docs/records/family_cv.md, "what the worst transformer graphs miss"): which
configurable nodes' configs explain a graph's held-out residual (runtime rank minus the
predicted rank of blend_cv.py's lgb_zall + partner_zall, mean of 3 seeds), as the adjusted
between-group share of its variance; with NODE, the mean residual per config of that node.

    REPO=R DEV=../shared/tpugraphs_dev/npz_all/npz CACHE=C PREDS=P/preds-layout-nlp-random.npz \
        python residual_nodes.py bert_base_batch_size_4_seq_512_train_bf16 [NODE]

REPO / CACHE as for blend_cv.py (the rows' config ids come from the same feature entries)."""
import os, sys
from pathlib import Path
import numpy as np
from scipy.stats import rankdata
sys.path.insert(0, os.environ.get("REPO", str(Path(__file__).resolve().parents[3])))
from features import FeatureConfig, build_entries
from features.schema import OPCODE_NAMES
from models.training.runs import TrainConfig, rows_of

c = "layout:nlp:random"
DEV, P = Path(os.environ["DEV"]), np.load(os.environ["PREDS"])
built = build_entries(DEV, [c], ("train", "valid"), FeatureConfig(), Path(os.environ["CACHE"]))
pool = rows_of(built[c, "train"], TrainConfig()).joined(rows_of(built[c, "valid"], TrainConfig()))
assert np.allclose(pool.runtime, P["runtime"])
name, node = sys.argv[1], (int(sys.argv[2]) if len(sys.argv) > 2 else None)
g = list(P["graph_ids"]).index(name)
a, b = P["ptr"][g], P["ptr"][g + 1]
norm = lambda x: (x - x.min()) / (np.ptp(x) or 1)
pred = np.mean([norm(P["lgb_zall"][i, a:b]) + norm(P["partner_zall"][i, a:b]) for i in range(3)], 0)
z = np.load(next(DEV.glob(f"layout/nlp/random/*/{name}.npz")))
cf = z["node_config_feat"][pool.config_idx[a:b]]
ids, op, nf = z["node_config_ids"], z["node_opcode"], z["node_feat"]
res = (rankdata(P["runtime"][a:b]) - rankdata(-pred)) / (b - a)   # +: slower than predicted
y = res - res.mean()


def groups(j):
    _, inv = np.unique(cf[:, j, :], axis=0, return_inverse=True)
    return inv.ravel()


if node is not None:
    inv = groups(list(ids).index(node))
    for k in range(inv.max() + 1):
        m = inv == k
        print(cf[m][0, list(ids).index(node)].astype(int)[:9].tolist(), m.sum(), f"{res[m].mean():+.3f}")
    sys.exit()
share = []
for j in range(cf.shape[1]):
    inv = groups(j)
    cnt, s = np.bincount(inv), np.bincount(inv, y)
    r2 = ((s ** 2) / cnt).sum() / (y ** 2).sum()
    share.append(1 - (1 - r2) * (y.size - 1) / max(y.size - cnt.size, 1))
for j in np.argsort(share)[::-1][:8]:
    v = ids[j]
    print(f"node {v:5d} {OPCODE_NAMES[op[v] - 1]:<10} share {share[j]:.3f} "
          f"shape {nf[v, 21:27].astype(int).tolist()}")
