"""The tuned config: a search that proposes layouts, measures them and teaches the cost model
with what it measures, in MetaSchedule's shape: the loop (tuner.py) over a layout space
(features/graph/layout_space.py) or a pool, the model adapters (tuner.py: Bound, Frozen, Blind),
the search strategies proposing each round's candidates (strategies/: by default the evolution
and its sampler, search.py and sampler.py; random search), the runner (runner.py: the user's
measure command), the measurement database (database.py) and the job that ties them (job.py:
`pipeline.py tune`). tune_graph hands a trained CostModel to the loop."""
from models.tuning.tune_graph import tune_graph

__all__ = ["tune_graph"]
