"""wse-platform: domain library for long-horizon LLM storytelling benchmarks.

Pure domain code (schemas, agents, auditors, metrics, statistics, the LLM client);
usable from a notebook without Dagster. Dagster wiring lives in `assets/` and `resources/`.
"""
__version__ = "0.1.0"
