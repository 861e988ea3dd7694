"""One-off (issue 70, docs/records/new_families.md, "a reference that grows"): two sets of
`tune-sim` logs paired per graph over draw seeds: the updated search's best / pool best at each
budget (geo-mean) and the mean log ratio B - A with its standard error over graph-draws, and the
near-best check. Logs: LOGS/<A>[_s<N>].log (seed 0 without the suffix), LOGS/<B>_s<N>.log.

    LOGS=DIR python paired_logs.py D0_search_layout_nlp_default G1_nlp 0,1,2 [families]"""
import os
import re, sys, os, numpy as np
def parse(path):
    fam = {}; lines = open(path).read().splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"^(\w[\w-]*) \((\d+)\)\s+frozen\s+(.*)$", l)
        if m:
            up = lines[i+1].split()
            nb = re.search(r"([-\d.]+) ->\s+([-\d.]+)", lines[i+1])
            fam[m.group(1)] = dict(n=int(m.group(2)), frozen=list(map(float, m.group(3).split()[:5])),
                                   updated=list(map(float, up[1:6])),
                                   near=(float(nb.group(1)), float(nb.group(2))) if nb else None)
    return fam
LOGS = os.environ.get("LOGS", ".")
A, B = sys.argv[1], sys.argv[2]   # log name stems: e.g. D0_search_layout_xla_default  G0_xla
seeds = [int(s) for s in sys.argv[3].split(",")]
def path(stem, s, base):
    if base: return f"{LOGS}/{stem}{'' if s == 0 else f'_s{s}'}.log"
    return f"{LOGS}/{stem}_s{s}.log"
ra = {s: parse(path(A, s, True)) for s in seeds}; rb = {s: parse(path(B, s, False)) for s in seeds}
for k in ("updated",):
    for bi, b in enumerate((5, 10, 20, 50, 100)):
        d = []; ga=[]; gb=[]
        for s in seeds:
            for f, a in ra[s].items():
                if f not in rb[s]: continue
                c = rb[s][f]; d += [np.log(c[k][bi]) - np.log(a[k][bi])] * a["n"]
                ga += [np.log(a[k][bi])]*a["n"]; gb += [np.log(c[k][bi])]*a["n"]
        d = np.array(d)
        print(f"{k} @{b}: A {np.exp(np.mean(ga)):.3f} B {np.exp(np.mean(gb)):.3f}  B-A {d.mean():+.4f} (se {d.std(ddof=1)/np.sqrt(len(d)):.4f})")
na=[];nb=[]
for s in seeds:
    for f, a in ra[s].items():
        if f in rb[s] and a["near"] and rb[s][f]["near"]:
            na.append(a["near"]); nb.append(rb[s][f]["near"])
na, nb = np.array(na), np.array(nb)
print("near-best frozen->updated: A", na.mean(0).round(3), " B", nb.mean(0).round(3))
if len(sys.argv) > 4 and sys.argv[4] == "families":   # per family, worst at 20 (B) first
    rows = []
    for f in rb[seeds[0]]:
        a = np.exp(np.mean(np.log([ra[s][f]["updated"] for s in seeds]), 0))
        b = np.exp(np.mean(np.log([rb[s][f]["updated"] for s in seeds]), 0))
        rows.append((-b[2], f, a, b))
    for _, f, a, b in sorted(rows):
        print(f"{f:<13} at 10 {a[1]:.3f} -> {b[1]:.3f}   at 20 {a[2]:.3f} -> {b[2]:.3f}   "
              f"at 100 {a[4]:.3f} -> {b[4]:.3f}")
