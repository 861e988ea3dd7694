"""One-off (issue 70, docs/records/new_families.md, "the model's own search as a CNN's first
reference"), run at 92c808a. Kendall on the pools at a search's start with the product's
predicted growth, per Growth variant (at 92c808a Growth's `start_programs` was `predicted`).
    VARIANTS='[[elite,mutants,steps],...]' python pred_views.py RUN OUT.json SEED FAM"""
import os, sys, json, warnings
from pathlib import Path
import numpy as np
from models.api import CostModel, GraphArrays
from models.api.reference_growth import Growth
from models.api.cost_model import start_reference, fresh
from models.evaluation.tune_sim import distinct_pool, pool_view
from models.api.candidates import read_candidates
from features.npz.read import read_graph
from models.training.family_split import graph_family
from features.rows.row_selection import target_runtime
from features.graph.layout_space import LayoutSpace
from models.tuning.tuner import TuneSettings
from models.tuning.tune_graph import search_reference
warnings.simplefilter("ignore")
POOLS = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "pools/npz_all/npz/layout"
model = CostModel.load(sys.argv[1])
seed, fam = int(sys.argv[3]), sys.argv[4]
variants = json.loads(os.environ["VARIANTS"])
coll = f"layout:{fam}:default"
out = {}
for path in sorted((POOLS / fam / "default" / "valid").glob("*.npz")):
    g, rt = distinct_pool(read_candidates(path, coll), target_runtime(read_graph(path, coll, "valid")))
    arrays = GraphArrays.of_graph(g)
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, TuneSettings().space)
    drawn = search_reference(space, TuneSettings(), seed)
    row = {}
    for e, m, st in [[0, 0, 0]] + variants:
        growth = Growth(elite=e or 10, mutants=m or 800, steps=st, predicted=("xla", "nlp"))
        mm = fresh(model); mm.growth = growth
        ref = start_reference(mm, arrays, drawn, coll) if st else drawn
        s = fresh(model)._rank_graph(g, ref).scores
        row[f"e{e}m{m}s{st}"] = pool_view(s, rt)
    out[path.stem] = row
    print(path.stem, {k: round(v["kendall"], 3) for k, v in row.items()}, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k in next(iter(out.values())):
    print(fam, k, "kendall", round(np.mean([v[k]["kendall"] for v in out.values()]), 4),
          "top10", round(float(np.exp(np.mean([np.log(v[k]["top10"]) for v in out.values()]))), 4))
