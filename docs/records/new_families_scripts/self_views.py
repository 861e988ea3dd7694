"""One-off (issue 70, docs/records/new_families.md, "the model's own search as a CNN's first
reference"), the first try, run at 11ff482 with L's models: a reference grown from the model's
own top-scored configs (no measurement, an elite that may repeat, one rng over the steps),
VARIANTS = [[elite, mutants, with the drawn layouts 1/0, steps], ...]; Kendall and top 10 on
each pool.   VARIANTS='[[10,800,1,3]]' python self_views.py RUN OUT.json [SEED] [FAMS]"""
import os, sys, json, warnings
from pathlib import Path
import numpy as np
from models.api import CostModel
from models.evaluation.tune_sim import SimSettings, distinct_pool, pool_view, sim_reference
from models.api.cost_model import fresh
import dataclasses
from models.api.candidates import read_candidates
from features.npz.read import read_graph
from models.training.family_split import graph_family
from features.rows.row_selection import target_runtime
from features.graph.layout_space import LayoutSpace
from models.tuning.tuner import TuneSettings
from models.metrics import kendall_tau_b

warnings.simplefilter("ignore")
POOLS = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "pools/npz_all/npz/layout"
model = CostModel.load(sys.argv[1])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
VARIANTS = json.loads(os.environ.get('VARIANTS', '[[10,800,1,3]]'))
fams = sys.argv[4].split(",") if len(sys.argv) > 4 else ["xla", "nlp"]
out = {}
for fam in fams:
    coll = f"layout:{fam}:default"
    for path in sorted((POOLS / fam / "default" / "valid").glob("*.npz")):
        g, rt = distinct_pool(read_candidates(path, coll), target_runtime(read_graph(path, coll, "valid")))
        rng = np.random.default_rng(seed)
        cfg = g.node_config_feat
        space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids,
                                     TuneSettings().space)
        drawn = sim_reference(g, SimSettings(reference="search", seed=seed))
        def score(configs, ref):
            return fresh(model)._rank_graph(g.with_configs(configs), ref).scores
        refs = {"pool": None, "search": drawn}
        for (k, nm, base, steps) in VARIANTS:
            ref = drawn
            for step in range(1, steps + 1):
                s = score(ref, ref)
                elite = ref[np.argsort(-s, kind="stable")[:k]]
                parents = elite[rng.integers(0, k, nm)]
                ref = np.concatenate(([drawn] if base else []) + [elite, space.mutate(rng, parents)])
            refs[f"e{k}m{nm}b{base}s{steps}"] = ref
        row = {}
        for name, r in refs.items():
            s = score(cfg, r)
            row[name] = {"kendall": kendall_tau_b(s, -rt.astype(float)),
                         "top10": pool_view(s, rt)["top10"]}
        out[path.stem] = {"collection": coll, "family": graph_family(path.stem), **row}
        print(path.stem, {k: (round(v["kendall"], 3), round(v["top10"], 3)) for k, v in row.items()}, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for fam in fams:
    rows = [v for v in out.values() if v["collection"] == f"layout:{fam}:default"]
    for ref in rows[0]:
        if ref in ("collection", "family"): continue
        print(fam, ref, "kendall", round(np.mean([v[ref]["kendall"] for v in rows]), 4),
              "top10", round(float(np.exp(np.mean([np.log(v[ref]["top10"]) for v in rows]))), 4))
