"""The keyed feature cache: per-file units, entries assembled from them, their checksums, the
feature signature that keys them, and the builds that fill them (local pool or Dask)."""
