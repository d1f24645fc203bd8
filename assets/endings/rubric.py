"""`endings_rubric_scores`: the rubric judge's scores per story (opt-in: `endings.rubric`).

Thin: the rubric, the request and the scoring live in `wse_platform.endings.rubric`.
Depends on `endings_rubric_config` (not the set config): a rubric change re-scores the stories
without marking story sets or their Y/N verdicts stale.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import polars as pl
from dagster import asset

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.endings.pipelines import ideas_path
from wse_platform.endings.ideas import load_ideas
from wse_platform.endings.rubric import load_rubric, score_rows

GROUP = "endings"
SCHEMA = {
    "story_id": pl.Utf8, "set_key": pl.Utf8, "rubric_config_id": pl.Utf8, "rubric_model": pl.Utf8,
    "n_words": pl.Int64, "in_length_band": pl.Boolean, "scores_json": pl.Utf8, "overall": pl.Float64,
    "tension8": pl.Float64, "llm_call_id": pl.Utf8, "failure_json": pl.Utf8,
}


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None or settings.endings.rubric is None:
        return []

    @asset(
        name="endings_rubric_scores", partitions_def=parts.endings, deps=["endings_stories", "endings_rubric_config"],
        group_name=GROUP, kinds={"duckdb", "llm"},
        code_version=code_version("wse_platform/endings/rubric.py", "wse_platform/endings/rubric.yaml",
                                  "wse_platform/prompts/endings/rubric.v1.md"),
        description="One row per included story: the rubric judge's per-criterion scores (EQ-Bench-style "
                    "criteria in `wse_platform/endings/rubric.yaml` or `endings.rubric.rubric_file`), the "
                    "0–100 overall score (faults inverted) and the tension-related sub-score. Stories "
                    "outside `endings.rubric.min_words..max_words` are listed, not scored.",
    )
    def endings_rubric_scores(context, warehouse: WarehouseResource, llm: LLMResource, settings: SettingsResource):
        s, key, wh = settings.get(), context.partition_key, warehouse.get()
        cfg = s.endings.rubric
        rubric = load_rubric(s.resolve_path(cfg.rubric_file) if cfg.rubric_file else None)
        stories = wh.query("SELECT story_id, set_key, n_words, text, idea_id FROM endings_stories "
                           "WHERE set_key = ? AND included ORDER BY story_id", [key]).to_dicts()
        ideas = {}
        if key.startswith("gen:"):
            ideas = {i.id: i.text for i in load_ideas(ideas_path(s))[0]}
        with llm.session(context) as client:
            rows = score_rows(client, stories, ideas, rubric, cfg, s.prompts_dir)
        df = pl.DataFrame(rows, schema=SCHEMA)
        return write_table(wh, "endings_rubric_scores", df, key={"set_key": key}, extra_metadata={
            "n_scored": int(df["overall"].is_not_null().sum()) if df.height else 0,
            "n_failed": int(df["failure_json"].is_not_null().sum()) if df.height else 0,
        })

    return [endings_rubric_scores]
