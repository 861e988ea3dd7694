"""pipeline.py's side of the command line: each command's options (options), KEY=VALUE
overrides of settings dataclasses (settings), the Dask client of --scheduler (cluster), Ctrl-C
and SIGTERM (interrupts), and warnings and errors as one line each (messages)."""
