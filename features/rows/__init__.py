"""Graph tables and configs -> feature rows: which configs become rows, the per-config kernels
and their extractors (registered in extractors.py, one per collection kind and feature set), one
file's rows (table) and its node rows for the node learner; FeatureSet is what models read."""
