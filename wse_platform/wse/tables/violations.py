"""First violations: category and commitment source (paper Tables 5 and 6)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from wse_platform.wse.tables.frame import (
    COMMITMENT_SOURCES,
    NO_CATEGORY,
    TRAJ,
    TableInputError,
    TableParams,
    _record,
    require_columns,
)
from wse_platform.wse.tables.schema import _finish, _rows


# ---- 7. first violations ---------------------------------------------------------------------------------
def first_violations(frame: pl.DataFrame, consistency_steps: pl.DataFrame, info: Mapping[str, Any],
                     params: TableParams | None = None) -> pl.DataFrame:
    """`wse_first_violations`: table_kind=category (Table 5), commitment_source (Table 6 marginals) and
    category_x_source (Table 6 cross-tab: agreed category × commitment source); scope all, group
    (per model group = the paper's panels; pct within the panel) and model.

    One observation per trajectory with an observed first contradiction, at that step.
    category = the step's category agreed by ≥ 2 judges (`category_majority`, else
    `no_majority_category`); commitment source = where ≥ 2 inconsistent votes say the
    contradicted fact was established (`prior_source_majority`: initial_world / opening /
    earlier_narrative / current_narrative), else `unresolved`. Rows for scope all and per model.
    """
    require_columns(consistency_steps, "wse_consistency_steps")
    cj = info["consistency_judge_id"]
    firsts = frame.filter("contradiction_observed").select(TRAJ + [pl.col("first_contradiction").alias("step")])
    steps = (consistency_steps.filter(pl.col("judge_config_id") == cj)
             .select(TRAJ + ["step", "category_majority", "prior_source_majority"])
             .with_columns(_found=pl.lit(True)))
    f = firsts.join(steps, on=TRAJ + ["step"], how="left")
    if f.filter(pl.col("_found").is_null()).height:
        row = f.filter(pl.col("_found").is_null()).row(0, named=True)
        raise TableInputError(f"wse_consistency_steps (judge {cj!r}): no row for {_record(row)} "
                              "(the trajectory's first contradiction)")
    bad = f.filter(pl.col("prior_source_majority").is_not_null()
                   & ~pl.col("prior_source_majority").is_in(COMMITMENT_SOURCES[:-1]))
    if bad.height:
        raise TableInputError(f"wse_consistency_steps: {_record(bad.row(0, named=True))}: prior_source_majority "
                              f"{bad['prior_source_majority'][0]!r} not in {list(COMMITMENT_SOURCES[:-1])}")
    f = f.with_columns(category=pl.col("category_majority").fill_null(NO_CATEGORY),
                       commitment_source=pl.col("prior_source_majority").fill_null("unresolved"))
    if not f.height:
        return _rows("wse_first_violations", [])
    scopes: list[tuple[str, str | None, pl.DataFrame, list[str]]] = [("all", None, f, []),
                                                                     ("model", None, f, ["model"])]
    if params is not None and params.model_groups:
        for group, models in params.groups(f["model"].unique().to_list()).items():
            scopes.append(("group", group, f.filter(pl.col("model").is_in(models)), []))
    parts = []
    for kind, by in (("category", ["category"]), ("commitment_source", ["commitment_source"]),
                     ("category_x_source", ["category", "commitment_source"])):
        for scope, group, sub, keys in scopes:
            if not sub.height:
                continue
            agg = sub.group_by(keys + by).agg(n=pl.len(), median_step=pl.col("step").median())
            if keys:
                agg = agg.join(sub.group_by(keys).agg(total=pl.len()), on=keys, how="left")
            else:
                agg = agg.with_columns(total=pl.lit(sub.height), model=pl.lit(None, pl.String))
            parts.append(agg.select(
                table_kind=pl.lit(kind), scope=pl.lit(scope), model_group=pl.lit(group, pl.String), model="model",
                label=pl.col(by[0]), source=pl.col("commitment_source") if len(by) == 2 else pl.lit(None, pl.String),
                n=pl.col("n").cast(pl.Int64), pct=100.0 * pl.col("n") / pl.col("total"),
                median_step=pl.col("median_step").cast(pl.Float64)))
    out = pl.concat(parts).with_columns(judge_config_id=pl.lit(cj))
    out = out.sort("table_kind", "scope", "model_group", "model", "n", "label", "source",
                   descending=[False, False, False, False, True, False, False], nulls_last=False)
    return _finish("wse_first_violations", out)


