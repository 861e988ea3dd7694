"""pipeline.py's side of the command line: each command's options (options), the Dask client
of --scheduler (cluster), Ctrl-C and SIGTERM (interrupts), and warnings and errors as one line
each (messages). The KEY=VALUE overrides they parse are models/overrides.py, which the rankers'
settings use too: it stands below them, this folder above."""
