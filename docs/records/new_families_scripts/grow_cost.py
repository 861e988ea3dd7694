"""One-off (issue 70, docs/records/new_families.md, "a reference that grows"): the seconds of a
CostModel update on a transformer pool graph with and without reference growth, the first
update (48 measurements) and three that change the fastest ten:

    python grow_cost.py RUN POOL_FILE.npz"""
import sys, time, warnings, numpy as np
from pathlib import Path
from models.api import CostModel, GraphArrays, Growth
from models.api.candidates import read_candidates
from features.graph.layout_space import LayoutSpace, reference_configs
warnings.simplefilter("ignore")
run = sys.argv[1]; path = Path(sys.argv[2])
coll = "layout:nlp:default"
g = read_candidates(path, coll)
arrays = GraphArrays.of_graph(g)
space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids)
ref = reference_configs(space, 200, 0)
rng = np.random.default_rng(0)
hist = space.mutate(rng, space.random(rng, 48)); rt = np.exp(rng.normal(0, .1, 48))
print(path.stem, "config nodes", space.n_nodes)
for growth in (Growth(elite=0), Growth()):
    m = CostModel.load(run, growth=growth)
    m.rank(**arrays.kwargs(), node_config_feat=ref[:5], reference=ref, collection=coll)
    t = time.perf_counter(); m.update(**arrays.kwargs(), node_config_feat=hist, runtimes=rt, reference=ref, collection=coll); a = time.perf_counter() - t
    times = []
    for i in range(3):
        new = space.mutate(rng, hist[:5]); r = np.full(5, 0.5 - 0.01 * i)   # the fastest yet: the elite changes
        t = time.perf_counter(); m.update(**arrays.kwargs(), node_config_feat=new, runtimes=r, reference=ref, collection=coll); times.append(time.perf_counter() - t)
    print(growth.elite, f"first update {a:.2f}s, updates that change the elite {np.round(times, 2)}")
