"""100-Endings report tables: stability across repeats (Table 7), corpus summary (Table 3),
rubric-vs-tension contrasts and per-criterion rubric scores (Fig. 7). Builders in
`wse_platform.endings.reports`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from dagster import AssetExecutionContext, AssetKey, MaterializeResult, asset

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.endings import reports as R
from wse_platform.endings.rubric import load_rubric
from wse_platform.endings.rubric_plots import plot_rubric_criteria

GROUP = "endings"
_CODE = code_version("wse_platform/endings/reports.py", "wse_platform/endings/tables.py")
_CRITERIA_CODE = code_version("wse_platform/endings/reports.py", "wse_platform/endings/tables.py",
                              "wse_platform/endings/rubric.py", "wse_platform/endings/rubric_plots.py",
                              "wse_platform/endings/plots.py", "wse_platform/plotting.py")


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None:
        return []
    rubric_on = settings.endings.rubric is not None
    rubric_dep = [AssetKey("endings_rubric_scores")] if rubric_on else []

    @asset(name="endings_stability", deps=[AssetKey("endings_story_tension")], group_name=GROUP,
           kinds={"duckdb"}, code_version=_CODE,
           description="Paper Table 7: per set and judge configuration, the story means of mean NR, late NR, "
                       "IR60 and retention for each forecast+judge repeat (`endings.repeats`), and a summary "
                       "row with their mean and sample std across repeats.")
    def endings_stability(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        df = R.build_stability(wh.query("SELECT * FROM endings_story_tension"))
        return write_table(wh, "endings_stability", df)

    @asset(name="endings_corpus_summary",
           deps=[AssetKey("endings_stories"), AssetKey("endings_positions"), *rubric_dep],
           group_name=GROUP, kinds={"duckdb"}, code_version=_CODE,
           description="Paper Table 3: per corpus / generated set, stories read, kept (measured), mean words "
                       "of the kept stories, kept positions, the exclusion reasons counted, and the rubric-band "
                       "n (kept stories inside `endings.rubric.min_words..max_words`, and how many were "
                       "scored; NULL when the rubric judge is off).")
    def endings_corpus_summary(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        df = R.build_corpus_summary(
            wh.query("SELECT story_id, set_key, corpus, quality_tier, n_words, included, exclusion_reason "
                     "FROM endings_stories"),
            wh.query("SELECT story_id, set_key FROM endings_positions"),
            wh.query("SELECT story_id, set_key, in_length_band, overall FROM endings_rubric_scores")
            if rubric_on else None)
        return write_table(wh, "endings_corpus_summary", df)

    out = [endings_stability, endings_corpus_summary]
    if rubric_on:
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

        @asset(name="endings_rubric_criteria",
               deps=[AssetKey("endings_rubric_scores"), AssetKey("endings_story_tension")],
               group_name=GROUP, kinds={"duckdb"}, code_version=_CRITERIA_CODE,
               description="Paper Fig. 7: one row per set × rubric criterion: stories scored in the length band, "
                           "mean raw score, mean 0–100 score (faults inverted) with a 95 % CI, and the difference "
                           "from the same criterion in the top human corpus by mean no-rate (the paper's New "
                           "Yorker vs amateur / LLM contrast). Metadata: bar plot of the tension-related criteria.")
        def endings_rubric_criteria(context: AssetExecutionContext, warehouse: WarehouseResource,
                                    settings: SettingsResource) -> MaterializeResult:
            s, wh = settings.get(), warehouse.get()
            cfg = s.endings.rubric
            rubric = load_rubric(s.resolve_path(cfg.rubric_file) if cfg.rubric_file else None)
            scores = wh.query("SELECT * FROM endings_rubric_scores")
            df = R.build_rubric_criteria(scores, rubric, wh.query("SELECT * FROM endings_story_tension"))
            png = plot_rubric_criteria(df, s.artifacts / "endings" / "bars" / "rubric_criteria.png")
            other = int((scores["scores_json"].is_not_null()
                         & ~scores["rubric_config_id"].str.ends_with(f":{rubric.sha}")).sum()) if scores.height else 0
            return write_table(wh, "endings_rubric_criteria", df, plots={"rubric_criteria_bars": png} if png else None,
                               settings=s, extra_metadata={"n_scores_other_rubric_file": other})
        out.append(endings_rubric_criteria)
    return out
