"""WSE-bench final tables (unpartitioned): each asset rebuilds one warehouse table of the same name
from every stored cell, with the current judge configurations. Builders: `wse_platform.wse.tables`;
figures: `wse_platform.wse.plots` (written under `<artifacts>/wse/` and attached as metadata).
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from dagster import AssetExecutionContext, AssetKey, MaterializeResult, asset

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.wse import tables as T
from wse_platform.wse.plots import heatmap_png, km_curves_png, pareto_png

GROUP = "wse_bench"
METRIC_CODE = ("wse_platform/wse/tables.py", "wse_platform/metrics/wse.py", "wse_platform/stats/km.py",
               "wse_platform/wse/architecture.py")
BOOTSTRAP_CODE = (*METRIC_CODE, "wse_platform/stats/bootstrap.py")
FRAME_DEPS = [AssetKey("wse_trajectories"), AssetKey("wse_trajectory_consistency"),
              AssetKey("wse_richness_verdicts")]


def _frame(wh, params: T.TableParams):
    """The per-trajectory frame of the stored upstream tables (current judge configurations)."""
    return T.trajectory_frame(wh.query("SELECT * FROM wse_trajectories"),
                              wh.query("SELECT * FROM wse_trajectory_consistency"),
                              wh.query("SELECT * FROM wse_richness_verdicts"), params)


def _save(settings: Settings, name: str, png: bytes):
    path = settings.artifacts / "wse" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def _kw(description: str, deps, code) -> dict:
    return {"group_name": GROUP, "kinds": {"duckdb"}, "description": description, "deps": deps,
            "code_version": code_version(*code)}


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.wse is None:
        return []

    @asset(name="wse_cell_metrics", **_kw(
        "One row per model × architecture: n trajectories, G (generation coverage), C_obs / C_adj "
        "(Kaplan–Meier consistency over the horizon, with/without credit for unsupported steps), R (mean "
        "richness over trajectories with a narrative), failures by component and story endings. Plots: "
        "heatmaps of G, C_obs, R and Kaplan–Meier curves per model.", FRAME_DEPS, (*METRIC_CODE,
                                                                                     "wse_platform/wse/plots.py")))
    def wse_cell_metrics(context: AssetExecutionContext, warehouse: WarehouseResource,
                         settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        frame, info = _frame(wh, T.TableParams.from_settings(s))
        df = T.cell_metrics(frame, info)
        plots = {f"heatmap_{m}": _save(s, f"wse_heatmap_{m}", heatmap_png(df, m)) for m in ("G", "C_obs", "R")}
        plots["km_curves"] = _save(s, "wse_km_curves", km_curves_png(frame, info["horizon"]))
        return write_table(wh, "wse_cell_metrics", df, plots=plots, extra_metadata={
            "horizon": info["horizon"], "consistency_judge": str(info["consistency_judge_id"]),
            "richness_judge": str(info["richness_judge_id"]),
            "cells_without_C_obs": int(df["C_obs"].null_count())})

    @asset(name="wse_architecture_contrasts", **_kw(
        "Architecture contrasts B2−B1, B3−B1, B3−B2, WMEM on−off, WMOD on−off (ΔG, ΔC_obs, ΔC_adj, ΔR), "
        "averaged over the other factors with models weighted equally, with 95 % hierarchical bootstrap "
        "intervals (worlds, then EpisodeSeeds within worlds; models fixed; wse.bootstrap_draws draws, "
        "seeded). scope=group: per model group (paper Table 1); model: per model (Table 8); "
        "base_conditional: WMEM/WMOD effects within each B level (Table 9).", FRAME_DEPS, BOOTSTRAP_CODE))
    def wse_architecture_contrasts(context: AssetExecutionContext, warehouse: WarehouseResource,
                                   settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params)
        df = T.architecture_contrasts(frame, info, params)
        return write_table(wh, "wse_architecture_contrasts", df, extra_metadata={
            "bootstrap_draws": params.bootstrap_draws, "bootstrap_seed": params.bootstrap_seed})

    @asset(name="wse_pareto", **_kw(
        "One row per cell and consistency axis (C_adj or C_obs, against R): non-dominated, supported "
        "(on the upper concave envelope, i.e. best for some positive weighting) and, for unsupported "
        "non-dominated cells, the R gap below the chord of the neighbouring supported cells. Plots: "
        "Pareto scatter with the envelope.", [AssetKey("wse_cell_metrics")],
        (*METRIC_CODE, "wse_platform/wse/plots.py")))
    def wse_pareto(context: AssetExecutionContext, warehouse: WarehouseResource,
                   settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        cells = wh.query("SELECT * FROM wse_cell_metrics")
        df = T.pareto_table(cells)
        plots = {f"pareto_{a}": _save(s, f"wse_pareto_{a}", pareto_png(cells, a)) for a in ("C_adj", "C_obs")}
        return write_table(wh, "wse_pareto", df, plots=plots)

    @asset(name="wse_scaling_fit", **_kw(
        "OLS fits Y = α + β·log2(P) (P = params_b from the config) of G, C_obs and R (model means over "
        "architectures) within each model family with at least 3 models, plus one leave-one-out refit per "
        "model. Empty (with a note) when no family has 3 models.", [AssetKey("wse_cell_metrics")],
        (*METRIC_CODE, "wse_platform/stats/scaling.py")))
    def wse_scaling_fit(context: AssetExecutionContext, warehouse: WarehouseResource,
                        settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        df, note = T.scaling_fit(wh.query("SELECT * FROM wse_cell_metrics"),
                                 T.TableParams.from_settings(settings.get()))
        return write_table(wh, "wse_scaling_fit", df, extra_metadata={"note": note or "fitted"})

    @asset(name="wse_source_family", **_kw(
        "Paper Table 7 by source family (DraCor, ITP, Smallville): C_obs and C_adj (cell averages, models "
        "weighted equally) with bootstrap intervals (worlds resampled within family, then seeds), the "
        "DraCor − ITP and DraCor − Smallville contrasts, leave-one-play-out rows, observed steps, "
        "day-advance %, full-horizon % and the median first-contradiction step.", FRAME_DEPS, BOOTSTRAP_CODE))
    def wse_source_family(context: AssetExecutionContext, warehouse: WarehouseResource,
                          settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params)
        return write_table(wh, "wse_source_family", T.source_family_table(frame, info, params))

    @asset(name="wse_horizon_sensitivity", **_kw(
        "G_h, C_obs(h) and C_adj(h) recomputed from the same trajectories truncated at h = 5, 10, 15, 20 "
        "(up to the horizon, plus the horizon itself), overall and per model, with the share of first "
        "contradictions (by step H) that appeared by step 10.", FRAME_DEPS, METRIC_CODE))
    def wse_horizon_sensitivity(context: AssetExecutionContext, warehouse: WarehouseResource,
                                settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        frame, info = _frame(wh, T.TableParams.from_settings(settings.get()))
        return write_table(wh, "wse_horizon_sensitivity", T.horizon_sensitivity(frame, info))

    @asset(name="wse_first_violations", **_kw(
        "At each trajectory's first contradiction: table_kind=category — the violation category agreed by "
        "≥ 2 judges (paper Table 5) — and table_kind=commitment_source — where the contradicted fact was "
        "established: initial_world / opening / earlier_narrative / current_narrative / unresolved (Table "
        "6); n, %, median step, overall and per model.",
        [*FRAME_DEPS, AssetKey("wse_consistency_steps")], METRIC_CODE))
    def wse_first_violations(context: AssetExecutionContext, warehouse: WarehouseResource,
                             settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        frame, info = _frame(wh, T.TableParams.from_settings(settings.get()))
        df = T.first_violations(frame, wh.query("SELECT * FROM wse_consistency_steps"), info)
        return write_table(wh, "wse_first_violations", df)

    @asset(name="wse_generation_failures", **_kw(
        "Paper Table 3: per component (centralized_ca in B2, distributed_ca in B3, world_model with WMOD, "
        "world_memory_agent with WMEM, story_agent always, and any), failures over the trajectories where "
        "the component is enabled, median failure step, and the narrative steps lost after World Memory "
        "Agent failures; overall and per model.", [AssetKey("wse_trajectories")], METRIC_CODE))
    def wse_generation_failures(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        return write_table(wh, "wse_generation_failures",
                           T.generation_failures(wh.query("SELECT * FROM wse_trajectories")))

    return [wse_cell_metrics, wse_architecture_contrasts, wse_pareto, wse_scaling_fit, wse_source_family,
            wse_horizon_sensitivity, wse_first_violations, wse_generation_failures]
