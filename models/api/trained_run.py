"""What a CostModel scores with, fixed once loaded: the run's models per collection, its feature
settings and where it came from. A model's variants (nothing learnt, fewer models) share it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from features import FeatureConfig
from models.sample.generate import SAMPLE_MARKER
from models.training.run_record import RunRecord


@dataclass(frozen=True)
class TrainedRun:
    models: dict[str, list]     # collection -> its seed models (rankers first, then partners)
    settings: FeatureConfig
    source: str = ""            # the run directory ('' in memory: such a model cannot be saved)
    without: tuple[str, ...] = ()   # feature families the run left out
    trained_on: str = ""
    trained_on_sample: bool = False
    seeds: int | None = None    # load's choice of the run's seeds (None: all), kept by save

    @property
    def description(self) -> str:
        """Which run this is and what it was trained on, for a log line."""
        sample = " (the generated sample)" if self.trained_on_sample else ""
        return (f"run {self.source or '(in memory)'}, trained on "
                f"{self.trained_on or 'unrecorded data'}{sample}")


def trained_on_sample(record: RunRecord) -> bool:
    """The run's data was the generated sample: the default fallback (run.json's 'sample'), or
    a tree holding the sample's marker named as --data-dir."""
    if record.features.sample:
        return True
    data = Path(record.trained_on)
    return any((d / SAMPLE_MARKER).is_file() for d in (data, data.parent, data.parent.parent))
