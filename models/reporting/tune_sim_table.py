"""tune-sim's saved result (models/evaluation/tune_sim.py, `<run>/tune_sim.json`) as a table:
what `pipeline.py tune-sim` prints and the report shows."""
from __future__ import annotations

import numpy as np


def format_table(result: dict) -> str:
    graphs = result.get("graphs", "the valid graphs")
    lines = [f"best runtime found / best of the pool, after N measurements (1.000 = the best); "
             f"{graphs}", *_head(result["settings"]["budgets"])]
    for collection, c in result["collections"].items():
        for i, st in enumerate(c["mean"]):
            label = f"{collection} ({len(c['graphs'])})" if i == 0 else ""
            lines.append(f"{label:<24} {st:<8} " + " ".join(f"{v:>7.3f}" for v in c["mean"][st]))
        lines += _seed_gains(c)
    return "\n".join(lines)


def _seed_gains(c: dict) -> list[str]:
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


def format_draws(results: list[dict]) -> str:
    """Several seeds' draws of one simulation (tune_sim.saved_draws): per collection that all
    of them searched on the same graphs, the updates' gain (frozen - updated, the whole run)
    averaged over the draws, and its spread between them. Empty with fewer than two."""
    if len(results) < 2:
        return ""
    body = []
    for collection in results[0]["collections"]:
        held = [r["collections"].get(collection) for r in results]
        if any(c is None or _graph_names(c) != _graph_names(held[0]) for c in held):
            continue
        gains = np.array([np.subtract(c["mean"]["frozen"], c["mean"]["updated"])
                          for c in held])
        label = f"{collection} ({len(held[0]['graphs'])})"
        body += [f"{label:<24} {'gain':<8} "
                 + " ".join(f"{v:>7.4f}" for v in gains.mean(axis=0))
                 + f"  (mean of {len(held)} draws)",
                 f"{'':<24} {'sd':<8} " + " ".join(f"{v:>7.4f}" for v in
                                                  gains.std(axis=0, ddof=1))
                 + "  (between the draws)"]
    if not body:
        return ""
    seeds = ", ".join(str(r["settings"]["seed"]) for r in results)
    return "\n".join([f"the updates' gain over the draws of seeds {seeds} (tune-sim --seed N): "
                      f"frozen - updated, the run", *_head(results[0]["settings"]["budgets"]),
                      *body])


def _head(budgets) -> list[str]:
    head = f"{'collection':<24} {'search':<8} " + " ".join(f"{k:>7}" for k in budgets)
    return [head, "-" * len(head)]


def _graph_names(c: dict) -> list[str]:
    return [g["graph"] for g in c["graphs"]]
