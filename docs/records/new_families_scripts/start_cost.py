"""One-off (issue 70, docs/records/new_families.md, "the model's own search as a CNN's first
reference"): CPU seconds of the reference a CNN search gives its model (tune_graph.model_reference,
the model's own search) on each dev CNN pool's graph.
    python start_cost.py RUN"""
import os, sys, time, warnings, numpy as np
from pathlib import Path
warnings.simplefilter("ignore")
from models.api import CostModel, GraphArrays
from models.tuning.tune_graph import model_reference
from models.tuning.tuner import TuneSettings
from features.graph.layout_space import LayoutSpace
model = CostModel.load(sys.argv[1])
DEV = Path(os.environ.get("DEV", "../shared/tpugraphs_dev"))
for path in sorted((DEV / "pools/npz_all/npz/layout/xla/default/valid").glob("*.npz")):
    with np.load(path) as z:
        arrays = GraphArrays.of_npz(z)
    space = LayoutSpace.of_graph(arrays.node_feat, arrays.node_opcode, arrays.edge_index, arrays.node_config_ids, TuneSettings().space)
    t = time.perf_counter(); c = time.process_time()
    model_reference(model, arrays, space, TuneSettings(), 0, "layout:xla:default")
    print(path.stem, arrays.node_config_ids.size, len(arrays.node_feat), round(time.perf_counter() - t, 2), round(time.process_time() - c, 2), "load", round(__import__("os").getloadavg()[0], 1), flush=True)
