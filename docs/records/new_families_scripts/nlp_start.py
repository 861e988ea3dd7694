"""One-off (issue 70, docs/records/new_families.md, "the model's own search as a CNN's first
reference"): the default run's Kendall on each transformer pool before any measurement, with
three first references: the 200 drawn layouts tune gives, 1,000 drawn the same way, 200 random.
    python nlp_start.py RUN"""
import os
import sys, json, warnings
from pathlib import Path
import numpy as np
from models.api import CostModel
from models.api.cost_model import fresh
from models.evaluation.tune_sim import distinct_pool, pool_view
from models.api.candidates import read_candidates
from features.npz.read import read_graph
from features.rows.row_selection import target_runtime
from features.graph.layout_space import LayoutSpace, reference_configs
from models.tuning.tuner import TuneSettings
warnings.simplefilter("ignore")
POOLS = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "pools/npz_all/npz/layout"
model = CostModel.load(sys.argv[1]); coll = "layout:nlp:default"; out = {}
for path in sorted((POOLS / "nlp" / "default" / "valid").glob("*.npz")):
    g, rt = distinct_pool(read_candidates(path, coll), target_runtime(read_graph(path, coll, "valid")))
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, TuneSettings().space)
    rng = np.random.default_rng(0)
    refs = {"drawn200": reference_configs(space, 200, 0), "near1000": reference_configs(space, 1000, 0),
            "random200": np.concatenate([space.random(rng, 199), space.covering(rng)])}
    row = {k: pool_view(fresh(model)._rank_graph(g, r).scores, rt) for k, r in refs.items()}
    out[path.stem] = row
    print(path.stem, {k: round(v["kendall"], 3) for k, v in row.items()}, flush=True)
for k in next(iter(out.values())):
    print(k, round(np.mean([v[k]["kendall"] for v in out.values()]), 4))
