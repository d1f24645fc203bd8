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
6. Give every asset ``group_name`` (``wse_bench`` | ``ncp_bench`` | ``endings`` | ``platform``; a default:
   ``assets/groups.py`` regroups every asset by role, ``<benchmark>_sources|cells|verdicts|tables``),
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


LLM_CALLS = "llm_calls"


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    llm_calls = AssetSpec(
        LLM_CALLS,
        description="One row per LLM call attempt made through the platform client (cache hits "
                    "included): run, role, model, tokens, latency, cost, cache hit, validity, failure kind. "
                    "Written by the `llm` resource while an LLM asset's step runs; every such step records a "
                    "materialization of this asset (its upstream edges are those assets), so `llm_usage` "
                    "downstream is rebuilt, or shown out of date, whenever calls were added.",
        group_name="platform",
        kinds={"duckdb"},
    )
    return [llm_calls]


def with_llm_calls_lineage(objs: list) -> list:
    """`llm_calls` with a dependency on every asset of kind "llm" (the lineage the UI draws)."""
    from dagster import AssetsDefinition

    llm_keys = sorted({s.key for o in objs if isinstance(o, AssetsDefinition) for s in o.specs
                       if "llm" in (s.kinds or set())}, key=lambda k: k.to_user_string())
    return [o.replace_attributes(deps=llm_keys) if isinstance(o, AssetSpec) and o.key.to_user_string() == LLM_CALLS
            else o for o in objs]


def mark_llm_calls(context, n_records: int, n_failed: int = 0) -> None:
    """Record, from an LLM asset's step, a materialization of `llm_calls` for the calls it added.

    The data version names this step's batch, so every batch of new calls is a new version of
    `llm_calls` (and `llm_usage` is rebuilt by its automation condition / shown unsynced)."""
    from dagster import AssetMaterialization

    if n_records <= 0:
        return
    step = str(getattr(context, "op_handle", None) or "step")
    partition = context.partition_key if getattr(context, "has_partition_key", False) else None
    version = f"{context.run.run_id[:8]}:{step}:{partition or '-'}:{n_records}"
    context.log_event(AssetMaterialization(
        asset_key=LLM_CALLS, tags={"dagster/data_version": version},
        metadata={"calls_added": n_records, "failed_calls_added": n_failed, "by_step": str(step),
                  **({"partition": partition} if partition else {})}))
