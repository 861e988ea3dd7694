"""tune-sim's saved result (models/evaluation/tune_sim.py, `<run>/tune_sim.json`) as a table:
what `pipeline.py tune-sim` prints and the report shows."""
from __future__ import annotations

import numpy as np


def format_table(result: dict) -> str:
    budgets = result["settings"]["budgets"]
    head = f"{'collection':<24} {'search':<8} " + " ".join(f"{k:>7}" for k in budgets)
    graphs = result.get("graphs", "the valid graphs")
    lines = [f"best runtime found / best of the pool, after N measurements (1.000 = the best); "
             f"{graphs}", head, "-" * len(head)]
    for collection, c in result["collections"].items():
        for i, st in enumerate(c["mean"]):
            label = f"{collection} ({len(c['graphs'])})" if i == 0 else ""
            lines.append(f"{label:<24} {st:<8} " + " ".join(f"{v:>7.3f}" for v in c["mean"][st]))
        lines += _seed_gains(c, budgets)
    return "\n".join(lines)


def _seed_gains(c: dict, budgets) -> list[str]:
    """With each seed simulated: frozen - updated per seed (positive: the updates found a
    faster config), their mean and spread, beside the whole run's gain."""
    seeds = sorted(k[len("updated_"):] for k in c["mean"] if k.startswith("updated_seed"))
    if not seeds:
        return []
    gains = np.array([np.subtract(c["mean"][f"frozen_{k}"], c["mean"][f"updated_{k}"])
                      for k in seeds])
    whole = np.subtract(c["mean"]["frozen"], c["mean"]["updated"])
    return [f"{'':<24} {'gain':<8} " + " ".join(f"{v:>7.4f}" for v in whole)
            + "  (frozen - updated, the run)",
            f"{'':<24} {'seeds':<8} " + " ".join(f"{m:>7.4f}" for m in gains.mean(axis=0))
            + f"  (mean over its {len(seeds)} seeds alone; sd "
            + " ".join(f"{v:.4f}" for v in gains.std(axis=0, ddof=1)) + ")"]
