"""run.json: how a trained run was made and how it scored, at the top of its run directory.

`pipeline.py train` (models/training/runs.py) writes it once the run's models are saved: the
ranker and every model's settings per collection, what the feature rows were built from
(settings, signature, cache keys, data), each collection's validation scores, the final score,
when and from which code and library versions the run was trained, the command that trains it
again, and every other file's size and checksum (features/cache/integrity.py). `submit`, `rank`,
`report`, `compare`, `tune-sim` and the API read it back as a RunRecord.

Runs written by older code lack some keys: the fields' defaults stand in. Keys this code does
not know (an older or newer writer's) are kept in `extra` and written back as they were.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from features import FeatureConfig
from features.cache.store import DamagedCacheError

RUN_FILE = "run.json"


def _known_and_extra(cls, data: dict) -> tuple[dict, dict]:
    """data's entries that are fields of cls, and the others."""
    names = {f.name for f in fields(cls)} - {"extra"}
    return ({k: v for k, v in data.items() if k in names},
            {k: v for k, v in data.items() if k not in names})


def _as_json(record) -> dict:
    """A record's fields in their order, which is the order run.json holds them in, then its
    extra entries."""
    return {**{f.name: getattr(record, f.name) for f in fields(record) if f.name != "extra"},
            **record.extra}


@dataclass(frozen=True, kw_only=True)
class RunFeatures:
    """run.json "features": what the run's rows were built from. `train` sets every field;
    rows handed to runs.train_run in memory come with no data or signature."""
    signature: str | None = None      # features.feature_signature of the settings
    settings: dict = field(default_factory=dict)        # FeatureConfig's fields
    data: str | None = None           # the npz root the rows were built from
    sample: bool = False              # that root was the generated sample
    # collection -> DataSource.train_fingerprint of its train files
    train_files: dict[str, str] = field(default_factory=dict)
    # collection -> {"train": s, "valid": s}: wall seconds of the build that made each entry
    build_seconds: dict[str, dict] = field(default_factory=dict)
    # collection -> {"train": key, "valid": key} of the feature cache entries the run used
    keys: dict[str, dict] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)   # entries this code does not know

    @classmethod
    def from_json(cls, data: dict) -> RunFeatures:
        known, extra = _known_and_extra(cls, data)
        return cls(**known, extra=extra)

    def to_json(self) -> dict:
        return _as_json(self)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """A run's run.json. Per-collection maps are keyed by collection name, in training order."""
    ranker: str = ""                  # a key of models.training.RANKERS
    train_config: dict = field(default_factory=dict)    # runs.TrainConfig's fields
    params: dict[str, dict] = field(default_factory=dict)   # the ranker's parameters
    node_params: dict[str, dict] = field(default_factory=dict)  # the node learner's, where the
                                                                # collection has one
    regression_partner_params: dict[str, dict] = field(default_factory=dict)   # likewise
    features: RunFeatures = field(default_factory=RunFeatures)
    metrics: dict[str, dict] = field(default_factory=dict)  # runs.CollectionResult.summary()
    warnings: tuple[str, ...] = ()    # said under the validation table
    final: float | None = None        # mean score over final_collections; None: none scored
    final_collections: tuple[str, ...] | None = None   # None: a run older than the key, where
                                                       # every collection counted
    created: str = ""                 # local time the run was saved, with its UTC offset
    git: str | None = None            # `git describe` of the code; None outside a checkout
    versions: dict[str, str] = field(default_factory=dict)   # lightgbm, xgboost, numpy, python
    cluster: dict | None = None       # {"workers": n} when a Dask cluster fit the models
    retrain: str | None = None        # the `train` command that makes the run again
    files: dict[str, dict] = field(default_factory=dict)   # every other file of the run:
                                                           # path -> integrity.file_sum
    extra: dict = field(default_factory=dict)   # keys this code does not know

    @classmethod
    def read(cls, run_dir: Path) -> RunRecord:
        """FileNotFoundError if run_dir holds no run.json, DamagedCacheError if it is unreadable."""
        path = Path(run_dir) / RUN_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path}: not a trained run (no run.json)")
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            raise DamagedCacheError(path, f"damaged run record (unreadable: {exc})",
                                    f"retrain with: python pipeline.py train --cache-dir "
                                    f"{Path(run_dir).parent.parent}") from None
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: dict) -> RunRecord:
        known, extra = _known_and_extra(cls, data)
        if "features" in known:
            known["features"] = RunFeatures.from_json(known["features"])
        for key in ("warnings", "final_collections"):
            if known.get(key) is not None:
                known[key] = tuple(known[key])
        return cls(**known, extra=extra)

    def to_json(self) -> dict:
        return {**_as_json(self), "features": self.features.to_json()}

    def write(self, run_dir: Path) -> Path:
        path = Path(run_dir) / RUN_FILE
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    @property
    def collections(self) -> list[str]:
        """The collections the run has models and scores for."""
        return list(self.metrics)

    @property
    def scored_collections(self) -> list[str]:
        """The collections `final` is the mean of."""
        return self.collections if self.final_collections is None else list(self.final_collections)

    @property
    def seeds(self) -> int:
        """Models per collection (TrainConfig.seeds)."""
        return self.train_config["seeds"]

    @property
    def without(self) -> tuple[str, ...]:
        """The feature families the run left out (TrainConfig.without)."""
        return tuple(self.train_config.get("without", ()))

    @property
    def feature_config(self) -> FeatureConfig:
        """The run's feature settings; TypeError or ValueError where this code no longer has
        them."""
        return FeatureConfig(**self.features.settings)

    @property
    def fixed_reference(self) -> bool:
        """Whether the run's rows were set against a reference fixed per graph (FeatureConfig
        .reference other than "file", its default, which runs before the setting had)."""
        return self.features.settings.get("reference", FeatureConfig.reference) != "file"

    @property
    def trained_on(self) -> str:
        """The npz root the run's rows were built from, "" where the run does not say."""
        return self.features.data or ""
