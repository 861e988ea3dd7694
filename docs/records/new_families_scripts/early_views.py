"""One-off (issue 70, docs/records/new_families.md, "the model's own search as a CNN's first
reference"), run at 92c808a. The default run's Kendall on each transformer pool with the reference tune gives after n
measurements (its first n picks measured: the frozen model's top-scored under the drawn
reference, as a first round picks; then the reference grown with them), n in NS.
    python early_views.py RUN OUT.json SEED"""
import os, sys, json, warnings
from pathlib import Path
import numpy as np
from models.api import CostModel, GraphArrays
from models.api.reference_growth import Growth, fastest, grown
from models.api.cost_model import fresh
from models.evaluation.tune_sim import distinct_pool, pool_view
from models.api.candidates import read_candidates
from features.npz.read import read_graph
from features.rows.row_selection import target_runtime
from features.graph.layout_space import LayoutSpace
from models.tuning.tuner import TuneSettings
from models.tuning.tune_graph import search_reference
warnings.simplefilter("ignore")
POOLS = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "pools/npz_all/npz/layout"
model = CostModel.load(sys.argv[1])
seed = int(sys.argv[3]); NS = (5, 10, 20)
coll = "layout:nlp:default"
out = {}
for path in sorted((POOLS / "nlp" / "default" / "valid").glob("*.npz")):
    g, rt = distinct_pool(read_candidates(path, coll), target_runtime(read_graph(path, coll, "valid")))
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, TuneSettings().space)
    drawn = search_reference(space, TuneSettings(), seed)
    cfg = g.node_config_feat
    s0 = fresh(model)._rank_graph(g, drawn).scores
    rng = np.random.default_rng(seed)
    row = {"drawn": pool_view(s0, rt)}
    for n in NS:
        # half the model's top picks, half random: a search's first rounds explore too
        top = np.argsort(-s0, kind="stable")[: n // 2]
        rest = np.setdiff1d(np.arange(rt.size), top)
        meas = np.concatenate([top, rng.choice(rest, n - top.size, replace=False)])
        ref = grown(g, drawn, fastest(cfg[meas], rt[meas], 10), Growth())
        s = fresh(model)._rank_graph(g, ref).scores
        keep = np.setdiff1d(np.arange(rt.size), meas)
        row[f"n{n}"] = pool_view(s[keep], rt[keep])
    dflt = np.full((1,) + cfg.shape[1:], -1, cfg.dtype)     # only the default measured
    row["default_only"] = pool_view(fresh(model)._rank_graph(g, grown(g, drawn, dflt, Growth())).scores, rt)
    out[path.stem] = row
    print(path.stem, {k: round(v["kendall"], 3) for k, v in row.items()}, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k in next(iter(out.values())):
    print(k, "kendall", round(np.mean([v[k]["kendall"] for v in out.values()]), 4))
