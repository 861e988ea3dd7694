"""Graph arrays -> per-graph tables: operand roles and layout chains, opcode histograms and
configurable-node statistics that no config changes; and the graph's layout space (which
layouts are valid, and the moves a search makes in it), shared by the cost model and the search."""
