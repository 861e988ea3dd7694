"""The tuned config: a search that proposes layouts, measures them with the user's command and
learns from what it measures (pipeline.py tune; CostModel.tune)."""
