"""A stand-in for hardware, to see a tuner work without a TPU (there is none here, and no
simulator of one).

The stand-in is a cost model fitted on EVERY graph of the data, the valid ones included (a run
trained on `hardware_tree`, whose train split holds train + valid), calibrated per graph to the
graph's own measured runtimes, with ~1% multiplicative noise per measurement. A tuner whose own
model is trained on train only then tunes the valid graphs against it. Its numbers show that the
search works, not how well it would do on a TPU: the stand-in is the same kind of model as the
tuner's (the same features, boosted trees), so the two agree more than a model and a TPU would,
and a search can find the stand-in's blind spots.

Calibration: for each of the stand-in's collections holding the graph (its 'default' and 'random'
files share the graph), log runtime = a + b * score over that file's configs, b matched to the
spread of the file's log runtimes (not least squares, which would shrink a weak score's range);
the stand-in's log runtime is the mean over those collections.

Quirks (`quirks` > 0): what the stand-in's model cannot know of the graph and hardware would
add. Each (node, slot group, layout) the config sets adds its own fixed random amount to the log
runtime, normal with sd `quirks`, drawn from the graph's arrays and `quirk_seed` (the compiler
default sets nothing, so its runtime is unchanged). Without them the stand-in agrees with the
tuner's model (same features, boosted trees too) and rewards trusting it; with them the tuner's
model is wrong in the way its per-graph learner (models/api/node_effects.py) assumes, which
rewards learning. Neither is hardware: a tuner should do well on both.

    python -m models.evaluation.hardware tree --data-dir ../shared/tpugraphs_dev --out DIR
    python pipeline.py train --data-dir DIR --ranker regression --seeds 1 --collections ...
    python -m models.evaluation.hardware measure --run RUN --graph FILE.npz CONFIGS.npy
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import ndtri

from features.npz.find import collection_dir, list_npz, resolve_npz_root
from models.api import CostModel, ReferenceCoverageWarning
from models.api.graph_arrays import GraphArrays
from models.api.node_effects import indicators

HARDWARE_COLLECTIONS = ("layout:xla:default", "layout:xla:random", "layout:nlp:default",
                        "layout:nlp:random")
NOISE = 0.01    # sd of the log of a measurement's multiplicative noise


def hardware_tree(npz_root: Path, out: Path) -> Path:
    """A tree of links whose train split holds every train and valid graph (valid: the valid
    ones again, for train's report): what the stand-in is trained on. Returns its npz root."""
    root = Path(out) / "npz_all" / "npz"
    for collection in HARDWARE_COLLECTIONS:
        for split, sources in (("train", ("train", "valid")), ("valid", ("valid",))):
            target = root / collection_dir(collection) / split
            target.mkdir(parents=True, exist_ok=True)
            for source in sources:
                for f in list_npz(npz_root, collection, source):
                    link = target / f.name
                    if not link.exists():
                        link.symlink_to(f.resolve())
    return root


def sibling_files(path: Path) -> dict[str, Path]:
    """The files of the graph at `path` (.../layout/<source>/<search>/<split>/X.npz) in each
    search's collection of its source: the graph's 'default' and 'random' files."""
    path = Path(path).resolve()
    split_dir, source = path.parent, path.parent.parent.parent.name
    out = {}
    for search in ("default", "random"):
        f = split_dir.parent.parent / search / split_dir.name / path.name
        if f.is_file():
            out[f"layout:{source}:{search}"] = f
    return out


@dataclass
class Calibrated:
    collection: str
    level: float      # a: log runtime at score 0
    slope: float      # b: log runtime per unit of score (negative: higher score, faster)
    reference: np.ndarray


class Hardware:
    """The stand-in's true runtime of any valid config of one graph, and noisy measurements."""

    def __init__(self, model: CostModel, graph_file: Path, noise: float = NOISE,
                 quirks: float = 0.0, quirk_seed: int = 0):
        self.model, self.noise, self.quirks = model, noise, quirks
        files = {c: f for c, f in sibling_files(graph_file).items() if c in model.trained.models}
        if not files:
            raise ValueError(f"{graph_file}: the stand-in {model.trained.source} has no model "
                             f"for the collections holding this graph "
                             f"({sorted(sibling_files(graph_file))})")
        with np.load(graph_file) as z:
            self.graph = GraphArrays.of_npz(z)
        self.parts = [self._calibrate(c, f) for c, f in sorted(files.items())]
        salt = int(quirk_seed).to_bytes(16, "little", signed=True)
        digest = hashlib.blake2b(self.graph.node_feat.tobytes(), digest_size=8,
                                 salt=salt).digest()
        self.quirk_key = np.uint64(int.from_bytes(digest, "little"))
        nc = self.graph.node_config_ids.size
        self.default_runtime = float(self.runtime(np.full((1, nc, 18), -1, np.int8))[0])

    @classmethod
    def load(cls, run_dir: Path, graph_file: Path, noise: float = NOISE, quirks: float = 0.0,
             quirk_seed: int = 0) -> "Hardware":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # a sample-trained stand-in is meant here
            return cls(CostModel.load(run_dir), graph_file, noise, quirks, quirk_seed)

    def _calibrate(self, collection: str, path: Path) -> Calibrated:
        with np.load(path) as z:
            configs, runtime = z["node_config_feat"].astype(np.int8), z["config_runtime"]
        scores = self._scores(collection, configs, configs)
        y = np.log(runtime.astype(np.float64))
        corr = np.corrcoef(scores, y)[0, 1] if scores.std() > 0 else 0.0
        slope = -abs(y.std() / max(scores.std(), 1e-12)) if corr <= 0 else y.std() / scores.std()
        return Calibrated(collection, float(y.mean() - slope * scores.mean()), float(slope),
                          configs)

    def _scores(self, collection: str, configs: np.ndarray, reference: np.ndarray) -> np.ndarray:
        """The stand-in's tables follow its file's configs (its calibration's), so a searched
        config that sets groups they never set warns every time: meant here, not shown."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReferenceCoverageWarning)
            return self.model.rank(**self.graph.kwargs(), node_config_feat=configs,
                                   reference=reference, collection=collection).scores

    def log_runtime(self, configs: np.ndarray) -> np.ndarray:
        """(k,) the stand-in's noiseless log runtime of configs (k, nc, 18)."""
        model = np.mean([p.level + p.slope * self._scores(p.collection, configs, p.reference)
                         for p in self.parts], axis=0)
        return model + quirk_sum(configs, self.quirks, self.quirk_key) if self.quirks else model

    def runtime(self, configs: np.ndarray) -> np.ndarray:
        return np.exp(self.log_runtime(configs))

    def measure(self, configs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy runtimes, as a measurement would give them."""
        return self.runtime(configs) * np.exp(rng.normal(0.0, self.noise, len(configs)))


def quirk_sum(configs: np.ndarray, sd: float, key: np.uint64) -> np.ndarray:
    """(k,) the sum of the quirks of the (node, group, layout) each config (k, nc, 18) sets:
    each a fixed N(0, sd^2) draw of its own, from a hash of (key, node, group, layout)."""
    keys = indicators(configs)
    z = ndtri(_unit(_mix(keys.astype(np.uint64), key)))
    return sd * np.where(keys >= 0, z, 0.0).sum(axis=(1, 2))


def _mix(x: np.ndarray, key: np.uint64) -> np.ndarray:
    """splitmix64's finaliser of x ^ key: a fixed pseudo-random uint64 for each value."""
    with np.errstate(over="ignore"):
        x = (x ^ key) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _unit(x: np.ndarray) -> np.ndarray:
    """uint64 -> (0, 1): the top 52 bits, centred in their cell (exact in a float64)."""
    return ((x >> np.uint64(12)).astype(np.float64) + 0.5) / 2.0 ** 52


def noise_rng(configs: np.ndarray, seed: int) -> np.random.Generator:
    """A measurement's noise drawn from the configs themselves and a seed: the same command
    on the same configs measures the same (a replay is exact)."""
    digest = hashlib.blake2b(np.ascontiguousarray(configs).tobytes(), digest_size=8).digest()
    return np.random.default_rng([seed, int.from_bytes(digest, "little")])


def main(argv=None) -> int:
    """`tree` (the stand-in's training data) or `measure` (one runtime per line: the measure
    command of `pipeline.py tune`)."""
    p = argparse.ArgumentParser(prog="python -m models.evaluation.hardware",
                                description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    tree = sub.add_parser("tree", help="link every train and valid graph into one train split")
    tree.add_argument("--data-dir", required=True)
    tree.add_argument("--out", required=True, type=Path)
    m = sub.add_parser("measure", help="print the stand-in's runtime of each config, one a line")
    m.add_argument("--run", required=True, type=Path, help="the stand-in's run directory")
    m.add_argument("--graph", required=True, type=Path, help="the graph's npz file")
    m.add_argument("--noise", type=float, default=NOISE)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--quirks", type=float, default=0.0,
                   help="sd of each set (node, group, layout)'s own log-runtime effect")
    m.add_argument("--quirk-seed", type=int, default=0, help="which draw of the quirks")
    m.add_argument("configs", type=Path, help=".npy of (k, nc, 18) configs")
    args = p.parse_args(argv)
    if args.command == "tree":
        root = resolve_npz_root(args.data_dir)
        if root is None:
            p.error(f"{args.data_dir}: no TpuGraphs tree")
        print(hardware_tree(root, args.out))
        return 0
    configs = np.load(args.configs).astype(np.int8)
    hw = Hardware.load(args.run, args.graph, args.noise, args.quirks, args.quirk_seed)
    runtimes = hw.measure(configs, noise_rng(configs, args.seed))
    sys.stdout.write("".join(f"{r:.6g}\n" for r in runtimes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
