"""One-off (issue 58, docs/records/family_cv.md): transfer across program kinds. Models fitted on
every graph (train+valid) of SRC score every graph of DST: a transformer-trained ranker meeting
CNNs (convolutions it never saw). REPO as in blend_cv.py:

    REPO=R DEV=... CACHE=C OUT=preds python cross_cv.py layout:nlp:random layout:xla:random lgb partner xgb lgb_merged lgb_nograph

then score_blends.py on OUT/cross-...npz with DST's collection."""
import os, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, os.environ.get("REPO", str(Path(__file__).resolve().parents[3])))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from features import FeatureConfig, build_entries
from models.training.runs import TrainConfig, rows_of, fit_seeds, fit_partners

src, dst, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
DEV, CACHE, OUT = (Path(os.environ[k]) for k in ("DEV", "CACHE", "OUT"))
OUT.mkdir(parents=True, exist_ok=True)
out = OUT / f"cross-{src.replace(':', '-')}-to-{dst.replace(':', '-')}.npz"
root = DEV
base = TrainConfig()
def pool(c):
    built = build_entries(root, [c], ("train", "valid"), FeatureConfig(), CACHE)
    return rows_of(built[c, "train"], base).joined(rows_of(built[c, "valid"], base))
fit_on, score = pool(src), pool(dst)
configs = {"lgb": TrainConfig(), "xgb": TrainConfig(ranker="xgboost", partners=False),
           "lgb_nograph": TrainConfig(without=("graph",))}
old = dict(np.load(out)) if out.exists() else {}
for k in wanted:
    t = time.time()
    if k == "partner":
        models, X = fit_partners(base, fit_on), score
    elif k == "lgb_merged":
        from merge_groups import merged
        models, X = fit_seeds(base, merged(fit_on)), merged(score)
    else:
        cfg = configs[k]
        models, X = fit_seeds(cfg, fit_on.without(cfg.without)), score.without(cfg.without)
    old[k] = np.array([m.predict(X) for m in models])
    print(f"{k}: {time.time() - t:.0f}s", flush=True)
old.update(runtime=score.runtime, ptr=score.ptr, graph_ids=np.array(score.graph_ids))
np.savez(out, **old)
print("saved", out)
