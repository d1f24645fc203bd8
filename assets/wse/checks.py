"""WSE-bench asset checks: natural keys, bounds, usable rows and verdict coverage of the WSE tables
(composed with the other benchmarks' in `assets/checks.py`).
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from collections.abc import Mapping
from typing import Any

import polars as pl
from dagster import AssetCheckResult

from assets.check_kit import Bound, CheckDef, pct, result, scope, unit, where_sql
from wse_platform.config import JudgeConfig
from wse_platform.warehouse import Warehouse
from wse_platform.wse.judges import CONSISTENCY_ROLE, RICHNESS_ROLE, aggregate_step
from wse_platform.wse.schemas import ConsistencyVerdict

NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "wse_trajectory_steps": ("model", "arch", "seed_id", "step"),
    "wse_trajectories": ("model", "arch", "seed_id"),
    "wse_consistency_verdicts": ("model", "arch", "judge_config_id", "seed_id", "step", "judge_index"),
    "wse_consistency_steps": ("model", "arch", "judge_config_id", "seed_id", "step"),
    "wse_trajectory_consistency": ("model", "arch", "judge_config_id", "seed_id"),
    "wse_richness_verdicts": ("model", "arch", "judge_config_id", "seed_id", "judge_index"),
}
PARTITIONING: dict[str, str] = {t: "wse" for t in NATURAL_KEYS}
BOUNDS: dict[str, list[Bound]] = {
    "wse_cell_metrics": pct("G", "C_obs", "C_adj", "R"),
    "wse_horizon_sensitivity": pct("G_h", "C_obs_h", "C_adj_h") + unit("share_by_step10"),
    "wse_source_family": pct("C_obs", "C_adj", "day_advance_pct", "full_horizon_pct",
                             rows="row_kind <> 'contrast'"),
    "wse_first_violations": pct("pct"),
    "wse_generation_failures": pct("failure_rate_pct", "lost_steps_pct"),
}
USABLE: dict[str, str] = {
    "wse_trajectory_steps": "narrative IS NOT NULL",
    "wse_trajectories": "length >= 1",
    "wse_consistency_verdicts": "verdict IS NOT NULL",
    "wse_richness_verdicts": "failure_json IS NULL",
}


def missing_consistency_votes(steps: pl.DataFrame, votes: pl.DataFrame, judge_count: int) -> pl.DataFrame:
    """Steps that should carry `judge_count` consistency votes but do not.

    Mirrors the judging loop of `wse_platform.wse.judges.judge_consistency`: the narrated
    steps of a trajectory are judged in order, each by judges 0..count-1, and judging stops
    after the first step whose majority is not "consistent" (a contradiction, or no valid
    majority = censoring). So the steps needing votes are 1..k, k = that step (or L).
    Votes of another generation of the trajectory do not count.
    `steps`: model, arch, seed_id, step, generation_version of the narrated steps;
    `votes`: model, arch, seed_id, step, judge_index, verdict, category, prior_source,
    prior_step, generation_version of the current judge configuration.
    """
    by_step: dict[tuple, dict[int, dict]] = {}
    for v in votes.iter_rows(named=True):
        by_step.setdefault((v["model"], v["arch"], v["seed_id"], v["step"], v["generation_version"]),
                           {})[v["judge_index"]] = v
    # a ballot is read, never changed, by `aggregate_step`: one per distinct vote, not one per vote
    ballots: dict[tuple, ConsistencyVerdict] = {}

    def ballot(v: dict) -> ConsistencyVerdict | None:
        if v["verdict"] is None:
            return None
        key = (v["verdict"], v["category"], v["prior_source"], v["prior_step"])
        if key not in ballots:
            ballots[key] = ConsistencyVerdict.model_construct(verdict=key[0], category=key[1], prior_source=key[2],
                                                              prior_step=key[3])
        return ballots[key]

    # the trajectories in the order of their first row in step order (as a group_by keeping the order)
    trajectories: dict[tuple, list[dict]] = {}
    for row in steps.sort("step").iter_rows(named=True):
        trajectories.setdefault((row["model"], row["arch"], row["seed_id"]), []).append(row)
    missing = []
    for (model, arch, seed_id), traj in trajectories.items():
        for row in traj:
            found = by_step.get((model, arch, seed_id, row["step"], row["generation_version"]), {})
            have = sorted(i for i in found if 0 <= i < judge_count)
            if len(have) < judge_count:
                missing.append({"model": model, "arch": arch, "seed_id": seed_id, "step": row["step"],
                                "judge_indices_found": ",".join(map(str, have)), "expected": judge_count})
                break
            if aggregate_step([ballot(found[i]) for i in have], judge_count, row["step"])["majority"] != "consistent":
                break  # judging of this trajectory stops here
    return pl.DataFrame(missing, schema={"model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "step": pl.Int64,
                                         "judge_indices_found": pl.Utf8, "expected": pl.Int64})


def evaluate_wse_consistency_coverage(wh: Warehouse, judge: JudgeConfig, where: Mapping[str, Any]) -> AssetCheckResult:
    judge_id = judge.judge_id(CONSISTENCY_ROLE)
    clause, params = where_sql(where, "narrative IS NOT NULL")
    steps = wh.query("SELECT model, arch, seed_id, step, generation_version FROM wse_trajectory_steps "
                     f"WHERE {clause}", params)
    vclause, vparams = where_sql({**where, "judge_config_id": judge_id})
    votes = wh.query("SELECT model, arch, seed_id, step, judge_index, verdict, category, prior_source, prior_step, "
                     f"generation_version FROM wse_consistency_verdicts WHERE {vclause}", vparams)
    missing = missing_consistency_votes(steps, votes, judge.count)
    n_traj = steps.select("model", "arch", "seed_id").n_unique() if steps.height else 0
    return result(missing, missing.height, "narrated steps lack consistency votes of the current judge "
                  "configuration (up to the trajectory's first non-consistent step)", n_traj,
                  {"judge_config_id": judge_id, **scope(where)}, examined="trajectories with a narrated step")


def evaluate_wse_richness_coverage(wh: Warehouse, judge: JudgeConfig, where: Mapping[str, Any]) -> AssetCheckResult:
    """Every trajectory with a narrative (L >= 1) has richness verdicts 0..count-1 of the current judge."""
    judge_id = judge.judge_id(RICHNESS_ROLE)
    clause, params = where_sql(where, "t.length >= 1", alias="t")
    missing = wh.query(
        "SELECT t.model, t.arch, t.seed_id, t.length, count(DISTINCT r.judge_index) AS n_verdicts, "
        f"{judge.count} AS expected FROM wse_trajectories t LEFT JOIN wse_richness_verdicts r "
        "ON r.model = t.model AND r.arch = t.arch AND r.seed_id = t.seed_id AND r.judge_config_id = ? "
        "AND r.generation_version IS NOT DISTINCT FROM t.generation_version "
        f"AND r.judge_index BETWEEN 0 AND {judge.count - 1} "
        f"WHERE {clause} GROUP BY ALL HAVING count(DISTINCT r.judge_index) < {judge.count} "
        "ORDER BY t.model, t.arch, t.seed_id", [judge_id, *params])
    n = int(wh.query(f"SELECT count(*) AS n FROM wse_trajectories t WHERE {clause}", params)["n"][0])
    return result(missing, missing.height, "trajectories with a narrative lack richness verdicts of the current "
                  "judge configuration", n, {"judge_config_id": judge_id, **scope(where)},
                  examined="trajectories with a narrative")


CHECKS: tuple[CheckDef, ...] = (
    CheckDef("wse_consistency_verdicts", "every_step_judged",
             "Every narrated step up to the trajectory's first majority-inconsistent or no-majority step has one "
             "vote per consistency judge of the current judge configuration (judging stops after that step).",
             lambda wh, s, where: evaluate_wse_consistency_coverage(wh, s.wse.consistency_judge, where),
             "wse", ("wse_trajectory_steps",)),
    CheckDef("wse_richness_verdicts", "every_trajectory_rated",
             "Every trajectory with at least one narrated step has one richness verdict per judge of the current "
             "judge configuration.",
             lambda wh, s, where: evaluate_wse_richness_coverage(wh, s.wse.richness_judge, where),
             "wse", ("wse_trajectories",)),
)
