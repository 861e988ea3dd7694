"""Record tune() results for fixed seeds; usage: baseline_tune.py OUT.npz"""
import sys
import numpy as np
from tests.test_tune_search import RANKS, GOOD, WRONG, SMALL_SEARCH, Believed, measure_of
from features.graph.layout_space import LayoutSpace
from models.tuning.tuner import Blind, Frozen, TuneSettings, tune

space = LayoutSpace(RANKS)
out = {}
cases = [("believed_small", lambda: Believed(), TuneSettings(search=SMALL_SEARCH), 37, 0.01),
         ("frozen_default", lambda: Frozen(Believed(False)), TuneSettings(), 30, 0.0),
         ("blind_small", lambda: Blind(3), TuneSettings(search=SMALL_SEARCH, confirm=3), 60, 0.01),
         ("believed_default", lambda: Believed(), TuneSettings(), 25, 0.02)]
for name, model, settings, budget, noise in cases:
    for seed in (0, 5):
        r = tune(measure_of(GOOD | WRONG, noise=noise, seed=seed), space, model(), budget,
                 seed=seed, settings=settings)
        k = f"{name}_{seed}"
        out[k + "_configs"] = r.configs
        out[k + "_runtimes"] = r.runtimes
        out[k + "_best"] = r.best
        out[k + "_meta"] = np.array([r.best_runtime, r.default_runtime, r.rounds])
np.savez(sys.argv[1], **out)
print(len(out), "arrays saved")
