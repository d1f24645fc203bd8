"""`endings_stories`: one partition per story set — a human corpus loaded from its folder,
or a generated set (generator model × pipeline) written from the story ideas.

Thin: loading lives in `wse_platform.endings.corpus`, generation in `wse_platform.endings.pipelines`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import polars as pl
from dagster import MaterializeResult, MetadataValue, asset

from assets.helpers import markdown_preview, write_table
from assets.partitions import BenchmarkPartitions, parse_endings_set
from assets.versioning import code_version
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.endings import corpus as corpus_mod
from wse_platform.endings.pipelines import generate_set

GROUP = "endings"
CODE = ("wse_platform/endings/corpus.py", "wse_platform/endings/pipelines.py",
        *(f"wse_platform/prompts/endings/{n}.v1.md"
          for n in ("story_vanilla", "beats_plan", "story_from_beats", "warmup_title", "warmup_text",
                   "warmup_adapt")), "wse_platform/endings/ideas.py")

STORIES_SCHEMA = {
    "story_id": pl.Utf8, "set_key": pl.Utf8, "corpus": pl.Utf8, "quality_tier": pl.Utf8,
    "generator_model": pl.Utf8, "pipeline": pl.Utf8, "title": pl.Utf8, "author": pl.Utf8, "source": pl.Utf8,
    "license": pl.Utf8, "file": pl.Utf8, "n_words": pl.Int64, "text": pl.Utf8, "included": pl.Boolean,
    "exclusion_reason": pl.Utf8, "same_model_judge": pl.Boolean, "idea_id": pl.Utf8, "beats_json": pl.Utf8,
    "reference_beats_json": pl.Utf8, "reference_title": pl.Utf8, "reference_mode": pl.Utf8,
    "steps_json": pl.Utf8, "failure_json": pl.Utf8, "metadata_json": pl.Utf8,
}


def stories_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=STORIES_SCHEMA)


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None:
        return []

    @asset(
        name="endings_stories",
        partitions_def=parts.endings,
        deps=["endings_story_sources", "endings_set_config"],
        group_name=GROUP,
        kinds={"duckdb", "llm"},
        code_version=code_version(*CODE),
        description="One row per story of a 100-Endings set (partition `human:<corpus>` or "
                    "`gen:<model>:<pipeline>`): metadata, word count, text, and whether it is measured "
                    "(`included`) or why not (not prose, word range 500–5,000 by default — generated "
                    "stories too —, not in the seeded random sample, generation failure). Generated rows also carry the idea, the beats the story was written from, "
                    "the reference story (warmup_beats) and the steps run.",
    )
    def endings_stories(context, warehouse: WarehouseResource, llm: LLMResource, settings: SettingsResource):
        s = settings.get()
        key = context.partition_key
        part = parse_endings_set(key)
        problems: list[str] = []
        if part["kind"] == "human":
            cfg = next(c for c in s.endings.corpora if c.name == part["corpus"])
            load = corpus_mod.load_configured(s, cfg)
            problems = [str(p) for p in load.problems]
            for p in problems:
                context.log.warning(f"corpus {cfg.name}: skipped {p}")
            rows = corpus_mod.story_rows(load, key, s.endings.same_model_judge)
        else:
            with llm.session(context) as client:
                rows = generate_set(client, s, part["model"], part["pipeline"], key,
                                    ablate=s.endings.ablate.get(part["pipeline"], ()))
        return _write(warehouse.get(), stories_frame(rows), key, problems, s.endings.same_model_judge)

    return [endings_stories]


def _write(wh, df: pl.DataFrame, key: str, problems: list[str], same_model_judge: bool):
    """Write the partition; the markdown preview leaves out the long text/JSON columns."""
    result = write_table(wh, "endings_stories", df, key={"set_key": key}, extra_metadata={
        "n_included": int(df["included"].sum()) if df.height else 0,
        "n_excluded": int((~df["included"]).sum()) if df.height else 0,
        "skipped_files": MetadataValue.md("\n".join(f"- `{p}`" for p in problems) or "_(none)_"),
        "same_model_judge": same_model_judge,
    })
    short = df.drop("text", "beats_json", "reference_beats_json", "steps_json")
    return MaterializeResult(metadata={**result.metadata, "preview": MetadataValue.md(markdown_preview(short))})
