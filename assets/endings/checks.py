"""100-Endings asset checks: natural keys, bounds, usable rows and Y/N verdict coverage
(composed in `assets/checks.py`).
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from collections.abc import Mapping
from typing import Any

from dagster import AssetCheckResult

from assets.check_kit import Bound, CheckDef, result, scope, unit, where_sql
from wse_platform.endings.judge import judge_config_id
from wse_platform.warehouse import Warehouse

NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "endings_stories": ("set_key", "story_id"),
    "endings_positions": ("set_key", "story_id", "position"),
    "endings_predictions": ("set_key", "story_id", "position", "sample_index", "repeat"),
    "endings_verdicts": ("set_key", "judge_config_id", "story_id", "position", "sample_index", "repeat"),
}
PARTITIONING: dict[str, str] = {t: "endings" for t in NATURAL_KEYS}
TENSION_RATES = ("mean_no_rate", "late_no_rate", "ir30", "ir60", "ir120")
BOUNDS: dict[str, list[Bound]] = {
    "endings_positions": unit("revealed_share"),
    "endings_no_rate": unit("no_rate", "revealed_share"),
    "endings_story_tension": unit(*TENSION_RATES),
    "endings_corpus_tension": unit(*TENSION_RATES),
    "endings_pipeline_effect": unit(*TENSION_RATES),
    "endings_length_buckets": unit("mean_no_rate", "median_no_rate"),
}
USABLE: dict[str, str] = {
    "endings_stories": "included AND text IS NOT NULL AND failure_json IS NULL",
    "endings_predictions": "failure_json IS NULL AND prediction IS NOT NULL",
    "endings_verdicts": "verdict IS NOT NULL",
}


def evaluate_endings_verdict_coverage(wh: Warehouse, judge_id: str, where: Mapping[str, Any]) -> AssetCheckResult:
    """Every prediction without failure has a verdict row of the current judge configuration."""
    clause, params = where_sql(where, "p.failure_json IS NULL AND p.prediction IS NOT NULL", alias="p")
    missing = wh.query(
        "SELECT p.set_key, p.story_id, p.position, p.sample_index FROM endings_predictions p "
        "WHERE " + clause + " AND NOT EXISTS (SELECT 1 FROM endings_verdicts v WHERE v.set_key = p.set_key "
        "AND v.story_id = p.story_id AND v.position = p.position AND v.sample_index = p.sample_index "
        "AND coalesce(v.\"repeat\", 0) = coalesce(p.\"repeat\", 0) "
        "AND v.judge_config_id = ?) ORDER BY p.set_key, p.story_id, p.position, p.sample_index",
        [*params, judge_id])
    n = int(wh.query(f"SELECT count(*) AS n FROM endings_predictions p WHERE {clause}", params)["n"][0])
    return result(missing, missing.height, "valid predictions have no verdict of the current judge "
                  "configuration", n, {"judge_config_id": judge_id, **scope(where)},
                  examined="valid predictions")


CHECKS: tuple[CheckDef, ...] = (
    CheckDef("endings_verdicts", "every_prediction_judged",
             "Every predicted ending without a failure has a verdict of the current judge configuration.",
             lambda wh, s, where: evaluate_endings_verdict_coverage(wh, judge_config_id(s), where),
             "endings", ("endings_predictions",)),
)
