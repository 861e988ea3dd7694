"""One-off (issue 70, docs/records/new_families.md, "a reference that grows"), run at 4ab92b6:
tune-sim with a reference that grows with the search's measurements: after each round the
graph's reference is the drawn one + the K best measured configs + M mutants of them, and the
model starts again from that reference (node effects refit on every measurement when EFFECTS=1).
Frozen searches stay as they are (never taught, the drawn reference).
    GROW_K=10 GROW_M=800 EFFECTS=1 python grow_sim.py <tune-sim args>"""
import os, sys
import numpy as np
from dataclasses import dataclass
import models.evaluation.tune_sim as ts
from models.tuning.tuner import Bound, TuneSettings
from features.graph.layout_space import LayoutSpace, config_keys

K = int(os.environ.get("GROW_K", 10))
M = int(os.environ.get("GROW_M", 800))
EFFECTS = os.environ.get("EFFECTS", "1") == "1"


@dataclass
class GrowBound(Bound):
    def __post_init__(self):
        self.base = self.reference
        self.seen_c, self.seen_r = [], []
        gr = self.graph
        self.space = LayoutSpace.of_graph(gr["node_feat"], gr["node_opcode"], gr["edge_index"],
                                          gr["node_config_ids"], TuneSettings().space)

    def learn(self, configs, runtimes):
        if self.base is None:
            return super().learn(configs, runtimes)
        self.seen_c += list(np.asarray(configs)); self.seen_r += list(np.asarray(runtimes, float))
        C, R = np.array(self.seen_c), np.array(self.seen_r)
        keys = np.array(config_keys(C))
        uk, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        mean = np.bincount(inv, np.log(R)) / np.bincount(inv)
        elite = C[first[np.argsort(mean, kind="stable")[:K]]]
        rng = np.random.default_rng(0)
        mutants = self.space.mutate(rng, elite[rng.integers(0, len(elite), M)]) if M else elite[:0]
        self.reference = np.concatenate([self.base, elite, mutants])
        self.model = self.model.fresh()
        if EFFECTS:
            return self.model.update(**self.graph, **{self.key: C}, runtimes=R,
                                     reference=self.reference, collection=self.collection,
                                     name=self.name)
        return None


ts.Bound = GrowBound
import pipeline
sys.exit(pipeline.main(sys.argv[1:]))
