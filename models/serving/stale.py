"""The error of a run that cannot serve: its own module, so that every command can report it as
one line without loading the rankers' libraries (seconds a feature build need not wait)."""


class StaleRunError(RuntimeError):
    """No run can score these features (other feature code/settings, other data, no model)."""
