"""What pipeline.py's options need beyond argparse: KEY=VALUE overrides of settings dataclasses
and the Dask client of --scheduler."""
