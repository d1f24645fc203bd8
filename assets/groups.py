"""Asset groups that say what they hold, in the order the data flows: sources → cells → verdicts → tables.

Each benchmark's assets are split by role, so its graph in the UI reads left to right without edge soup:

- `<bench>_sources`: the input files (observable sources), the config fingerprints, and the tables
  read straight from the files (`wse_initial_worlds`, `wse_episode_seeds`, `ncp_specs`);
- `<bench>_cells`: what a model generates, per cell (model × architecture; a 100-Endings story set);
- `<bench>_verdicts`: what a judge / auditor says about a cell, and what is computed from it per cell
  (downstream of a judge configuration, same partitions);
- `<bench>_tables`: the final, unpartitioned tables and reports.
`platform` keeps `llm_calls` and `llm_usage`. One rule assigns every asset (`group_of`), after the
asset modules built them, so a module's `group_name` is only a default.
"""
from __future__ import annotations

from dagster import AssetChecksDefinition, AssetsDefinition, AssetSpec

BENCHMARKS = ("wse", "ncp", "endings")
ROLES = ("sources", "cells", "verdicts", "tables")  # the order the data flows
SOURCE_TABLES = {"wse_initial_worlds", "wse_episode_seeds", "ncp_specs"}
JUDGE_CONFIGS = {"wse_judge_config", "ncp_reaudit_config", "endings_judge_config", "endings_rubric_config"}
BENCH_TAG = {"wse": "wse_bench", "ncp": "ncp_bench", "endings": "endings", "platform": "platform"}


def benchmark_of(name: str) -> str:
    prefix = name.split("_", 1)[0]
    return prefix if prefix in BENCHMARKS else "platform"


def _specs(objs: list) -> dict[str, tuple[AssetSpec, bool]]:
    out = {}
    for o in objs:
        if isinstance(o, AssetChecksDefinition):
            continue
        if isinstance(o, AssetsDefinition):
            for s in o.specs:
                out[s.key.to_user_string()] = (s, o.is_materializable)
        elif isinstance(o, AssetSpec):
            out[o.key.to_user_string()] = (o, False)
    return out


def group_of(objs: list) -> dict[str, str]:
    """asset name -> its group."""
    specs = _specs(objs)
    verdict: dict[str, bool] = {}

    def is_verdict(name: str) -> bool:  # downstream of a judge configuration, within the same partitions
        if name not in verdict:
            spec, _ = specs[name]
            verdict[name] = False
            deps = [d.asset_key.to_user_string() for d in spec.deps]
            verdict[name] = spec.partitions_def is not None and any(
                d in JUDGE_CONFIGS or (d in specs and specs[d][1] and specs[d][0].partitions_def == spec.partitions_def
                                       and is_verdict(d)) for d in deps)
        return verdict[name]

    out = {}
    for name, (spec, materializable) in specs.items():
        bench = benchmark_of(name)
        if bench == "platform":
            out[name] = "platform"
        elif not materializable or name in SOURCE_TABLES:
            out[name] = f"{bench}_sources"
        elif spec.partitions_def is None:
            out[name] = f"{bench}_tables"
        else:
            out[name] = f"{bench}_verdicts" if is_verdict(name) else f"{bench}_cells"
    return out


def regroup(objs: list) -> list:
    """Every asset in the group `group_of` assigns."""
    groups = group_of(objs)

    def one(spec: AssetSpec) -> AssetSpec:
        return spec.replace_attributes(group_name=groups.get(spec.key.to_user_string(), spec.group_name))

    out = []
    for o in objs:
        if isinstance(o, AssetsDefinition) and not isinstance(o, AssetChecksDefinition):
            o = o.map_asset_specs(one)
        elif isinstance(o, AssetSpec):
            o = one(o)
        out.append(o)
    return out


def role_rank(group: str) -> int:
    """Position of a group's role in the flow (platform last)."""
    role = group.split("_", 1)[1] if "_" in group else group
    return ROLES.index(role) if role in ROLES else len(ROLES)

