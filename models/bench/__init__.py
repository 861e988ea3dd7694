"""`pipeline.py bench`: real-size generated inputs, every stage timed, and the projection to the
full download. Imported by that command alone."""
