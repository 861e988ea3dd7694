"""Graph arrays -> per-graph tables: operand roles and layout chains, opcode histograms and
configurable-node statistics that no config changes."""
