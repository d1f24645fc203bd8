"""Failures: generation failures by component (paper Table 3, upper half) and failures by role and
error kind (`wse_failure_kinds`: invalid JSON, schema violations, truncation by the token budget ...)."""
from __future__ import annotations

import json

import polars as pl

from wse_platform.wse.architecture import FAILURE_COMPONENTS, WORLD_MEMORY_AGENT, parse_architecture
from wse_platform.wse.tables.frame import (
    TableParams,
    horizon_of,
    require_columns,
)
from wse_platform.wse.tables.schema import _finish, _rows


def generation_failures(trajectories: pl.DataFrame, params: TableParams | None = None) -> pl.DataFrame:
    """`wse_generation_failures` (Table 3): failure rate of each component over the trajectories
    where it is enabled, plus the narrative steps lost after World Memory Agent failures; scope
    all, group (a model group = the paper's panel) and model. Needs only `wse_trajectories`."""
    require_columns(trajectories, "wse_trajectories")
    H = horizon_of(trajectories)
    frame = trajectories
    enabled = {a: set(parse_architecture(a).enabled_components()) for a in frame["arch"].unique().to_list()}
    rows = []
    models = sorted(frame["model"].unique().to_list())
    panels = params.groups(models) if params is not None and params.model_groups else {}
    scopes = [("all", [(None, None, frame)]),
              ("group", [(None, grp, frame.filter(pl.col("model").is_in(ms))) for grp, ms in panels.items()]),
              ("model", [(m, None, frame.filter(pl.col("model") == m)) for m in models])]
    for scope, groups in scopes:
        for model, group, g in groups:
            for comp in FAILURE_COMPONENTS + ("any",):
                sub = g if comp == "any" else g.filter(pl.col("arch").is_in([a for a, e in enabled.items()
                                                                              if comp in e]))
                if sub.is_empty():
                    continue
                failed = sub.filter(pl.col("failure_component").is_not_null() if comp == "any"
                                    else pl.col("failure_component") == comp)
                lost = int(failed["lost_steps_wmem"].fill_null(0).sum()) if comp == WORLD_MEMORY_AGENT else None
                rows.append({"scope": scope, "model_group": group, "model": model, "component": comp,
                             "n_enabled": sub.height,
                             "n_failures": failed.height, "failure_rate_pct": 100.0 * failed.height / sub.height,
                             "median_failure_step": float(failed["failure_step"].median()) if failed.height else None,
                             "lost_steps_wmem": lost,
                             "lost_steps_pct": None if lost is None else 100.0 * lost / (sub.height * H),
                             "horizon": H})
    return _rows("wse_generation_failures", rows)




COMPONENT_ROLE = {
    "centralized_ca": "wse.character_agent_centralized", "distributed_ca": "wse.character_agent_distributed",
    "world_model": "wse.world_model", "story_agent": "wse.story_agent", "world_memory_agent": "wse.world_memory_agent",
}


def _kind(failure_json: str | None) -> str:
    try:
        return json.loads(failure_json).get("error_kind") or "unknown"
    except (TypeError, ValueError, AttributeError):
        return "unknown"


# Limits the paper does not state are warnings, never failures (issue 22): counted per role.
WARN_MEMORY_OPS = "warning:memory_ops_over_16"          # a MemoryDelta with more than 16 operations
WARN_FORWARD_DEP = "warning:plan_forward_dependency"    # a PlotPlan beat depending on a later beat
WARN_UNITS = "warning:units_over_80"                    # a richness verdict listing more than 80 units


def _json_list(value, key: str | None = None) -> list:
    try:
        data = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return []
    if key is not None:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, list) else []


def _forward(plan_json) -> bool:
    beats = _json_list(plan_json, "beats")
    pos = {b.get("beat_id"): i for i, b in enumerate(beats) if isinstance(b, dict)}
    return any(pos.get(d, -1) > i for i, b in enumerate(beats) if isinstance(b, dict)
               for d in b.get("depends_on") or [])


def _warnings(trajectory_steps: pl.DataFrame, richness_verdicts: pl.DataFrame) -> pl.DataFrame | None:
    """source=warnings rows (scope all / model): outputs kept although they pass a limit the paper
    does not state (the old caps)."""
    rows: list[dict] = []
    st = trajectory_steps
    for col, role, kind, hit in (
            ("memory_delta_json", "wse.world_memory_agent", WARN_MEMORY_OPS,
             lambda v: len(_json_list(v, "operations")) > 16),
            ("plan_json", "wse.world_model", WARN_FORWARD_DEP, _forward)):
        if col in st.columns:
            rows += [{"model": m, "role": role, "error_kind": kind}
                     for m, v in zip(st["model"].to_list(), st[col].to_list()) if v is not None and hit(v)]
    rv = richness_verdicts
    if "units_json" in rv.columns:
        rows += [{"model": m, "role": "wse.richness_judge", "error_kind": WARN_UNITS}
                 for m, v in zip(rv["model"].to_list(), rv["units_json"].to_list()) if len(_json_list(v)) > 80]
    if not rows:
        return None
    df = pl.DataFrame(rows)
    parts = [df.group_by("role", "error_kind").agg(n=pl.len()).with_columns(
                 scope=pl.lit("all"), model=pl.lit(None, pl.String)),
             df.group_by("model", "role", "error_kind").agg(n=pl.len()).with_columns(scope=pl.lit("model"))]
    return pl.concat([p.select("scope", "model", "role", "error_kind", "n") for p in parts]).with_columns(
        source=pl.lit("warnings"), model_group=pl.lit(None, pl.String), n_length_cut=pl.lit(None, pl.Int64))


