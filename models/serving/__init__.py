"""A trained run put to use: which run serves which collection, and the submission file."""
