"""100-Endings report tables: stability across repeats (Table 7), corpus summary (Table 3)
and rubric-vs-tension contrasts. Builders in `wse_platform.endings.reports`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from dagster import AssetExecutionContext, AssetKey, MaterializeResult, asset

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import WarehouseResource
from wse_platform.config import Settings
from wse_platform.endings import reports as R

GROUP = "endings"
_CODE = code_version("wse_platform/endings/reports.py", "wse_platform/endings/tables.py")


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None:
        return []

    @asset(name="endings_stability", deps=[AssetKey("endings_story_tension")], group_name=GROUP,
           kinds={"duckdb"}, code_version=_CODE,
           description="Paper Table 7: per set and judge configuration, the story means of mean NR, late NR, "
                       "IR60 and retention for each forecast+judge repeat (`endings.repeats`), and a summary "
                       "row with their mean and sample std across repeats.")
    def endings_stability(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        df = R.build_stability(wh.query("SELECT * FROM endings_story_tension"))
        return write_table(wh, "endings_stability", df)

    @asset(name="endings_corpus_summary", deps=[AssetKey("endings_stories"), AssetKey("endings_positions")],
           group_name=GROUP, kinds={"duckdb"}, code_version=_CODE,
           description="Paper Table 3: per corpus / generated set, stories read, kept (measured), mean words "
                       "of the kept stories, kept positions, and the exclusion reasons counted.")
    def endings_corpus_summary(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        df = R.build_corpus_summary(
            wh.query("SELECT story_id, set_key, corpus, quality_tier, n_words, included, exclusion_reason "
                     "FROM endings_stories"),
            wh.query("SELECT story_id, set_key FROM endings_positions"))
        return write_table(wh, "endings_corpus_summary", df)

    out = [endings_stability, endings_corpus_summary]
    if settings.endings.rubric is not None:
        @asset(name="endings_rubric_contrasts",
               deps=[AssetKey("endings_story_tension"), AssetKey("endings_rubric_scores")],
               group_name=GROUP, kinds={"duckdb"}, code_version=_CODE,
               description="Rubric score against tension (paper Table 1 left, Table 4, Figs. 4 and 7): per set, "
                           "per generator × pipeline and over all stories in the rubric's length band: mean "
                           "rubric score (overall, tension-related criteria), mean and late no-rate, and the "
                           "Spearman rank correlation of rubric score vs mean no-rate across stories.")
        def endings_rubric_contrasts(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
            wh = warehouse.get()
            df = R.build_rubric_contrasts(wh.query("SELECT * FROM endings_story_tension"),
                                          wh.query("SELECT * FROM endings_rubric_scores"))
            return write_table(wh, "endings_rubric_contrasts", df)
        out.append(endings_rubric_contrasts)
    return out
