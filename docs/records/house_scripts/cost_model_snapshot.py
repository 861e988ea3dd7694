"""Record deterministic outputs of the cost model, before and after the refactor.
usage: PYTHONPATH=/work/wt72b python snapshot.py OUTDIR [SAVED_BY_MAIN]"""
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

warnings.simplefilter("ignore")
from models.api import CostModel  # noqa: E402
from models.tuning import tune_graph  # noqa: E402
from models.tuning.tuner import TuneSettings  # noqa: E402

ROOT = Path("/tmp/face/cache")
NPZ = ROOT / "sample/npz_all/npz"
OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
RUN = sorted((ROOT / "runs").glob("*/run.json"))[-1].parent
KEYS = ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_splits")


def rank_file(model, path, **kw):
    if hasattr(model, "rank_file"):
        return model.rank_file(path, **kw)
    from models.api import rank_file as f
    return f(model, path, **kw)


def fresh(model):
    if hasattr(model, "fresh"):
        return model.fresh()
    from models.api.cost_model import fresh as f
    return f(model)


def save(name, arr):
    np.save(OUT / f"{name}.npy", np.asarray(arr))


files = {c: sorted((NPZ / p).glob("*.npz"))[:2] for c, p in
         (("lxd", "layout/xla/default/valid"), ("lxr", "layout/xla/random/valid"),
          ("tile", "tile/xla/valid"))}
model = CostModel.load(RUN)
for c, fs in files.items():
    for i, f in enumerate(fs):
        r = rank_file(model, f)
        save(f"rank_file_{c}{i}_scores", r.scores)
        save(f"rank_file_{c}{i}_order", r.order)
        save(f"rank_file_{c}{i}_spread", r.spread)

# arrays: rank, update, rank again, save, load, rank again (layout random + tile)
model = CostModel.load(RUN)
train = sorted((NPZ / "layout/xla/random/train").glob("*.npz"))[0]
with np.load(train) as z:
    graph = {k: z[k] for k in KEYS}
    space, runtime = z["node_config_feat"], z["config_runtime"]
ref = space[np.random.default_rng(0).choice(len(space), min(100, len(space)), replace=False)]
save("arr_rank0", model.rank(**graph, node_config_feat=space[:60], reference=ref).scores)
res = model.update(**graph, node_config_feat=space[:15], runtimes=runtime[:15])
(OUT / "update_result.txt").write_text(repr(res))
save("arr_rank1", model.rank(**graph, node_config_feat=space[:60]).scores)
tfile = sorted((NPZ / "tile/xla/train").glob("*.npz"))[0]
with np.load(tfile) as z:
    tgraph = {k: z[k] for k in KEYS[:3]}
    tcf, trt = z["config_feat"], z["config_runtime"]
save("tile_rank0", model.rank(**tgraph, config_feat=tcf).scores)
tres = model.update(**tgraph, config_feat=tcf[:40], runtimes=trt[:40].astype(float) + 1)
(OUT / "tile_update_result.txt").write_text(repr(tres))
save("tile_rank1", model.rank(**tgraph, config_feat=tcf).scores)
shutil.rmtree(OUT / "saved", ignore_errors=True)
model.save(OUT / "saved")
loaded = CostModel.load(OUT / "saved")
save("loaded_rank", loaded.rank(**graph, node_config_feat=space[:60]).scores)
save("loaded_tile_rank", loaded.rank(**tgraph, config_feat=tcf).scores)

if len(sys.argv) > 2:      # a directory saved by main's code before the refactor
    old = CostModel.load(sys.argv[2])
    save("main_saved_rank", old.rank(**graph, node_config_feat=space[:60]).scores)
    save("main_saved_tile_rank", old.rank(**tgraph, config_feat=tcf).scores)

# pipeline.py rank
for c in ("lxd", "tile"):
    p = subprocess.run([sys.executable, "/work/wt72b/pipeline.py", "rank", "--run", str(RUN),
                        str(files[c][0])], capture_output=True, text=True, cwd="/tmp/face")
    (OUT / f"cli_rank_{c}.txt").write_text(p.stdout + "---stderr---\n" + p.stderr
                                           + f"---rc {p.returncode}\n")
p = subprocess.run([sys.executable, "/work/wt72b/pipeline.py", "rank", "--run", str(RUN), "--json",
                    "--top", "3", str(files["lxr"][0])], capture_output=True, text=True,
                   cwd="/tmp/face")
(OUT / "cli_rank_json.txt").write_text(p.stdout + "---stderr---\n" + p.stderr)


# tune_graph, deterministic measure
def measure(configs):
    c = configs.astype(np.float64)
    w = np.sin(np.arange(c[0].size)).reshape(c.shape[1:])
    return np.exp(0.01 * (c * w).sum(axis=(1, 2)))


vfile = files["lxd"][0]
with np.load(vfile) as z:
    vgraph = {k: z[k] for k in KEYS}
for learn in (True, False):
    r = tune_graph(CostModel.load(RUN), measure, budget=24, **vgraph, seed=3, learn=learn)
    save(f"tune_best_{learn}", r.best)
    save(f"tune_configs_{learn}", r.configs)
    save(f"tune_runtimes_{learn}", r.runtimes)
r = tune_graph(CostModel.load(RUN), lambda cf: 1 + np.abs(cf.astype(float)).sum(axis=1), budget=10,
               **tgraph, config_feat=tcf, seed=1)
save("tune_tile_configs", r.configs)
save("tune_tile_runtimes", r.runtimes)

# tune-sim on one graph
from dataclasses import replace  # noqa: E402
from models.evaluation.tune_sim import SimSettings, simulate  # noqa: E402
shutil.rmtree(OUT / "simrun", ignore_errors=True)
shutil.copytree(RUN, OUT / "simrun")
result = simulate(OUT / "simrun", NPZ, ["layout:xla:random", "tile:xla"],
                  replace(SimSettings(budgets=(1, 5)), max_graphs=2), data="test",
                  log=lambda line: None)
for c in result["collections"].values():
    c.pop("seconds", None)
result.pop("run", None)
(OUT / "tune_sim.json").write_text(json.dumps(result, indent=1, sort_keys=True))

# live search: one search of each kind with the run as its own stand-in hardware
from models.evaluation.hardware import Hardware  # noqa: E402
from models.evaluation.live_search import model_kendall, near_check, one_search  # noqa: E402
model = CostModel.load(RUN)
hw = Hardware(CostModel.load(RUN), vfile)
out = {}
for search in ("frozen", "updated"):
    r, taught = one_search(model, hw, search, 20, 0, "layout:xla:default", TuneSettings())
    out[search] = {"configs": r.configs.tolist(), "runtimes": r.runtimes.tolist()}
    if taught is not None and search == "updated":
        out["near"] = near_check(model, taught, hw, r, "layout:xla:default", 0, TuneSettings())
out["kendall"] = model_kendall(model, hw, space[:0].reshape(0, *space.shape[1:]) if False else
                               np.load(vfile)["node_config_feat"][:50].astype(np.int8),
                               "layout:xla:default")
(OUT / "live.json").write_text(json.dumps(out, sort_keys=True))
print("done", OUT)
