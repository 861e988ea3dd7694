"""One-off (issue 69, docs/records/new_families.md): train on the dev train split with the
default run's settings (ranker + partner, SEEDS seeds) and score the valid split per family,
for each variant in turn in one process (the feature rows built once):

    DEV=../shared/tpugraphs_dev CACHE=C TAG=base python valid_variants.py layout:nlp:random 2 \
        base joint set:feature_fraction=0.3 set:min_data_in_leaf=100

variants: base | joint (the sibling collection's train graphs added, as other graphs) |
set:key=val,... (ranker parameters). Prints a line per variant; writes variant_TAG_*.json
with every graph's score. Run from the checkout whose features are judged (PYTHONPATH)."""
import os, sys, time, json
from dataclasses import replace
from pathlib import Path
import numpy as np
from features import FeatureConfig, build_entries
from models import metrics
from models.training.family_split import graph_family
from models.training.runs import TrainConfig, rows_of, fit_seeds, fit_partners, seed_scores
from models.training.run_files import mean_normalized

DEV = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "npz_all/npz"
coll, seeds = sys.argv[1], int(sys.argv[2])
sib = coll.replace("random", "X").replace("default", "random").replace("X", "default")
cache = Path(os.environ.get("CACHE", "data_cache"))
built = build_entries(DEV, [coll, sib], ("train", "valid"), FeatureConfig(), cache)
NEW = {"xlnet", "roformer", "esm", "phi", "mixtral", "whisper", "vit", "swin", "mit", "cspnet", "hgnet"}
for variant in sys.argv[3:]:
    t = time.time()
    over = {}
    if variant.startswith("set:"):
        over = {k: (float(v) if "." in v else int(v)) for k, v in
                (kv.split("=") for kv in variant[4:].split(","))}
    cfg = TrainConfig(ranker="lambdarank", seeds=seeds, overrides=over)
    train = rows_of(built[coll, "train"], cfg)
    valid = rows_of(built[coll, "valid"], cfg)
    if variant == "joint":
        other = rows_of(built[sib, "train"], cfg)
        other = replace(other, collection=coll, graph_ids=tuple("j_" + g for g in other.graph_ids),
                        nodes=None)
        train = replace(train, nodes=None).joined(other) if train.nodes is not None else train.joined(other)
    models, partners = fit_seeds(cfg, train), fit_partners(cfg, train)
    per_seed = seed_scores(models, partners, valid)
    ens = mean_normalized(per_seed, valid.ptr)
    sc = metrics.per_graph_scores(coll, ens, valid.runtime, valid.ptr)
    seed_sc = [metrics.per_graph_scores(coll, s, valid.runtime, valid.ptr).mean() for s in per_seed]
    fam = np.array([graph_family(g) for g in valid.graph_ids])
    new = np.isin(fam, list(NEW))
    out = {"variant": variant, "collection": coll, "mean": sc.mean(), "new": sc[new].mean(),
           "old": sc[~new].mean(), "seed_means": seed_sc,
           "families": {f: sc[fam == f].mean() for f in sorted(set(fam))},
           "per_graph": dict(zip(valid.graph_ids, sc.tolist())), "sec": time.time() - t}
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items() if k != "per_graph"}), flush=True)
    with open(f"variant_{os.environ.get('TAG', 'B')}_{coll.replace(':','_')}_{variant.replace(':','_').replace('=','').replace(',','_')}_s{seeds}.json", "w") as f:
        json.dump(out, f)
