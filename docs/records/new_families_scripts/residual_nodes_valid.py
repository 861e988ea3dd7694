"""One-off (issue 69, docs/records/new_families.md): which configurable nodes' configs explain a
dev valid graph's residual under a trained run (rank of runtime minus predicted rank, the
adjusted between-group share of its variance per node, named by its HLO instruction); with
NODE, the mean residual of each of that node's values.

    DEV=../shared/tpugraphs_dev python residual_nodes_valid.py RUN layout:nlp:random \
        xlnet_base_batch_size_4_seq_256_train_bf16 [NODE]"""
import os, sys, warnings
from pathlib import Path
import numpy as np
from scipy.stats import rankdata, kendalltau
from models.api import CostModel, rank_file
from features.schema import OPCODE_NAMES
import features.hlo.encode as E
from features.hlo import parse_hlo

warnings.simplefilter("ignore")
DEV = Path(os.environ.get("DEV", "../shared/tpugraphs_dev"))
run, coll, stem = sys.argv[1:4]
node = int(sys.argv[4]) if len(sys.argv) > 4 else None
kind, fam, split = coll.split(":")
path = DEV / f"npz_all/npz/layout/{fam}/{split}/valid/{stem}.npz"
z = np.load(path)
rt = z["config_runtime"].astype(float)
model = CostModel.load(run)
r = rank_file(model, path)
s = r.scores
print("kendall", kendalltau(-s, rt)[0])
captured = {}
orig = E._opcodes
def grab(insts, module):
    captured["insts"] = list(insts)
    return orig(insts, module)
E._opcodes = grab
E.encode_module(parse_hlo(DEV / f"hlo/{stem}.hlo"))
insts = captured["insts"]
ids, op, nf = z["node_config_ids"], z["node_opcode"], z["node_feat"]
cf = z["node_config_feat"]
res = (rankdata(rt) - rankdata(-s)) / rt.size
y = res - res.mean()
def groups(j):
    _, inv = np.unique(cf[:, j, :], axis=0, return_inverse=True)
    return inv.ravel()
if node is not None:
    j = list(ids).index(node)
    inv = groups(j)
    print(insts[node])
    for k in range(inv.max() + 1):
        m = inv == k
        print(cf[m][0, j].astype(int).tolist(), m.sum(), f"res {res[m].mean():+.3f}  logrt {np.log(rt[m]).mean()-np.log(rt).mean():+.3f}  pred {s[m].mean()-s.mean():+.3f}")
    sys.exit()
share = []
for j in range(cf.shape[1]):
    inv = groups(j)
    cnt, sm = np.bincount(inv), np.bincount(inv, y)
    r2 = ((sm ** 2) / cnt).sum() / (y ** 2).sum()
    share.append(1 - (1 - r2) * (y.size - 1) / max(y.size - cnt.size, 1))
for j in np.argsort(share)[::-1][:12]:
    v = ids[j]
    i = insts[v]
    print(f"node {v:5d} share {share[j]:.3f} {i.name} = {i.shape} {i.opcode}({', '.join(map(str, i.operands))[:80]})")
