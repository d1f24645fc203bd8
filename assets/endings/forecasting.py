"""100-Endings forecasting lineage per story set: positions → K predicted endings → Y/N verdicts.

Thin: positions, forecasting and judging live in `wse_platform.endings.{forecast,judge}`.
Verdicts are written per (set_key, judge_config_id) so verdicts of older judge
configurations stay next to the new ones.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import polars as pl
from dagster import MetadataValue, asset

from assets.helpers import transcripts, write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.endings.early import ANSWERS, position_judge
from wse_platform.endings.forecast import SplitStory, compute_positions, run_forecasts
from wse_platform.endings.judge import judge_config_id, run_judging
from wse_platform.endings.tokens import token_counter, tokenizer_name

GROUP = "endings"
POSITIONS_CODE = ("wse_platform/endings/forecast.py", "wse_platform/endings/tokens.py",
                  "wse_platform/metrics/endings.py")
FORECAST_CODE = (*POSITIONS_CODE, "wse_platform/prompts/endings/forecast.v1.md")
JUDGE_CODE = ("wse_platform/endings/judge.py", "wse_platform/endings/forecast.py",
              "wse_platform/metrics/endings.py", "wse_platform/prompts/endings/judge.v1.md")

POSITIONS_SCHEMA = {
    "story_id": pl.Utf8, "set_key": pl.Utf8, "position": pl.Int64, "sentence_index": pl.Int64,
    "revealed_share": pl.Float64, "n_tokens_revealed": pl.Int64, "n_tokens_total": pl.Int64,
    "last_sentence": pl.Utf8, "n_sentences": pl.Int64, "forecaster_model": pl.Utf8, "tokenizer": pl.Utf8,
}
PREDICTIONS_SCHEMA = {
    "story_id": pl.Utf8, "set_key": pl.Utf8, "position": pl.Int64, "sample_index": pl.Int64,
    "prediction": pl.Utf8, "forecaster_model": pl.Utf8, "llm_call_id": pl.Utf8, "failure_json": pl.Utf8,
    "repeat": pl.Int64, "sample_error": pl.Utf8,
}
VERDICTS_SCHEMA = {
    "story_id": pl.Utf8, "set_key": pl.Utf8, "position": pl.Int64, "sample_index": pl.Int64,
    "judge_config_id": pl.Utf8, "judge_model": pl.Utf8, "verdict_raw": pl.Utf8, "verdict": pl.Utf8,
    "choice_fallback": pl.Boolean, "same_model_judge": pl.Boolean, "llm_call_id": pl.Utf8,
    "failure_json": pl.Utf8, "repeat": pl.Int64,
}


def _stories(wh, key: str) -> list[SplitStory]:
    df = wh.query("SELECT story_id, text FROM endings_stories WHERE set_key = ? AND included "
                  "ORDER BY story_id", [key])
    return [SplitStory.of(r["story_id"], r["text"]) for r in df.iter_rows(named=True)]


def _rows(wh, table: str, key: str) -> list[dict]:
    return wh.query(f'SELECT * FROM "{table}" WHERE set_key = ? ORDER BY story_id, position'
                    + (', "repeat", sample_index' if table != "endings_positions" else ""), [key]).to_dicts()


def _need_forecaster(s: Settings) -> str:
    if s.endings.forecaster is None:
        raise ValueError("endings.forecaster is not set in the configuration: no model to forecast endings")
    return s.endings.forecaster


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None:
        return []

    @asset(
        name="endings_positions", partitions_def=parts.endings, deps=["endings_stories", "endings_set_config"],
        group_name=GROUP, kinds={"duckdb"}, code_version=code_version(*POSITIONS_CODE),
        description="One row per kept forecasting position of an included story: the 1-based index of the "
                    "last revealed sentence, the share of the story's tokens revealed (forecaster's "
                    "tokenizer; kept in [10 %, 99 %] with a last sentence of ≥ 10 words), every "
                    "`endings.position_stride`-th kept position (at most `endings.max_positions_per_story`, "
                    "evenly spaced, when set — demo scale).",
    )
    def endings_positions(context, warehouse: WarehouseResource, settings: SettingsResource):
        s, key, wh = settings.get(), context.partition_key, warehouse.get()
        forecaster = _need_forecaster(s)
        rows = compute_positions(_stories(wh, key), key, token_counter(s, forecaster),
                                 s.endings.position_stride or 1, forecaster, tokenizer_name(s, forecaster),
                                 s.endings.max_positions_per_story)
        df = pl.DataFrame(rows, schema=POSITIONS_SCHEMA)
        per_story = df.group_by("story_id").len().sort("story_id") if df.height else df
        return write_table(wh, "endings_positions", df, key={"set_key": key}, extra_metadata={
            "n_stories": per_story.height,
            "positions_per_story": MetadataValue.json(
                {r[0]: r[1] for r in per_story.iter_rows()} if df.height else {}),
        })

    @asset(
        name="endings_predictions", partitions_def=parts.endings,
        deps=["endings_positions", "endings_stories", "endings_set_config"],
        group_name=GROUP, kinds={"duckdb", "llm"}, code_version=code_version(*FORECAST_CODE),
        description="K rows per position: one predicted ending each (2–3 sentences, plot level) from the "
                    "forecasting model given the story so far; the K samples of a position are one request "
                    "with n = K (temperature 1.2, top-p 0.95, max 150 tokens by default). A failed request "
                    "gives K rows with `failure_json` and no prediction. With `endings.repeats` = r the whole "
                    "stage runs r times with different seeds (column `repeat`, 0 = main run).",
    )
    def endings_predictions(context, warehouse: WarehouseResource, llm: LLMResource, settings: SettingsResource):
        s, key, wh = settings.get(), context.partition_key, warehouse.get()
        forecaster = _need_forecaster(s)
        positions, stories = _rows(wh, "endings_positions", key), _stories(wh, key)
        with llm.session(context) as client:
            # the judge starts on each position's endings as they arrive (answers cached for endings_verdicts)
            after = position_judge(client, s, stories, key, forecaster, s.endings.k or 1, s.prompts_dir)
            rows = run_forecasts(client, stories, positions, key, forecaster, s.endings.k or 1,
                                 s.endings.forecast_sampling, prompts_dir=s.prompts_dir,
                                 repeats=s.endings.repeats, after=after)
        df = pl.DataFrame(rows, schema=PREDICTIONS_SCHEMA)
        return write_table(wh, "endings_predictions", df, key={"set_key": key}, extra_metadata={
            "n_positions": len(positions), "k": s.endings.k, "repeats": s.endings.repeats,
            "n_failed": int(df["failure_json"].is_not_null().sum()) if df.height else 0,
            **transcripts(s, "endings", set=key),
        })

    @asset(
        name="endings_verdicts", partitions_def=parts.endings,
        deps=["endings_predictions", "endings_positions", "endings_stories", "endings_judge_config"],
        group_name=GROUP, kinds={"duckdb", "llm"}, code_version=code_version(*JUDGE_CODE),
        description="One row per predicted ending and judge configuration: Y when the prediction gets the "
                    "broad trajectory of the true continuation right (truncated to 2,000 words, anchored at "
                    "the same last revealed sentence), N when fundamentally different; `verdict` is 'Y' iff "
                    "the answer's first non-space character is Y. Failed judgements keep `failure_json`. "
                    "`same_model_judge` says when the judge is the forecaster (demo only).",
    )
    def endings_verdicts(context, warehouse: WarehouseResource, llm: LLMResource, settings: SettingsResource):
        s, key, wh = settings.get(), context.partition_key, warehouse.get()
        judge_id = judge_config_id(s)
        with llm.session(context) as client:
            # the judge's early answers of this run (same process), else the cache answers (early.py)
            rows = run_judging(client, _stories(wh, key), _rows(wh, "endings_positions", key),
                               _rows(wh, "endings_predictions", key), s, prompts_dir=s.prompts_dir,
                               early=ANSWERS.take(client.run_id, key))
        df = pl.DataFrame(rows, schema=VERDICTS_SCHEMA)
        judged = df.filter(pl.col("verdict").is_not_null()) if df.height else df
        return write_table(wh, "endings_verdicts", df, key={"set_key": key, "judge_config_id": judge_id},
                           extra_metadata={
                               "judge_config_id": judge_id,
                               "same_model_judge": s.endings.same_model_judge,
                               "n_failed": int(df["failure_json"].is_not_null().sum()) if df.height else 0,
                               "share_yes": float((judged["verdict"] == "Y").mean()) if judged.height else None,
                           })

    return [endings_positions, endings_predictions, endings_verdicts]
