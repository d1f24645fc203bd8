"""Benchmark metric functions (see the submodules wse, ncp, endings)."""
