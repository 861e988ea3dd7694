"""`pipeline.py report`: one HTML page of a trained run and its figures."""
