"""WSE-bench final tables (unpartitioned): each asset rebuilds one warehouse table of the same name
from every stored cell, with the current judge configurations. Builders: `wse_platform.wse.tables`;
figures: `wse_platform.wse.plots` (written under `<artifacts>/wse/` and attached as metadata).
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from pathlib import Path

from dagster import AssetExecutionContext, AssetKey, MaterializeResult, asset

import polars as pl

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.dagster_private import latest_materialization_ids
from wse_platform.run_split import weight_metadata
from wse_platform.wse import tables as T
from wse_platform.wse import figures as F
from wse_platform.wse.plots import (
    cost_coverage_png,
    family_models_png,
    full_horizon_png,
    heatmap_png,
    km_curves_png,
    pareto_png,
    precursor_png,
)

GROUP = "wse_bench"
TABLE_CODE = tuple(f"wse_platform/wse/tables/{m}.py" for m in (
    "__init__", "frame", "schema", "cells", "contrasts", "scaling", "families", "horizon", "violations", "failures",
    "agreement", "richness_agreement", "precursors", "robustness", "validation"))
METRIC_CODE = (*TABLE_CODE, "wse_platform/metrics/wse.py", "wse_platform/stats/km.py",
               "wse_platform/wse/architecture.py")
BOOTSTRAP_CODE = (*METRIC_CODE, "wse_platform/stats/bootstrap.py")
FRAME_DEPS = [AssetKey("wse_trajectories"), AssetKey("wse_trajectory_consistency"),
              AssetKey("wse_richness_verdicts")]
EXAMPLE_LABELS = Path(T.__file__).resolve().parents[1] / "human_labels_example"


_FRAMES: dict = {}   # the last frame `_frame` built in this process, by `_frame_key`


def _frame(wh, params: T.TableParams, context: AssetExecutionContext | None = None):
    """The per-trajectory frame of the stored upstream tables (current judge configurations).

    Nine tables of a run read it (~40 ms of CPU each on the fleet's 504 trajectories: three whole-table
    queries and the frame): with `context`, a later table of the same run takes the one an earlier table
    built, while the upstream assets have no newer materialization than then (their newest storage ids,
    read before the rows; a cell written meanwhile gives a new frame, as the queries would) and for the
    same warehouse file and parameters."""
    key = _frame_key(wh, params, context)
    if key is not None and key in _FRAMES:
        frame, info = _FRAMES[key]
        return frame, dict(info)
    frame, info = T.trajectory_frame(wh.query("SELECT * FROM wse_trajectories"),
                                     wh.query("SELECT * FROM wse_trajectory_consistency"),
                                     wh.query("SELECT * FROM wse_richness_verdicts"), params)
    _FRAMES.clear()
    if key is not None:
        _FRAMES[key] = (frame, dict(info))
    return frame, info


def _frame_key(wh, params: T.TableParams, context) -> tuple | None:
    """(run, warehouse file, parameters, newest materialization of each upstream asset), or None (no reuse)."""
    if context is None:
        return None
    try:
        stat = wh.path.stat()
        ids = latest_materialization_ids(context.instance, FRAME_DEPS)
        return (context.run.run_id, str(wh.path), stat.st_dev, stat.st_ino, repr(params),
                tuple(ids.get(k) for k in FRAME_DEPS))
    except Exception:  # noqa: BLE001 - no reuse: the frame is read as before
        return None


def _save(settings: Settings, name: str, png: bytes):
    path = settings.artifacts / "wse" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


# each table's seconds per step in the tables runs of `bench/fleet.py --benchmarks wse` at 64 slots (12 architectures x
# 42 seeds, horizon 3, a 3-judge panel; two runs at load ~2-3 on 2 cores, the first step of a worker's run included):
# `wse materialize --parallel` cuts the tables into runs side by side balanced by these (`run_split`), so that the
# runs after the last cell end together; only the grouping follows from them, never a row
RUN_WEIGHTS = {"wse_cell_metrics": 0.85, "wse_pareto": 0.67, "wse_source_family": 0.54, "wse_horizon_sensitivity": 0.5,
               "wse_cost_contrasts": 0.36, "wse_architecture_contrasts": 0.32, "wse_full_horizon_contrasts": 0.25,
               "wse_scaling_fit": 0.23, "wse_human_validation": 0.14, "wse_generation_failures": 0.13,
               "wse_judge_agreement": 0.12, "wse_precursor_audit": 0.1, "wse_first_violations": 0.09,
               "wse_richness_agreement": 0.09, "wse_failure_kinds": 0.07}


def _kw(name: str, description: str, deps, code) -> dict:
    return {"name": name, "group_name": GROUP, "kinds": {"duckdb"}, "description": description, "deps": deps,
            "code_version": code_version(*code), "metadata": weight_metadata(RUN_WEIGHTS, name)}


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.wse is None:
        return []

    @asset(**_kw("wse_cell_metrics",
        "One row per model × architecture: n trajectories, G (generation coverage), C_obs / C_adj "
        "(Kaplan–Meier consistency over the horizon, with/without credit for unsupported steps), R (mean "
        "richness over trajectories with a narrative), failures by component and story endings. Plots: "
        "heatmaps of G, C_obs, R and Kaplan–Meier curves per model.", FRAME_DEPS, (*METRIC_CODE,
                                                                                     "wse_platform/wse/plots.py", "wse_platform/plotting.py")))
    def wse_cell_metrics(context: AssetExecutionContext, warehouse: WarehouseResource,
                         settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        frame, info = _frame(wh, T.TableParams.from_settings(s), context)
        df = T.cell_metrics(frame, info)
        plots = {f"heatmap_{m}": _save(s, f"wse_heatmap_{m}", heatmap_png(df, m)) for m in ("G", "C_obs", "R")}
        plots["km_curves"] = _save(s, "wse_km_curves", km_curves_png(frame, info["horizon"]))
        return write_table(wh, "wse_cell_metrics", df, plots=plots, settings=s, extra_metadata={
            "horizon": info["horizon"], "consistency_judge": str(info["consistency_judge_id"]),
            "richness_judge": str(info["richness_judge_id"]),
            "cells_without_C_obs": int(df["C_obs"].null_count())})

    @asset(**_kw("wse_architecture_contrasts",
        "Architecture contrasts B2−B1, B3−B1, B3−B2, WMEM on−off, WMOD on−off (ΔG, ΔC_obs, ΔC_adj, ΔR), "
        "averaged over the other factors with models weighted equally, with 95 % hierarchical bootstrap "
        "intervals (worlds, then EpisodeSeeds within worlds; models fixed; wse.bootstrap_draws draws, "
        "seeded). scope=group: per model group (paper Table 1); model: per model (Table 8); "
        "base_conditional: WMEM/WMOD effects within each B level (Table 9).", FRAME_DEPS, BOOTSTRAP_CODE))
    def wse_architecture_contrasts(context: AssetExecutionContext, warehouse: WarehouseResource,
                                   settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params, context)
        df = T.architecture_contrasts(frame, info, params)
        return write_table(wh, "wse_architecture_contrasts", df, extra_metadata={
            "bootstrap_draws": params.bootstrap_draws, "bootstrap_seed": params.bootstrap_seed})

    @asset(**_kw("wse_pareto",
        "One row per cell and consistency axis (C_adj or C_obs, against R): non-dominated, supported "
        "(on the upper concave envelope, i.e. best for some positive weighting) and, for unsupported "
        "non-dominated cells, the R gap below the chord of the neighbouring supported cells. Plots: "
        "Pareto scatter with the envelope.", [AssetKey("wse_cell_metrics")],
        (*METRIC_CODE, "wse_platform/wse/plots.py", "wse_platform/plotting.py")))
    def wse_pareto(context: AssetExecutionContext, warehouse: WarehouseResource,
                   settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        cells = wh.query("SELECT * FROM wse_cell_metrics")
        df = T.pareto_table(cells, T.TableParams.from_settings(s))
        plots = {f"pareto_{a}": _save(s, f"wse_pareto_{a}", pareto_png(cells, a)) for a in ("C_adj", "C_obs")}
        plots["fig7_c_obs_vs_c_adj"] = _save(s, "wse_fig7", F.fig7_png(cells))
        return write_table(wh, "wse_pareto", df, plots=plots, settings=s)

    @asset(**_kw("wse_scaling_fit",
        "OLS fits Y = α + β·log2(P) (P = params_b from the config) of G, C_obs and R (model means over "
        "architectures) within each model family with at least 3 models, plus one leave-one-out refit per "
        "model, and metric C_obs_pooled: Consistency from one Kaplan–Meier per model over all its "
        "trajectories (the paper's Table 4), next to the mean-of-cells C_obs. Empty (with a note) when no "
        "family has 3 models.", [AssetKey("wse_cell_metrics"), *FRAME_DEPS],
        (*METRIC_CODE, "wse_platform/stats/scaling.py")))
    def wse_scaling_fit(context: AssetExecutionContext, warehouse: WarehouseResource,
                        settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params, context)
        cells = wh.query("SELECT * FROM wse_cell_metrics")
        df, note = T.scaling_fit(cells, params, T.model_pooled_consistency(frame, info))
        s = settings.get()
        plots = {"fig13_survival": _save(s, "wse_fig13", F.fig13_png(frame, info["horizon"])),
                 "fig14_scaling": _save(s, "wse_fig14", F.fig14_png(cells, frame, info["horizon"], df,
                                                                    params.model_params))}
        return write_table(wh, "wse_scaling_fit", df, plots=plots, settings=s,
                           extra_metadata={"note": note or "fitted"})

    @asset(**_kw("wse_source_family",
        "Paper Table 7 by source family (DraCor, ITP, Smallville): C_obs and C_adj (cell averages, models "
        "weighted equally) with bootstrap intervals (worlds resampled within family, then seeds), the "
        "DraCor − ITP and DraCor − Smallville contrasts, leave-one-play-out rows, observed steps, "
        "day-advance %, full-horizon % and the median first-contradiction step; and as the paper computes "
        "Table 7 / Fig. 5: row_kind=model_family (one Kaplan–Meier per model pooled over its architectures, "
        "with CIs) and family_pooled (their equal-model mean), with the mean first-contradiction step and the "
        "relative day at the contradiction. Plot: per-model C_obs by family with intervals (Fig. 5).",
        [*FRAME_DEPS, AssetKey("wse_trajectory_steps")], (*BOOTSTRAP_CODE, "wse_platform/wse/plots.py", "wse_platform/plotting.py")))
    def wse_source_family(context: AssetExecutionContext, warehouse: WarehouseResource,
                          settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params, context)
        steps = wh.query("SELECT model, arch, seed_id, step, new_day FROM wse_trajectory_steps")
        df = T.source_family_table(frame, info, params, steps)
        s = settings.get()
        return write_table(wh, "wse_source_family", df,
                           plots={"family_models": _save(s, "wse_family_models", family_models_png(df)),
                                  "fig15_leave_one_play_out": _save(s, "wse_fig15", F.fig15_png(df))}, settings=s)

    @asset(**_kw("wse_horizon_sensitivity",
        "G_h, C_obs(h) and C_adj(h) recomputed from the same trajectories truncated at h = 5, 10, 15, 20 "
        "(up to the horizon, plus the horizon itself), overall and per model, with the share of first "
        "contradictions (by step H) that appeared by step 10; scope all, group (model group = panel) and "
        "model.", FRAME_DEPS, METRIC_CODE))
    def wse_horizon_sensitivity(context: AssetExecutionContext, warehouse: WarehouseResource,
                                settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params, context)
        df = T.horizon_sensitivity(frame, info, params)
        s = settings.get()
        groups = params.groups(frame["model"].unique().to_list())
        return write_table(wh, "wse_horizon_sensitivity", df, settings=s, plots={
            "fig9_horizon": _save(s, "wse_fig9", F.fig9_png(frame, info["horizon"], groups, df))})

    @asset(**_kw("wse_first_violations",
        "At each trajectory's first contradiction: table_kind=category — the violation category agreed by "
        "≥ 2 judges (paper Table 5) — and table_kind=commitment_source — where the contradicted fact was "
        "established: initial_world / opening / earlier_narrative / current_narrative / unresolved (Table "
        "6) and table_kind=category_x_source (the Table 6 cross-tab); n, %, median step, overall, per model "
        "group (the paper's panels) and per model.",
        [*FRAME_DEPS, AssetKey("wse_consistency_steps")], METRIC_CODE))
    def wse_first_violations(context: AssetExecutionContext, warehouse: WarehouseResource,
                             settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params, context)
        df = T.first_violations(frame, wh.query("SELECT * FROM wse_consistency_steps"), info, params)
        return write_table(wh, "wse_first_violations", df)

    @asset(**_kw("wse_generation_failures",
        "Paper Table 3: per component (centralized_ca in B2, distributed_ca in B3, world_model with WMOD, "
        "world_memory_agent with WMEM, story_agent always, and any), failures over the trajectories where "
        "the component is enabled, median failure step, and the narrative steps lost after World Memory "
        "Agent failures; overall, per model group (the paper's panels) and per model.",
        [AssetKey("wse_trajectories")], METRIC_CODE))
    def wse_generation_failures(context: AssetExecutionContext, warehouse: WarehouseResource,
                                settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        trajs = wh.query("SELECT * FROM wse_trajectories")
        df = T.generation_failures(trajs, T.TableParams.from_settings(s))
        h = int(trajs["horizon"].max()) if trajs.height else 0
        return write_table(wh, "wse_generation_failures", df, settings=s, plots={
            "fig12_generation_outcomes": _save(s, "wse_fig12", F.fig12_png(trajs, h))})

    return [wse_cell_metrics, wse_architecture_contrasts, wse_pareto, wse_scaling_fit, wse_source_family,
            wse_horizon_sensitivity, wse_first_violations, wse_generation_failures, *build_more()]


VOTE_DEPS = [AssetKey("wse_consistency_verdicts")]


def _labels(settings: Settings):
    """Human label CSVs: `wse.human_labels` if set, else the shipped example (so the demo runs)."""
    folder = settings.resolve_path(settings.wse.human_labels) if settings.wse.human_labels else EXAMPLE_LABELS
    return folder, T.read_labels(folder)


def build_more() -> list:
    """The failure-kind, agreement, precursor, robustness and validation tables."""

    @asset(**_kw("wse_failure_kinds",
        "Failures per role and error kind (invalid_json, schema_violation, truncated = cut by the token "
        "budget, backend_error ...). source=outputs: outputs recorded as failures after all retries "
        "(generation steps and judge votes), overall / per model group / per model; source=attempts: invalid "
        "attempts in llm_calls with n_length_cut (finish reason length); source=warnings: outputs kept although "
        "they pass a limit the paper does not state (> 16 memory operations, a plan beat depending on a later "
        "beat, > 80 richness units).",
        [AssetKey("wse_trajectory_steps"), *VOTE_DEPS, AssetKey("wse_richness_verdicts")], METRIC_CODE))
    def wse_failure_kinds(context: AssetExecutionContext, warehouse: WarehouseResource,
                          settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        df = T.failure_kinds(
            wh.query("SELECT model, arch, seed_id, step, failure_component, failure_json, plan_json, "
                     "memory_delta_json FROM wse_trajectory_steps WHERE failure_json IS NOT NULL "
                     "OR plan_json IS NOT NULL OR memory_delta_json IS NOT NULL"),
            wh.query("SELECT model, failure_json FROM wse_consistency_verdicts WHERE failure_json IS NOT NULL"),
            wh.query("SELECT model, failure_json, units_json FROM wse_richness_verdicts"),
            wh.query("SELECT * FROM llm_calls WHERE role LIKE 'wse.%' AND NOT coalesce(valid, FALSE)"),
            T.TableParams.from_settings(settings.get()))
        cut = df.filter((pl.col("error_kind") == "truncated") & (pl.col("scope") == "all")
                        & (pl.col("source") == "outputs"))
        return write_table(wh, "wse_failure_kinds", df, extra_metadata={
            "truncated_outputs": int(cut["n"].sum()) if cut.height else 0})

    @asset(**_kw("wse_judge_agreement",
        "Inter-judge agreement of each consistency panel on steps where every member voted validly: "
        "kind=panel (Fleiss' κ, % unanimous steps, vote shares) and kind=pairwise (% agreement, Cohen's κ); "
        "overall and per model group.", VOTE_DEPS, METRIC_CODE))
    def wse_judge_agreement(context: AssetExecutionContext, warehouse: WarehouseResource,
                            settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        df = T.judge_agreement(wh.query("SELECT * FROM wse_consistency_verdicts"),
                               T.TableParams.from_settings(settings.get()))
        return write_table(wh, "wse_judge_agreement", df)

    @asset(**_kw("wse_richness_agreement",
        "Inter-judge agreement of each richness panel on trajectories where every member rated validly, per "
        "quantity (the three 1-5 breadth ratings, units per step, R): kind=pairwise (ratings: % exact, % within "
        "one point, quadratic-weighted κ; all: MAE, Pearson r) and kind=panel (ratings: Fleiss' κ, % unanimous, "
        "% within one point, mean pairwise κ_w; all: ICC(2,1)); overall and per model group.",
        [AssetKey("wse_richness_verdicts")], METRIC_CODE))
    def wse_richness_agreement(context: AssetExecutionContext, warehouse: WarehouseResource,
                               settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        df = T.richness_agreement(wh.query("SELECT * FROM wse_richness_verdicts"), params,
                                  [params.richness_judge_id])
        return write_table(wh, "wse_richness_agreement", df)

    @asset(**_kw("wse_precursor_audit",
        "Paper Table 3, lower half: for each trajectory's first agreed contradiction, the conflicting claims "
        "are matched lexically against the player intent, Character Agent intents, World Model beats and "
        "memory views of that step and earlier; row_kind=trajectory (origin, first step, persisted) and "
        "summary (origin shares; overall, per model group, per model). Possible precursors, not causes. "
        "Plot: origin shares.", [*FRAME_DEPS, *VOTE_DEPS, AssetKey("wse_trajectory_steps")],
        (*METRIC_CODE, "wse_platform/wse/plots.py", "wse_platform/plotting.py")))
    def wse_precursor_audit(context: AssetExecutionContext, warehouse: WarehouseResource,
                            settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        params = T.TableParams.from_settings(s)
        frame, info = _frame(wh, params, context)
        df = T.precursor_audit(
            frame, wh.query("SELECT * FROM wse_consistency_verdicts WHERE verdict = 'inconsistent'"),
            wh.query("SELECT model, arch, seed_id, step, player_option, intents_json, plan_json, memory_state_json "
                     "FROM wse_trajectory_steps"), info, params)
        plots = {"precursor_origins": _save(s, "wse_precursor_origins", precursor_png(df))} if df.height else {}
        return write_table(wh, "wse_precursor_audit", df, plots=plots, settings=s)

    @asset(**_kw("wse_full_horizon_contrasts",
        "Appendix C.3 / Fig. 10: architecture contrasts over seed-paired trajectories that both reach the "
        "horizon with valid scores (ΔC = difference of the % of steps before the first contradiction, ΔR); "
        "averaged within each model, then over the models of each group. Plot: Fig. 10 bars.", FRAME_DEPS,
        (*METRIC_CODE, "wse_platform/wse/plots.py", "wse_platform/plotting.py")))
    def wse_full_horizon_contrasts(context: AssetExecutionContext, warehouse: WarehouseResource,
                                   settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        params = T.TableParams.from_settings(settings.get())
        frame, info = _frame(wh, params, context)
        df = T.full_horizon_contrasts(frame, info, params)
        plots = ({"full_horizon": _save(settings.get(), "wse_full_horizon", full_horizon_png(df))}
                 if df.height else {})
        return write_table(wh, "wse_full_horizon_contrasts", df, plots=plots, settings=settings.get())

    @asset(**_kw("wse_cost_contrasts",
        "Fig. 11: generation cost next to coverage from llm_calls (judge calls excluded): row_kind=cell "
        "(tokens and cost per trajectory and per observed step, G) and row_kind=contrast (the architecture "
        "contrasts of tokens, cost and G, also as within-model % changes; per model and per model group). "
        "Plots: tokens against G; Fig. 11's bars of % changes.",
        [AssetKey("wse_cell_metrics")], (*METRIC_CODE, "wse_platform/wse/plots.py", "wse_platform/plotting.py")))
    def wse_cost_contrasts(context: AssetExecutionContext, warehouse: WarehouseResource,
                           settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        df = T.cost_contrasts(wh.query(f"SELECT {', '.join(T.COST_COLUMNS)} FROM llm_calls WHERE role LIKE 'wse.%'"),
                              wh.query("SELECT * FROM wse_cell_metrics"), T.TableParams.from_settings(s))
        plots = {"cost_coverage": _save(s, "wse_cost_coverage", cost_coverage_png(df)),
                 "fig11_pct_changes": _save(s, "wse_fig11", F.fig11_png(df))} if df.height else {}
        return write_table(wh, "wse_cost_contrasts", df, plots=plots, settings=s)

    @asset(**_kw("wse_human_validation",
        "Appendix B.5: agreement of the judge panels with human labels (CSV files in wse.human_labels; the "
        "shipped example when unset): consistency accuracy (design-weighted) and balanced accuracy against "
        "the panel's valid majority; richness MAE and Pearson r of R against the panel median, and per "
        "breadth rating the quadratic-weighted κ and % within one point.",
        [*FRAME_DEPS, AssetKey("wse_consistency_steps")], METRIC_CODE))
    def wse_human_validation(context: AssetExecutionContext, warehouse: WarehouseResource,
                             settings: SettingsResource) -> MaterializeResult:
        wh, s = warehouse.get(), settings.get()
        params = T.TableParams.from_settings(s)
        frame, info = _frame(wh, params, context)
        folder, (cons, rich) = _labels(s)
        note = ("shipped example labels (written for the demo, not real annotations)" if folder == EXAMPLE_LABELS
                else str(folder))
        df = T.human_validation(cons, rich, wh.query("SELECT * FROM wse_consistency_steps"), frame,
                                wh.query("SELECT * FROM wse_richness_verdicts"), info, labels=note)
        return write_table(wh, "wse_human_validation", df, extra_metadata={"labels": str(folder)})

    return [wse_failure_kinds, wse_judge_agreement, wse_richness_agreement, wse_precursor_audit,
            wse_full_horizon_contrasts, wse_cost_contrasts, wse_human_validation]
