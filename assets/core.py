"""Platform-level assets, and THE CONVENTION every benchmark asset module follows.

Convention (read before writing an asset module under ``assets/<benchmark>/``):

1. A module exposes ``build(settings: Settings, parts: BenchmarkPartitions) -> list`` returning
   its ``AssetsDefinition`` / ``AssetSpec`` / ``AssetChecksDefinition`` objects. Assets are
   defined *inside* ``build`` (decorators in a closure) because partitions come from the config.
   ``assets/<benchmark>/__init__.py`` lists the modules; ``wse_platform/definitions.py`` composes.
2. An asset that writes a warehouse table has the asset key equal to the table name. It writes
   through ``WarehouseResource`` (resource key ``warehouse``) with
   ``assets.helpers.write_table(wh, table, df, key=..., plots=..., extra_metadata=...)``,
   which returns the ``MaterializeResult`` (row count, markdown preview, inline PNG plots).
   An asset that writes several tables uses ``@multi_asset`` with one spec per table, or
   writes the secondary table and names it in metadata (then prefer a dbt-like SQL model).
3. Partitioned assets take their ``partitions_def`` from ``parts`` (``parts.wse``, ``parts.ncp``,
   ``parts.ncp_extraction``, ``parts.endings``; skip building the asset if it is ``None``) and get
   the cell with ``assets.partitions.cell_of(context.partition_key) -> (model, arch)`` or
   ``parse_endings_set(context.partition_key)``; they write with
   ``key={"model": model, "arch": arch}`` (plus ``judge_config_id`` for verdict tables so older
   judge configurations are kept).
4. LLM calls go through ``LLMResource`` (resource key ``llm``)::

       with llm.session(context) as client:   # records every call into llm_calls at the end
           results = client.complete_many(requests)

5. Settings through ``SettingsResource`` (resource key ``settings``): ``settings.get()``.
6. Give every asset ``group_name`` (``wse_bench`` | ``ncp_bench`` | ``endings`` | ``platform``),
   ``kinds`` (``{"duckdb"}``, plus ``"llm"`` where it calls a model), a one-paragraph
   ``description`` saying what a row is, and a ``code_version`` from
   ``assets.versioning.code_version(module_or_file, ..., prompts=[...])`` so the UI shows
   unsynced assets when the code or a prompt changes. Generation and judging assets also depend
   on the config source assets named in ``assets.versioning`` (see there).
7. Do not annotate ``context`` when the module uses ``from __future__ import annotations``
   (Dagster rejects string annotations on ``context``); resource parameters must stay annotated
   (``warehouse: WarehouseResource``), so asset modules should NOT use the __future__ import.
8. Domain logic stays in ``wse_platform/`` (no dagster import there). An asset body is a few lines:
   read inputs from the warehouse, call the domain function, write the table.
"""
from __future__ import annotations

from dagster import AssetSpec

from assets.partitions import BenchmarkPartitions
from wse_platform.config import Settings


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    llm_calls = AssetSpec(
        "llm_calls",
        description="One row per LLM call attempt made through the platform client (cache hits "
                    "included): run, role, model, tokens, latency, cost, cache hit, validity. "
                    "Written by the `llm` resource at the end of every step that calls a model.",
        group_name="platform",
        kinds={"duckdb"},
    )
    return [llm_calls]
