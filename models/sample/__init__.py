"""The generated sample (the no-download demo and the tests' data) and the synthetic graphs it
and the bench draw: TpuGraphs-format files whose runtimes come from a memory-traffic model of
the quantities the features compute, so scores on them prove nothing about quality."""
