"""The dev-quality test's training (tests/test_dev_quality.py), scored per family group.

    python docs/records/new_families_scripts/dev_quality_groups.py layout:xla:random layout:nlp:random

Run from the checkout's root with ../shared beside it; prints the valid mean of the old graphs,
of the new families (tests/conftest.py DEV_NEW_FAMILIES) and of each family.
"""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import features  # noqa: E402
from features import FeatureConfig  # noqa: E402
from models import metrics  # noqa: E402
from models.training.family_split import graph_family  # noqa: E402
from models.training.run_files import ensemble_scores  # noqa: E402
from models.training.runs import TrainConfig, fit_seeds  # noqa: E402
from tests.conftest import dev_new_families  # noqa: E402
from tests.test_dev_quality import FAST, FLOORS, _subset_tree  # noqa: E402

for collection in sys.argv[1:]:
    tmp = Path(tempfile.mkdtemp())
    root = _subset_tree(tmp / "data", collection, FLOORS[collection][0])
    cfg = FeatureConfig(max_train_configs_layout=500)
    train, valid = (features.load_or_build(root, collection, split, cfg, tmp / "cache")
                    for split in ("train", "valid"))
    models = fit_seeds(TrainConfig(ranker="lambdarank", seeds=1, overrides=FAST), train)
    scores = metrics.per_graph_scores(collection, ensemble_scores(models, valid), valid.runtime,
                                      valid.ptr)
    family = np.array([graph_family(g) for g in valid.graph_ids])
    new = np.isin(family, dev_new_families(collection))
    print(f"{collection}: old valid {scores[~new].mean():.3f}, new families {scores[new].mean():.3f}")
    for name in sorted(set(family), key=lambda f: scores[family == f].mean()):
        print(f"  {name:<14} {scores[family == name].mean():.3f}")
