"""Thin Dagster asset definitions, one folder per benchmark. They call `wse_platform` and write the warehouse."""
