"""Progress bars over boosting rounds; tqdm stays silent when output is not a terminal."""
from __future__ import annotations

from contextlib import contextmanager

import xgboost as xgb
from tqdm import tqdm


@contextmanager
def rounds_bar(total: int, desc: str):
    bar = tqdm(total=total, desc=desc, unit="round", disable=None, leave=False)
    try:
        yield bar
    finally:
        bar.close()


def lightgbm_callback(bar: tqdm):
    def callback(env) -> None:
        bar.update(1)
    callback.order = 100  # after early stopping has had its say
    return callback


class XGBoostProgress(xgb.callback.TrainingCallback):
    def __init__(self, bar: tqdm):
        super().__init__()
        self.bar = bar

    def after_iteration(self, model, epoch, evals_log) -> bool:
        self.bar.update(1)
        return False
