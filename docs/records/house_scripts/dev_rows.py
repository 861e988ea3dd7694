"""file_table rows of a few dev files, saved for a byte comparison between two commits."""
import sys, numpy as np
from pathlib import Path
from features.rows.table import FeatureConfig, file_table
from features.npz.find import list_npz
root = Path("/work/shared/tpugraphs_dev/npz_all/npz")
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
for coll in ("layout:xla:default", "layout:nlp:random", "tile:xla"):
    for split in ("train", "valid"):
        f = list_npz(root, coll, split)[0]
        t = file_table(f, coll, split, FeatureConfig())
        np.save(out / f"{coll.replace(':','_')}_{split}_X.npy", t.X)
        np.save(out / f"{coll.replace(':','_')}_{split}_idx.npy", t.rows.config_idx)
        if t.nodes is not None:
            np.save(out / f"{coll.replace(':','_')}_{split}_nodes.npy", t.nodes.X)
        (out / f"{coll.replace(':','_')}_{split}_cols.txt").write_text("\n".join(t.columns))
        print(coll, split, t.X.shape, flush=True)
