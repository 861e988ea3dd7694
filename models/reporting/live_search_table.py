"""The live search's result (models/evaluation/live_search.py) as tables: per collection, each
search's best found over the compiler default; per model family, worst first, the frozen and
updated searches beside the exact-model bound at each budget, the share of the frozen search's
distance to the bound that the updates close, and the learner's held-out check.
THE STAND-IN IS A MODEL, NOT A TPU: every table says so."""
from __future__ import annotations

import numpy as np


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def format_table(result: dict) -> str:
    searches = result.get("searches", ["updated", "frozen", "blind"])
    lines = [f"best found / compiler default, stand-in runtime, after {result['budget']} "
             f"measurements (geometric mean over graphs; seeds {result['seeds']}; quirks "
             f"{result.get('quirks', 0.0)}; "
             + (f"models without the graph's family, {result['folds']} folds"
                if result.get("folds", 0) >= 2 else "the valid graphs")
             + "); THE STAND-IN IS A MODEL, NOT A TPU",
             f"{'family':<20} {'search':<8} {'geomean':>8}  per seed{'':<16} slower than default"
             f"  kept default: {_causes(result, searches)}"]
    for family, f in result["families"].items():
        for i, s in enumerate(searches):
            label = f"{family} ({len(f['graphs'])})" if i == 0 else ""
            seeds = " ".join(f"{v:.3f}" for v in f[s]["per_seed"])
            kept = " / ".join(str(n) for n in f[s].get("kept_default", {}).values()) or "-"
            lines.append(f"{label:<20} {s:<8} {f[s]['geomean']:>8.3f}  {seeds:<24} "
                         f"{f[s]['slower_than_default']:<19}  {kept}")
        lines.append(f"{'':<20} {'genetic':<8} {f['genetic']:>8.3f}  (the file's fastest-"
                     f"measured config, thousands of measurements)")
    graphs = [g for f in result["families"].values() for g in f["graphs"]]
    if graphs and all(k in searches for k in ("frozen", "updated", "bound")):
        lines += by_family(graphs)
    return "\n".join(lines)


def _causes(result: dict, searches: list[str]) -> str:
    """The causes the kept defaults are counted by (tuner.CAUSES, as the result names them)."""
    counts = next((f[s]["kept_default"] for f in result["families"].values() for s in searches
                   if "kept_default" in f[s]), {})
    return " / ".join(counts) or "-"


def by_family(graphs: list[dict]) -> list[str]:
    """Per model family, slowest updated search at the whole budget first: frozen / updated /
    bound at each budget, the share of frozen's distance to the bound the updates close there
    (log scale), the model's Kendall on the file's configs before any measurement (the graph's
    statistics from those configs / from the search's reference), and the held-out check
    (Kendall, frozen -> updated, mean over graphs and seeds)."""
    at = graphs[0]["at"]
    head = "  ".join(f"{'at ' + str(n):<27}" for n in at)
    lines = ["", "per model family: frozen / updated / bound (closed) at each budget; model = "
                 "the model's Kendall on the file's configs, with their own / the search's "
                 "reference; near = Kendall on unmeasured configs near the best, frozen -> "
                 "updated",
             f"{'family':<16} {head}  model         near"]
    families: dict[str, list[dict]] = {}
    for g in graphs:
        families.setdefault(g["family"], []).append(g)
    rows = []
    for name, gs in families.items():
        cells = [_cell(gs, i) for i in range(len(at))]
        near = [n for g in gs for n in g.get("near", []) if n]
        check = (f"{np.mean([n['frozen'] for n in near]):.2f} -> "
                 f"{np.mean([n['updated'] for n in near]):.2f}" if near else "-")
        worst = geomean([v[-1] for g in gs for v in g["updated_at"]])
        known = [np.mean([g.get(k, np.nan) for g in gs]) for k in ("model_kendall",
                                                                     "search_kendall")]
        rows.append((-worst, f"{name + f' ({len(gs)})':<16} " + "  ".join(cells)
                     + f"  {known[0]:>5.2f} / {known[1]:<5.2f}  {check}"))
    lines += [r for _, r in sorted(rows)]
    lines.append(f"{'all (' + str(len(graphs)) + ')':<16} "
                 + "  ".join(_cell(graphs, i) for i in range(len(at))))
    return lines


def _cell(graphs: list[dict], i: int) -> str:
    """'frozen / updated / bound (closed)' at the i-th budget, geometric means over graphs and
    seeds; closed = (log frozen - log updated) / (log frozen - log bound)."""
    f, u, b = (geomean([v[i] for g in graphs for v in g[f"{s}_at"]])
               for s in ("frozen", "updated", "bound"))
    gap = np.log(f) - np.log(b)
    closed = f"{(np.log(f) - np.log(u)) / gap:>4.0%}" if gap > 1e-6 else "   -"
    return f"{f:.3f} / {u:.3f} / {b:.3f} ({closed})"
