"""One-off (issue 70, docs/records/new_families.md, "a reference that grows"), run at 4ab92b6:
does a reference that holds the measured elite (and its mutants) lift a
file-reference run's view of a pool toward its view with the pool's own reference? ("search"
is the drawn layouts there; at 92c808a and after, sim_reference(model, g, s) gives a CNN's
grown by the model's own search, and takes the model.)
    DEV=... python grow_views.py RUN OUT.json [SEED]"""
import os, sys, json, warnings
from pathlib import Path
import numpy as np
from models.api import CostModel
from models.evaluation.tune_sim import SimSettings, distinct_pool, pool_view, sim_reference
from models.api.candidates import read_candidates
from features.npz.read import read_graph
from models.training.family_split import graph_family
from features.rows.row_selection import target_runtime

from models.evaluation.tune_sim import graph_arrays
from features.graph.layout_space import LayoutSpace
from models.tuning.tuner import TuneSettings
from models.metrics import kendall_tau_b

warnings.simplefilter("ignore")
POOLS = Path(os.environ.get("DEV", "../shared/tpugraphs_dev")) / "pools/npz_all/npz/layout"
model = CostModel.load(sys.argv[1])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
out = {}
for fam in ("xla", "nlp"):
    coll = f"layout:{fam}:default"
    for path in sorted((POOLS / fam / "default" / "valid").glob("*.npz")):
        g, rt = distinct_pool(read_candidates(path, coll), target_runtime(read_graph(path, coll, "valid")))
        rng = np.random.default_rng(seed)
        cfg = g.node_config_feat
        measured = rng.choice(rt.size, size=min(40, rt.size // 4), replace=False)
        elite = measured[np.argsort(rt[measured])[:10]]
        rest = np.setdiff1d(np.arange(rt.size), measured)
        space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids,
                                     TuneSettings().space)
        drawn = sim_reference(g, SimSettings(reference="search", seed=seed))
        parents = cfg[elite][rng.integers(0, elite.size, 800)]
        mutants = space.mutate(rng, parents)
        refs = {"pool": None, "search": drawn,
                "drawn+meas": np.concatenate([drawn, cfg[measured]]),
                "drawn+elite20": np.concatenate([drawn, np.repeat(cfg[elite], 20, axis=0)]),
                "drawn+mutants": np.concatenate([drawn, cfg[elite], mutants]),
                "mutants": np.concatenate([cfg[elite], mutants])}
        row = {}
        for name, r in refs.items():
            m = model.fresh()
            s = m.rank(**graph_arrays(g), node_config_feat=cfg, reference=r,
                       collection=coll, name=path.stem).scores
            row[name] = {"kendall": kendall_tau_b(s[rest], -rt[rest].astype(float)),
                         "top10": pool_view(s[rest], rt[rest])["top10"] * rt[rest].min() / rt.min()}
        out[path.stem] = {"collection": coll, "family": graph_family(path.stem), **row}
        print(path.stem, {k: round(v["kendall"], 3) for k, v in row.items()}, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for fam in ("xla", "nlp"):
    rows = [v for v in out.values() if v["collection"] == f"layout:{fam}:default"]
    for ref in rows[0]:
        if ref in ("collection", "family"): continue
        print(fam, ref, "kendall", round(np.mean([v[ref]["kendall"] for v in rows]), 4),
              "top10", round(float(np.exp(np.mean([np.log(v[ref]["top10"]) for v in rows]))), 4))
