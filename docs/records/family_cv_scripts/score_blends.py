"""Score blends of blend_cv.py's held-out predictions: per seed, each model min-max scaled per graph
and averaged (run_files.mean_normalized), Kendall per graph; families; paired against a base.

    DEV=../shared/tpugraphs_dev/npz_all/npz python score_blends.py preds/preds-layout-nlp-random.npz \
        layout:nlp:random lgb+partner lgb_zall+partner_zall lgb+partner+xgb 2*lgb+2*partner+1*xgb

BIG=N scores only graphs of at least N nodes."""
import sys, itertools
import numpy as np
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from models import metrics
from models.training.run_files import mean_normalized
from models.training.family_split import graph_family

path, collection, base, combos = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
d = np.load(path)
ptr, rt, gids = d["ptr"], d["runtime"], list(d["graph_ids"])
import os, glob
from pathlib import Path
BIG = int(os.environ.get("BIG", "0"))     # >0: score only graphs of at least BIG nodes
if BIG:
    sizes = {Path(p).stem: np.load(p)["node_feat"].shape[0] for p in glob.glob(
        f"{os.environ['DEV']}/{collection.replace(':', '/')}/*/*.npz")}
    big = np.array([sizes[g] >= BIG for g in gids])
fams = np.array([graph_family(g) for g in gids])
names = np.unique(fams if not BIG else fams[big])

def per_graph(combo):   # (seeds, graphs)
    parts = combo.split("+")
    weights = [float(p.split("*")[0]) if "*" in p else 1.0 for p in parts]
    keys = [p.split("*")[-1] for p in parts]
    out = []
    for i in range(3):
        s = [d[k][i] for k in keys]
        if len(s) == 1:
            b = s[0]
        else:
            w = np.array(weights) / sum(weights)
            b = sum(wi * mean_normalized([si], ptr) for wi, si in zip(w, s))
        pg = metrics.per_graph_scores(collection, b, rt, ptr)
        if BIG:
            pg = np.where(big, pg, np.nan)
        out.append(pg)
    return np.array(out)

def fam_means(pg):
    m = np.nanmean(pg, axis=0)
    return np.array([np.nanmean(m[fams == f]) for f in names])

B = per_graph(base); fb = fam_means(B)
print(f"{collection} base {base}: mean {np.nanmean(B):.4f} seeds {[round(float(np.nanmean(s)),4) for s in B]} fam q25 {np.quantile(fb,.25):.3f} worst {names[fb.argmin()]} {fb.min():.3f}")
for c in combos:
    A = per_graph(c); fa = fam_means(A)
    gain_seed = [float(np.nanmean(a) - np.nanmean(b)) for a, b in zip(A, B)]
    df = fa - fb
    print(f"  {c:<28} mean {np.nanmean(A):.4f} gain {np.nanmean(A)-np.nanmean(B):+.4f} per seed {' '.join(f'{g:+.4f}' for g in gain_seed)} "
          f"fam se {df.std(ddof=1)/np.sqrt(df.size):.4f} up/down {(df>0).sum()}/{(df<0).sum()} q25 {np.quantile(fa,.25):.3f} worst {names[fa.argmin()]} {fa.min():.3f} "
          f"worst-fam gain {df[fb.argmin()]:+.3f} min gain {names[df.argmin()]} {df.min():+.3f}")
