"""Search strategies (models/tuning/strategies/): a new one is a registration, the built-in
random one searches within the budget, and a wrong name is refused naming the known ones."""
from __future__ import annotations

import numpy as np
import pytest

from features.graph.layout_space import LayoutSpace, config_keys
from models.tuning import strategies
from models.tuning.search import Archive
from models.tuning.tuner import TuneSettings, tune

from .test_tune_search import GOOD, RANKS, SMALL_SEARCH, Believed, _valid_in_space, measure_of


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry for the test to register into, the real one left as it was."""
    monkeypatch.setattr(strategies, "STRATEGIES", dict(strategies.STRATEGIES))
    return strategies.STRATEGIES


def test_a_strategy_registered_in_a_test_is_what_tune_searches_with(registry):
    """A strategy proposing a fixed list of 12 random layouts: every config tune measures is
    the compiler default or one of them, and the strategy was made once for the search."""
    made, proposed = [], set()

    @strategies.register("fixed_list")
    class FixedList:
        def __init__(self, space, settings):
            self.configs = space.random(np.random.default_rng(0), 12)
            made.append(self)

        def propose(self, starts, score, rng):
            archive = Archive.empty()
            archive.add(np.concatenate([starts, self.configs]), score)
            proposed.update(config_keys(np.array(archive.configs)))
            return archive

    space = LayoutSpace(RANKS)
    result = tune(measure_of(GOOD), space, Believed(), 15, seed=1,
                  settings=TuneSettings(strategy="fixed_list"))
    assert "fixed_list" in registry and len(made) == 1
    default = config_keys(space.default(1))[0]
    listed = set(config_keys(made[0].configs)) | {default}
    assert set(config_keys(result.configs)) <= listed
    assert len(set(config_keys(result.configs)) - {default}) >= 5     # the list was searched
    assert proposed <= listed
    assert result.settings["strategy"] == "fixed_list"


def test_random_search_keeps_the_budget_and_returns_a_valid_layout():
    space = LayoutSpace(RANKS)
    calls = []
    settings = TuneSettings(strategy="random", search=SMALL_SEARCH)
    result = tune(measure_of(GOOD, noise=0.01, calls=calls), space, Believed(), 30, seed=2,
                  settings=settings)
    assert sum(calls) == len(result.runtimes) == 30
    assert _valid_in_space(space, result.configs) and _valid_in_space(space, result.best[None])
    assert any((c == result.best).all() for c in result.configs)
    assert result.rounds >= 3 and result.settings["strategy"] == "random"
    evolved = tune(measure_of(GOOD, noise=0.01), space, Believed(), 30, seed=2,
                   settings=TuneSettings(search=SMALL_SEARCH))
    assert not np.array_equal(evolved.configs, result.configs)       # another search


def test_an_unknown_strategy_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown search strategy 'annealing'; known: "
                                         r"evolutionary, random$"):
        TuneSettings(strategy="annealing")
    with pytest.raises(ValueError, match="registered already"):
        strategies.register("random")(object)
