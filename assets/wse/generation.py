"""WSE-bench generation: one partition per model × architecture cell.

Writes `wse_trajectory_steps` (one row per attempted step) and `wse_trajectories`
(one row per trajectory) together, because both come from the same simulation.
Thin: the step loop lives in `wse_platform.wse.simulate`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import polars as pl
from dagster import AssetSpec, MaterializeResult, MetadataValue, multi_asset

from assets.helpers import pick_ids, transcripts, write_table
from assets.partitions import BenchmarkPartitions, cell_of
from assets.versioning import code_version
from assets.wse.sources import stored_seeds
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.versions import GENERATION_CODE
from wse_platform.wse.agents import GENERATION_ROLES
from wse_platform.wse.early import early_judging
from wse_platform.wse.seeds import demo_subset
from wse_platform.wse.simulate import simulate_cell, step_rows, trajectory_rows

GROUP = "wse_bench"
CODE = (*GENERATION_CODE["wse"], "wse_platform/wse/world.py",
        *(f"wse_platform/prompts/wse/{r.split('.', 1)[1]}.v1.md" for r in GENERATION_ROLES))
DEPS = ["wse_episode_seeds", "wse_cell_config"]


def cell_seeds(wh, settings: Settings):
    """`wse.seed_ids` (stored order kept), else the family-balanced first `wse.n_seeds` stored seeds
    (all 42 at paper scale)."""
    seeds = stored_seeds(wh)
    if settings.wse.seed_ids:
        return pick_ids(seeds, settings.wse.seed_ids, lambda s: s.seed_id, "wse.seed_ids", "wse_episode_seeds")
    n = settings.wse.n_seeds or len(seeds)
    return demo_subset(seeds, n)


def _keyed(key: str, result: MaterializeResult) -> MaterializeResult:
    return MaterializeResult(asset_key=key, metadata=result.metadata, data_version=result.data_version)


def _summary(trajs: pl.DataFrame) -> dict:
    fails = {str(k): int(v) for k, v in trajs.drop_nulls("failure_component")
             .group_by("failure_component").len().iter_rows()}
    ends = {str(k): int(v) for k, v in trajs.drop_nulls("end_kind").group_by("end_kind").len().iter_rows()}
    return {
        "n_trajectories": trajs.height,
        "mean_length": float(trajs["length"].mean()) if trajs.height else 0.0,
        "full_horizon": int((trajs["length"] == trajs["horizon"]).sum()) if trajs.height else 0,
        "failures_by_component": MetadataValue.json(fails),
        "story_endings": MetadataValue.json(ends),
    }


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.wse is None:
        return []

    @multi_asset(
        name="wse_generation",
        partitions_def=parts.wse,
        code_version=code_version(*CODE),
        specs=[
            AssetSpec("wse_trajectory_steps", deps=DEPS, group_name=GROUP, kinds={"duckdb", "llm"},
                      description="One row per attempted step of a WSE-bench trajectory (cell = model × "
                                  "architecture, seed, step): the player's option P_t chosen by the seed's "
                                  "schedule, NPC intents (B2/B3), the PlotPlan (WMOD), the canon narrative "
                                  "N_t (NULL when a component failed before narration), next options, "
                                  "new-day/story-end flags, the memory delta and state (WMEM), the failure "
                                  "record and the LLM call ids."),
            AssetSpec("wse_trajectories", deps=DEPS, group_name=GROUP, kinds={"duckdb"},
                      description="One row per WSE-bench trajectory (model × architecture × seed): horizon, "
                                  "length L_i (valid narrative steps), failing component and step, accepted "
                                  "story ending and step, day advances and steps lost to a World Memory "
                                  "failure."),
        ],
    )
    def wse_generation(context, warehouse: WarehouseResource, llm: LLMResource, settings: SettingsResource):
        s = settings.get()
        model, arch = cell_of(context.partition_key)
        wh = warehouse.get()
        seeds = cell_seeds(wh, s)
        # the configured judges start on each step as it is narrated (answers cached for the judging assets)
        with llm.session(context) as client, early_judging(client, s, model, arch) as early:
            records = simulate_cell(client, s, model, arch, seeds, horizon=s.wse.horizon, early=early)
        key = {"model": model, "arch": arch}
        steps, trajs = step_rows(records), trajectory_rows(records)
        version = records[0].generation_version if records else None
        with wh.held():  # both writes on one connection (one open and checkpoint per cell, not two)
            results = [_keyed("wse_trajectory_steps", write_table(
                wh, "wse_trajectory_steps", steps, key=key, data_version=version,
                extra_metadata={"n_steps": steps.height,
                                "n_narrated": int(steps["narrative"].is_not_null().sum()) if steps.height else 0})),
                _keyed("wse_trajectories", write_table(
                    wh, "wse_trajectories", trajs, key=key, data_version=version,
                    extra_metadata={**_summary(trajs), **transcripts(s, "wse", model=model, arch=arch)}))]
        yield from results

    return [wse_generation]
