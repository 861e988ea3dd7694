"""One-off (issue 70, docs/records/new_families.md, "a reference that grows"). Paired per graph: updated search of two live-search results (B - A, mean log over graphs and
seeds; se over graph-seeds), at each budget of `at`, and per family at the whole budget.
    python live_paired.py A.json B.json"""
import json, sys, numpy as np
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def graphs(r):
    return {g["graph"]: g for f in r["families"].values() for g in f["graphs"]}
ga, gb = graphs(a), graphs(b)
names = sorted(set(ga) & set(gb))
at = ga[names[0]]["at"]
for i, n in enumerate(at):
    d = np.array([np.log(x[i]) - np.log(y[i]) for g in names
                  for x, y in zip(gb[g]["updated_at"], ga[g]["updated_at"])])
    geo = lambda G: np.exp(np.mean([np.log(v[i]) for g in names for v in G[g]["updated_at"]]))
    print(f"at {n}: A {geo(ga):.3f} B {geo(gb):.3f} B-A {d.mean():+.4f} (se {d.std(ddof=1)/np.sqrt(d.size):.4f}, {d.size} graph-seeds)")
fams = {}
for g in names:
    fams.setdefault(ga[g]["family"], []).append(g)
for f, gs in sorted(fams.items(), key=lambda kv: -np.mean([np.log(v) for g in kv[1] for v in gb[g]["updated"]])):
    A = np.exp(np.mean([np.log(v) for g in gs for v in ga[g]["updated"]]))
    B = np.exp(np.mean([np.log(v) for g in gs for v in gb[g]["updated"]]))
    bd = np.exp(np.mean([np.log(v) for g in gs for v in ga[g]["bound"]]))
    print(f"  {f:<10} ({len(gs)}) drawn {A:.3f} grown {B:.3f} bound {bd:.3f}")
