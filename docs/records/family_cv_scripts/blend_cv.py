"""One-off (issue 58, docs/records/family_cv.md, 2026-11-29): family CV over train+valid graphs
exactly as `train --folds 5 --seeds 3`, keeping every held-out prediction of several models per
fold and seed, to score blends (score_blends.py). Run it on the features before the group
z-scores: REPO = a checkout of 4258a18 (default: this repository):

    REPO=R DEV=../shared/tpugraphs_dev/npz_all/npz CACHE=C OUT=preds python blend_cv.py COLLECTION MODEL...

models: lgb (the run's ranker), partner (its partner), xgb, lgb_zall / partner_zall (zall.py),
lgb_zrep / partner_zrep; SMALL=N trains each fold on graphs under N nodes only."""
import os, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, os.environ.get("REPO", str(Path(__file__).resolve().parents[3])))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from features import FeatureConfig, build_entries
from models.training.runs import TrainConfig, rows_of, fit_seeds, fit_partners
from models.training.family_split import family_folds

collection, wanted = sys.argv[1], sys.argv[2:]
SMALL = int(os.environ.get("SMALL", "0"))   # >0: each fold trains on graphs under SMALL nodes only
DEV, CACHE, OUT = (Path(os.environ[k]) for k in ("DEV", "CACHE", "OUT"))
OUT.mkdir(parents=True, exist_ok=True)
out = OUT / (f"preds-{collection.replace(':', '-')}"
                               + (f"-small{SMALL}" if SMALL else "") + ".npz")
built = build_entries(DEV, [collection],
                      ("train", "valid"), FeatureConfig(), CACHE)
base = TrainConfig(folds=5)
train = rows_of(built[collection, "train"], base)
valid = rows_of(built[collection, "valid"], base)
pool = train.joined(valid)
fold_of = family_folds(pool.graph_ids, 5, 0)
if SMALL:
    import glob
    nodes_of = {}
    for path in glob.glob(f"{DEV}/{collection.replace(':', '/')}/*/*.npz"):
        with np.load(path) as z:
            nodes_of[Path(path).stem] = z["node_feat"].shape[0]
    missing = [g for g in pool.graph_ids if g not in nodes_of]
    assert not missing, missing[:3]
old = dict(np.load(out)) if out.exists() else {}
preds = {k: np.full((3, pool.runtime.size), np.nan) for k in wanted}
configs = {"lgb": TrainConfig(folds=5), "xgb": TrainConfig(ranker="xgboost", folds=5, partners=False),
           }
for f in np.unique(fold_of):
    held_idx, part_idx = np.flatnonzero(fold_of == f), np.flatnonzero(fold_of != f)
    if SMALL:
        part_idx = np.array([g for g in part_idx if nodes_of[pool.graph_ids[g]] < SMALL])
    held, part = pool.take_graphs(held_idx), pool.take_graphs(part_idx)
    rows = np.concatenate([np.arange(pool.ptr[g], pool.ptr[g + 1]) for g in held_idx])
    for k in wanted:
        t = time.time()
        cfg = configs.get(k, base)
        if k == "partner":
            models = fit_partners(base, part)
        elif k in ("lgb_zrep", "partner_zrep"):
            from zall import zrep
            held_k = zrep(held)
            models = (fit_seeds(base, zrep(part)) if k == "lgb_zrep"
                      else fit_partners(base, zrep(part)))
        elif k in ("lgb_zall", "partner_zall"):
            from zall import zall
            held_k = zall(held)
            models = (fit_seeds(base, zall(part)) if k == "lgb_zall"
                      else fit_partners(base, zall(part)))
        else:
            p, h = (part.without(cfg.without), held.without(cfg.without)) if cfg.without else (part, held)
            models = fit_seeds(cfg, p)
            held_k = h
        for i, m in enumerate(models):
            preds[k][i, rows] = m.predict(held if k == "partner" else held_k)
        print(f"fold {f} {k}: {time.time() - t:.0f}s", flush=True)
old.update(preds)
old.update(runtime=pool.runtime, ptr=pool.ptr, graph_ids=np.array(pool.graph_ids))
np.savez(out, **old)
print("saved", out)
