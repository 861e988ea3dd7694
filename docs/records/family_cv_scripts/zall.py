"""One-off transform: within-graph z-scores of every group's cfg columns (conv, dot, reshape),
as the product has for cfg.all: the graph's own configs as the reference (dev files hold at most
1,000 configs and train keeps them all, so this is the file's reference, not a label pick)."""
from dataclasses import replace
import numpy as np

def zall(fs, groups=("cfg.conv.", "cfg.dot.", "cfg.reshape.")):
    cols = [i for i, c in enumerate(fs.columns) if c.startswith(groups)]
    X = fs.X[:, cols].astype(np.float64)
    Z = np.empty_like(X)
    for a, b in zip(fs.ptr[:-1], fs.ptr[1:]):
        x = X[a:b]
        sd = x.std(axis=0)
        Z[a:b] = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return replace(fs, X=np.hstack([fs.X, Z.astype(np.float32)]),
                   columns=tuple(fs.columns) + tuple("z." + fs.columns[i] for i in cols))


def zrep(fs):
    """zall, with the absolute group columns dropped: as many columns as before."""
    z = zall(fs)
    keep = [i for i, c in enumerate(z.columns)
            if not c.startswith(("cfg.conv.", "cfg.dot.", "cfg.reshape."))]
    return replace(z, X=np.ascontiguousarray(z.X[:, keep]), columns=tuple(z.columns[i] for i in keep))
