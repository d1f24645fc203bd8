"""WSE-bench judging: consistency and richness verdicts per model × architecture cell.

Judges read the stored trajectories (never regenerate) and write with the judge
configuration id in the partition key, so a changed judge adds new verdicts next to
the old ones. `wse_consistency_steps` / `wse_trajectory_consistency` are rebuilt from
the stored votes with the same aggregation the judging loop used (no LLM calls).
Thin: everything lives in `wse_platform.wse.judges`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import json

import polars as pl
from dagster import AssetSpec, MaterializeResult, MetadataValue, asset, multi_asset

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions, cell_of
from assets.versioning import code_version
from assets.wse.sources import stored_seeds
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.versions import JUDGE_CODE
from wse_platform.wse.judges import (
    CONSISTENCY_ROLE,
    RICHNESS_ROLE,
    consistency_tables_from_verdicts,
    judge_consistency,
    judge_richness,
    judged_trajectories,
)

GROUP = "wse_bench"
COMMON_CODE = (*JUDGE_CODE["wse"], "wse_platform/wse/schemas.py", "wse_platform/wse/agents.py",
               "wse_platform/wse/world.py")
CONSISTENCY_CODE = (*COMMON_CODE, "wse_platform/prompts/wse/consistency_judge.v1.md")
RICHNESS_CODE = (*COMMON_CODE, "wse_platform/prompts/wse/richness_judge.v1.md")
JUDGE_DEPS = ["wse_trajectory_steps", "wse_trajectories", "wse_episode_seeds", "wse_judge_config"]


def cell_trajectories(wh, model: str, arch: str):
    """The stored trajectories of one cell, rebuilt for judging (blinded views are made later).
    One warehouse connection for the three reads (each open reads the catalog)."""
    with wh.held():
        trajs = wh.table("wse_trajectories", {"model": model, "arch": arch})
        if not trajs.height:
            raise ValueError(f"wse_trajectories has no rows for model={model!r}, arch={arch!r}: "
                             "materialize wse_trajectory_steps for this cell first")
        steps = wh.query("SELECT seed_id, step, player_option, narrative, new_day FROM wse_trajectory_steps "
                         "WHERE model = ? AND arch = ?", [model, arch])
        seeds = {s.seed_id: s for s in stored_seeds(wh)}
    return judged_trajectories(steps, trajs, seeds), trajs


def _counts(df: pl.DataFrame, col: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in df.drop_nulls(col).group_by(col).len().sort(col).iter_rows()}


def _failure_kinds(df: pl.DataFrame) -> dict[str, int]:
    """Failed judge outputs by error kind (e.g. truncated = cut by the token budget)."""
    kinds = [json.loads(f).get("error_kind", "unknown") for f in df["failure_json"].drop_nulls().to_list()]
    return {k: kinds.count(k) for k in sorted(set(kinds))}


def _keyed(key: str, result: MaterializeResult) -> MaterializeResult:
    return MaterializeResult(asset_key=key, metadata=result.metadata, data_version=result.data_version)


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.wse is None:
        return []
    out = []

    if settings.wse.consistency_judge is not None:
        @asset(
            name="wse_consistency_verdicts",
            partitions_def=parts.wse,
            deps=JUDGE_DEPS,
            group_name=GROUP,
            kinds={"duckdb", "llm"},
            code_version=code_version(*CONSISTENCY_CODE),
            description="One row per (trajectory, judged step, judge index) of the consistency judges: "
                        "consistent / inconsistent / uncertain (NULL when the judge's output stayed "
                        "invalid), and for inconsistent votes the prior fact, where it was established, the "
                        "conflicting claim, why they exclude each other, the missing transition and a "
                        "category. Steps are judged in order and a trajectory stops at its first "
                        "majority-inconsistent or no-majority step. Judges see a blinded view only.",
        )
        def wse_consistency_verdicts(context, warehouse: WarehouseResource, llm: LLMResource,
                                     settings: SettingsResource):
            s = settings.get()
            judge = s.wse.consistency_judge
            model, arch = cell_of(context.partition_key)
            wh = warehouse.get()
            trajs, _ = cell_trajectories(wh, model, arch)
            with llm.session(context) as client:
                tables = judge_consistency(client, s, judge, trajs)
            v = tables.verdicts
            key = {"model": model, "arch": arch, "judge_config_id": judge.judge_id(CONSISTENCY_ROLE)}
            return write_table(wh, "wse_consistency_verdicts", v, key=key, extra_metadata={
                "judge_config_id": key["judge_config_id"],
                "votes": MetadataValue.json(_counts(v, "verdict")),
                "failed_votes": int(v["verdict"].is_null().sum()) if v.height else 0,
                "failed_votes_by_kind": MetadataValue.json(_failure_kinds(v)),
                "first_contradictions": int(tables.trajectories["first_contradiction"].is_not_null().sum()),
                "censored_no_majority": int(tables.trajectories["censored_at"].is_not_null().sum()),
            })

        @multi_asset(
            name="wse_consistency_aggregates",
            partitions_def=parts.wse,
            code_version=code_version(*CONSISTENCY_CODE),
            specs=[
                AssetSpec("wse_consistency_steps", deps=["wse_consistency_verdicts", "wse_trajectories"],
                          group_name=GROUP, kinds={"duckdb"},
                          description="One row per judged (trajectory, step): valid votes, consistent / "
                                      "inconsistent / uncertain counts, the 2-of-3 majority (NULL = no valid "
                                      "majority), and the violation category and commitment source agreed by "
                                      ">= 2 inconsistent votes."),
                AssetSpec("wse_trajectory_consistency", deps=["wse_consistency_verdicts", "wse_trajectories"],
                          group_name=GROUP, kinds={"duckdb"},
                          description="One row per trajectory: length L_i, first contradiction T_inc (NULL = "
                                      "none), and censoring at the step before the first step without a valid "
                                      "majority (censor_reason 'no_majority')."),
            ],
        )
        def wse_consistency_aggregates(context, warehouse: WarehouseResource, settings: SettingsResource):
            judge = settings.get().wse.consistency_judge
            model, arch = cell_of(context.partition_key)
            wh = warehouse.get()
            judge_id = judge.judge_id(CONSISTENCY_ROLE)
            with wh.held():  # two reads and two writes on one connection; results yielded after it closes
                trajs = wh.table("wse_trajectories", {"model": model, "arch": arch})
                votes = wh.table("wse_consistency_verdicts", {"model": model, "arch": arch, "judge_config_id": judge_id})
                steps, per_traj = consistency_tables_from_verdicts(votes, trajs, judge)
                key = {"model": model, "arch": arch, "judge_config_id": judge_id}
                results = [_keyed("wse_consistency_steps", write_table(
                    wh, "wse_consistency_steps", steps, key=key,
                    extra_metadata={"majorities": MetadataValue.json(_counts(steps, "majority"))})),
                    _keyed("wse_trajectory_consistency", write_table(
                        wh, "wse_trajectory_consistency", per_traj, key=key, extra_metadata={
                            "first_contradictions": int(per_traj["first_contradiction"].is_not_null().sum()),
                            "censored_no_majority": int(per_traj["censored_at"].is_not_null().sum())}))]
            yield from results

        out += [wse_consistency_verdicts, wse_consistency_aggregates]

    if settings.wse.richness_judge is not None:
        @asset(
            name="wse_richness_verdicts",
            partitions_def=parts.wse,
            deps=JUDGE_DEPS,
            group_name=GROUP,
            kinds={"duckdb", "llm"},
            code_version=code_version(*RICHNESS_CODE),
            description="One row per (trajectory with L_i >= 1, judge index) of the richness judges: the "
                        "text-supported development units (step, kind, repetitive, evidence), the number of "
                        "non-repetitive units, observed steps and the anchored 1-5 ratings for event "
                        "diversity, character & relationship change and world/social expansion (NULL with "
                        "failure_json when the judge's output stayed invalid).",
        )
        def wse_richness_verdicts(context, warehouse: WarehouseResource, llm: LLMResource,
                                  settings: SettingsResource):
            s = settings.get()
            judge = s.wse.richness_judge
            model, arch = cell_of(context.partition_key)
            wh = warehouse.get()
            trajs, _ = cell_trajectories(wh, model, arch)
            with llm.session(context) as client:
                df = judge_richness(client, s, judge, trajs)
            key = {"model": model, "arch": arch, "judge_config_id": judge.judge_id(RICHNESS_ROLE)}
            return write_table(wh, "wse_richness_verdicts", df, key=key, extra_metadata={
                "judge_config_id": key["judge_config_id"],
                "failed": int(df["failure_json"].is_not_null().sum()) if df.height else 0,
                "failed_by_kind": MetadataValue.json(_failure_kinds(df)),
                "mean_units_non_repetitive": float(df["n_units_non_repetitive"].mean() or 0) if df.height else 0.0,
            })

        out.append(wse_richness_verdicts)
    return out
