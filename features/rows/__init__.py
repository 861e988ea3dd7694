"""Graph tables and configs -> feature rows: which configs become rows, the per-config kernels,
one file's rows (table) and its node rows for the node learner; FeatureSet is what models read."""
