"""Raw TpuGraphs files -> validated graph arrays: where the data is, reading (node_config_feat
inflated in pieces, an int8 copy kept), and the format's checks."""
