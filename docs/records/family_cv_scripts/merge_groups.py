"""One-off transform: conv and dot as one 'contraction' group (cfg.dot.q := conv + dot, cfg.conv
dropped), so what a transformer's dots teach applies to a CNN's convolutions and back."""
from dataclasses import replace
import numpy as np

def merged(fs):
    cols = list(fs.columns)
    X = fs.X.copy()
    for i, c in enumerate(cols):
        if not c.startswith("cfg.conv."):
            continue
        j = cols.index("cfg.dot." + c[len("cfg.conv."):])
        if c.endswith("bytes"):     # signed_log'd sums: add in linear space
            lin = lambda v: np.sign(v) * np.expm1(np.abs(v.astype(np.float64)))
            s = lin(X[:, i]) + lin(X[:, j])
            X[:, j] = (np.sign(s) * np.log1p(np.abs(s))).astype(np.float32)
        else:
            X[:, j] = X[:, i] + X[:, j]
    keep = [i for i, c in enumerate(cols) if not c.startswith("cfg.conv.")]
    return replace(fs, X=np.ascontiguousarray(X[:, keep]), columns=tuple(cols[i] for i in keep))
