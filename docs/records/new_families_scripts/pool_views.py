"""One-off (issue 70, docs/records/new_families.md): the fresh model's view of every dev pool
(Kendall on the whole pool, best of its 10 top-scored / pool best), with the pool itself as the
graph's reference and with the reference `tune` gives its model (tune_sim.sim_reference, as
`tune-sim --reference search`), without the searches (minutes, not an hour). Run at e5a1d66-
4ab92b6, when sim_reference(g, s) took no model and gave the drawn layouts; at 92c808a and
after it is sim_reference(model, g, s):

    DEV=../shared/tpugraphs_dev python pool_views.py RUN OUT.json"""
import os, sys, json, warnings
from pathlib import Path
import numpy as np
from models.api import CostModel
from models.evaluation.tune_sim import SimSettings, distinct_pool, pool_view, sim_reference
from models.api.candidates import read_candidates
from features.npz.read import read_graph
from models.training.family_split import graph_family
from features.rows.row_selection import target_runtime
from models.api import GraphArrays
from models.api.cost_model import fresh

warnings.simplefilter("ignore")
POOLS = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "pools/npz_all/npz/layout"
model = CostModel.load(sys.argv[1])
out = {}
for fam in ("xla", "nlp"):
    coll = f"layout:{fam}:default"
    for path in sorted((POOLS / fam / "default" / "valid").glob("*.npz")):
        g, rt = distinct_pool(read_candidates(path, coll), target_runtime(read_graph(path, coll, "valid")))
        row = {}
        for ref in ("pool", "search"):
            r = sim_reference(g, SimSettings(reference=ref))
            m = fresh(model)
            s = m.rank(**GraphArrays.of_graph(g).kwargs(), node_config_feat=g.node_config_feat, reference=r,
                       collection=coll, name=path.stem).scores
            row[ref] = pool_view(s, rt)
        out[path.stem] = {"collection": coll, "family": graph_family(path.stem), **row}
        print(path.stem, {k: {a: round(b, 3) for a, b in v.items()} for k, v in row.items()}, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for fam in ("xla", "nlp"):
    rows = [v for v in out.values() if v["collection"] == f"layout:{fam}:default"]
    for ref in ("pool", "search"):
        print(fam, ref, "kendall", round(np.mean([v[ref]["kendall"] for v in rows]), 4),
              "top10", round(float(np.exp(np.mean([np.log(v[ref]["top10"]) for v in rows]))), 4))