def failure_kinds(trajectory_steps: pl.DataFrame, consistency_verdicts: pl.DataFrame,
                  richness_verdicts: pl.DataFrame, llm_calls: pl.DataFrame | None = None,
                  params: TableParams | None = None) -> pl.DataFrame:
    """`wse_failure_kinds`: failures per role and error kind, so a cut-off answer (error kind
    `truncated` from the LLM client, or any invalid attempt whose finish reason was `length`) is
    visible at once.

    source=outputs: outputs recorded as failures after all retries (generation steps'
    `failure_json`, judge votes with `failure_json`), by the evaluated model of the cell
    (scope all / group / model). source=attempts: invalid attempts in `llm_calls` (role wse.*), by
    the model that made the call (scope all / model); n_length_cut counts those that stopped at
    the token budget (finish_reason = length). source=warnings: outputs kept although they pass a
    limit the paper does not state (more than 16 memory operations, a plan beat depending on a later
    beat, more than 80 richness units) — counted, never failures.
    """
    out: list[pl.DataFrame] = []
    gen = (trajectory_steps.filter(pl.col("failure_json").is_not_null())
           .select("model", role=pl.col("failure_component").replace_strict(COMPONENT_ROLE, default="wse.unknown"),
                   failure_json=pl.col("failure_json").cast(pl.String)))
    judged = [df.filter(pl.col("failure_json").is_not_null()).select(
              "model", role=pl.lit(role), failure_json=pl.col("failure_json").cast(pl.String))
              for df, role in ((consistency_verdicts, "wse.consistency_judge"),
                               (richness_verdicts, "wse.richness_judge")) if df.height]
    fails = pl.concat([gen, *judged]) if gen.height or judged else None
    if fails is not None and fails.height:
        fails = fails.with_columns(error_kind=pl.col("failure_json").map_elements(_kind, return_dtype=pl.String))
        panels = params.groups(fails["model"].unique().to_list()) if params and params.model_groups else {}
        parts = [fails.with_columns(scope=pl.lit("all"), model_group=pl.lit(None, pl.String),
                                    model=pl.lit(None, pl.String)),
                 fails.with_columns(scope=pl.lit("model"), model_group=pl.lit(None, pl.String))]
        parts += [fails.filter(pl.col("model").is_in(ms)).with_columns(
            scope=pl.lit("group"), model_group=pl.lit(g), model=pl.lit(None, pl.String)) for g, ms in panels.items()]
        agg = (pl.concat(parts).group_by("scope", "model_group", "model", "role", "error_kind")
               .agg(n=pl.len()).with_columns(source=pl.lit("outputs"), n_length_cut=pl.lit(None, pl.Int64)))
        out.append(agg)
    warn = _warnings(trajectory_steps, richness_verdicts)
    if warn is not None:
        out.append(warn)
    if llm_calls is not None and llm_calls.height:
        calls = llm_calls.filter(pl.col("role").str.starts_with("wse.") & ~pl.col("valid").fill_null(False))
        if "finish_reason" not in calls.columns:
            calls = calls.with_columns(finish_reason=pl.lit(None, pl.String))
        calls = calls.with_columns(error_kind=pl.col("error_kind").fill_null("unknown"),
                                   _cut=(pl.col("finish_reason") == "length").fill_null(False))
        for scope, keys in (("all", []), ("model", ["model"])):
            agg = calls.group_by(keys + ["role", "error_kind"]).agg(n=pl.len(), n_length_cut=pl.col("_cut").sum())
            if not keys:
                agg = agg.with_columns(model=pl.lit(None, pl.String))
            out.append(agg.with_columns(source=pl.lit("attempts"), scope=pl.lit(scope),
                                        model_group=pl.lit(None, pl.String)))
    if not out:
        return _rows("wse_failure_kinds", [])
    df = pl.concat([o.select("source", "scope", "model_group", "model", "role", "error_kind",
                             pl.col("n").cast(pl.Int64), pl.col("n_length_cut").cast(pl.Int64)) for o in out])
    return _finish("wse_failure_kinds", df, ["source", "scope", "model_group", "model", "role", "error_kind"])
