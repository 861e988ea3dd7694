"""Measuring tools: two runs compared graph by graph and seed by seed (compare), and simulated
autotuning over a file's configs (tune_sim)."""
