"""tune-sim's saved result (models/evaluation/tune_sim.py, `<run>/tune_sim.json`) as a table:
what `pipeline.py tune-sim` prints and the report shows."""
from __future__ import annotations

import numpy as np

from models.training.family_split import graph_family


def format_table(result: dict) -> str:
    graphs = result.get("graphs", "the valid graphs")
    lines = [f"best runtime found / best of the pool, after N measurements (1.000 = the best); "
             f"{graphs}", *_head(result["settings"]["budgets"])]
    for collection, c in result["collections"].items():
        for i, st in enumerate(c["mean"]):
            label = f"{collection} ({len(c['graphs'])})" if i == 0 else ""
            lines.append(f"{label:<24} {st:<8} " + " ".join(f"{v:>7.3f}" for v in c["mean"][st]))
        lines += _seed_gains(c) + _pool_view(c["graphs"])
    lines += _families(result)
    return "\n".join(lines)


def _families(result: dict) -> list[str]:
    """Per model family, worst (slowest updated search at the largest budget) first: the frozen
    and updated searches, the share of the frozen search's distance to the pool's best that the
    updates close (the exact model finds the best first: its bound is 1.000), and the learner's
    held-out check (tune_sim.near_best): Kendall of the frozen and updated scores on unmeasured
    configs near the updated search's best."""
    budgets = result["settings"]["budgets"]
    lines = []
    for collection, c in result["collections"].items():
        families: dict[str, list[dict]] = {}
        for g in c["graphs"]:
            families.setdefault(graph_family(g["graph"]), []).append(g)
        rows = []
        for name, graphs in families.items():
            frozen, updated = (np.mean([g[k] for g in graphs], axis=0) for k in ("frozen",
                                                                                 "updated"))
            gap = frozen[-1] - 1.0
            closed = f"{(frozen[-1] - updated[-1]) / gap:>7.0%}" if gap > 1e-9 else f"{'-':>7}"
            near = [g["near_best"] for g in graphs if g.get("near_best")]
            tau = (f"  {np.mean([n['frozen'] for n in near]):>5.2f} -> "
                   f"{np.mean([n['updated'] for n in near]):>5.2f}" if near else "")
            views = [g["pool_view"]["kendall"] for g in graphs if g.get("pool_view")]
            tau += f"  pool {np.mean(views):>5.2f}" if views else ""
            rows.append((updated[-1], f"{name} ({len(graphs)})"[:24], frozen, updated,
                         closed + tau))
        if len(rows) < 2:
            continue
        lines += ["", f"{collection} per family, worst first: frozen / updated after "
                      f"{', '.join(map(str, budgets))}; share of the frozen gap closed at "
                      f"{budgets[-1]}; near-best Kendall frozen -> updated; the "
                      f"model's Kendall on the pool"]
        for _, label, frozen, updated, tail in sorted(rows, key=lambda r: -r[0]):
            lines += [f"{label:<24} {'frozen':<8} " + " ".join(f"{v:>7.3f}" for v in frozen),
                      f"{'':<24} {'updated':<8} " + " ".join(f"{v:>7.3f}" for v in updated)
                      + tail]
    return lines


def _pool_view(graphs: list[dict]) -> list[str]:
    """The model's view of the pools before any measurement (tune_sim.pool_view), averaged."""
    views = [g["pool_view"] for g in graphs if g.get("pool_view")]
    if not views:
        return []
    top = next(k for k in views[0] if k.startswith("top"))
    return [f"{'':<24} the model's Kendall on the pools {np.mean([v['kendall'] for v in views]):.3f}"
            f"; best of its {top[3:]} top-scored / pool best "
            f"{np.exp(np.mean(np.log([v[top] for v in views]))):.3f} (geo-mean)"]


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
