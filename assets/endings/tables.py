"""100-Endings result tables: no-rate per position, tension per story, and the paper's group tables.

Unpartitioned: each materialization rebuilds the table from every set in the warehouse
(`endings_verdicts`, `endings_positions`, `endings_stories`), so the group tables always
compare all corpora and generated sets. The builders are in `wse_platform.endings.tables`.
"""

import shutil

from dagster import AssetExecutionContext, AssetKey, MaterializeResult, MetadataValue, asset

from assets.helpers import portable_path, write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.endings import tables as T
from wse_platform.endings.plots import plot_corpus_bars, plot_curve_grid, plot_story_curves

GROUP = "endings"
_CODE = code_version("wse_platform/endings/tables.py", "wse_platform/metrics/endings.py")
_PLOT_CODE = code_version("wse_platform/endings/tables.py", "wse_platform/metrics/endings.py",
                          "wse_platform/endings/plots.py", "wse_platform/plotting.py")

_VERDICT_COLS = 'story_id, set_key, position, sample_index, "repeat", judge_config_id, verdict, failure_json'
_POSITION_COLS = "story_id, set_key, position, sentence_index, revealed_share"
_STORY_COLS = ("story_id, set_key, corpus, quality_tier, generator_model, pipeline, n_words, "
               "included, same_model_judge")


def _same_model_note(df) -> dict:
    """Metadata flag so a demo run whose judge is the forecaster says so on the asset page."""
    flagged = "same_model_judge" in df.columns and bool(df["same_model_judge"].fill_null(False).any())
    return {"same_model_judge": flagged}


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None:
        return []

    @asset(
        name="endings_no_rate",
        deps=[AssetKey("endings_verdicts"), AssetKey("endings_positions")],
        group_name=GROUP, kinds={"duckdb"}, code_version=_CODE,
        description="One row per story position and judge configuration: how many of the K predicted "
                    "endings were judged, how many failed, and no-rate = 1 − (share judged 'Y') over the "
                    "parsed verdicts (failed judgements are left out, never counted as 'N').",
    )
    def endings_no_rate(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        df = T.build_no_rate(wh.query(f"SELECT {_VERDICT_COLS} FROM endings_verdicts"),
                             wh.query(f"SELECT {_POSITION_COLS} FROM endings_positions"))
        failed = int(df["n_failed"].sum()) if df.height else 0
        return write_table(wh, "endings_no_rate", df, extra_metadata={
            "failed_judgements": failed,
            "positions_without_no_rate": int(df["no_rate"].null_count()),
        })

    @asset(
        name="endings_story_tension",
        deps=[AssetKey("endings_no_rate"), AssetKey("endings_stories")],
        group_name=GROUP, kinds={"duckdb"}, code_version=_PLOT_CODE,
        description="One row per included story and judge configuration: mean no-rate, late no-rate "
                    "(≥ 80 % revealed), post-spike retention and convergence (%), and inflection rates at "
                    "30°/60°/120° of the smoothed, rescaled no-rate curve. Plots: each story's curve with "
                    "peaks and valleys of angle ≤ 60° marked (PNG per story under the artifacts folder).",
    )
    def endings_story_tension(context: AssetExecutionContext, warehouse: WarehouseResource,
                              settings: SettingsResource) -> MaterializeResult:
        wh = warehouse.get()
        no_rate = wh.query("SELECT * FROM endings_no_rate")
        df = T.build_story_tension(no_rate, wh.query(f"SELECT {_STORY_COLS} FROM endings_stories"))
        curves = no_rate.join(df.select("story_id", "set_key", "judge_config_id"),
                              on=["story_id", "set_key", "judge_config_id"], how="semi")
        s = settings.get()
        out_dir = s.artifacts / "endings" / "no_rate_curves"
        shutil.rmtree(out_dir, ignore_errors=True)   # drop curves of stories no longer present
        pngs = plot_story_curves(curves, out_dir)
        grid = plot_curve_grid(curves, out_dir / "overview.png")
        return write_table(wh, "endings_story_tension", df, plots={"no_rate_curves": grid} if grid else None,
                           settings=s, extra_metadata={"curve_pngs": len(pngs), "curve_dir": MetadataValue.path(portable_path(out_dir, s)),
                                           **_same_model_note(df)})

    def _group_asset(name: str, builder, what: str, extra_deps=(), with_rubric=False, bars=False):
        @asset(name=name, deps=[AssetKey("endings_story_tension"), *map(AssetKey, extra_deps)], group_name=GROUP,
               kinds={"duckdb"}, code_version=_PLOT_CODE if bars else _CODE, description=what)
        def _table(context: AssetExecutionContext, warehouse: WarehouseResource,
                   settings: SettingsResource) -> MaterializeResult:
            wh = warehouse.get()
            st = wh.query("SELECT * FROM endings_story_tension")
            df = builder(st, wh.query("SELECT * FROM endings_rubric_scores"),
                         settings.get().endings.reference_corpora) if with_rubric else builder(st)
            plots = plot_corpus_bars(df, settings.get().artifacts / "endings" / "bars") if bars else None
            return write_table(wh, name, df, plots=plots, settings=settings.get(), extra_metadata=_same_model_note(df))
        return _table

    rubric_dep = ("endings_rubric_scores",) if settings.endings.rubric is not None else ()
    ci = "mean over stories with a 95 % CI x̄ ± 1.96·s/√n (s: sample std, ddof 1; NULL when n = 1)"
    return [
        endings_no_rate,
        endings_story_tension,
        _group_asset("endings_corpus_tension", T.build_corpus_tension,
                     "Paper Table 6: one row per corpus / generated set and judge configuration (main repeat): "
                     f"n stories and mean NR, late NR, retention (and its median, Fig. 10), convergence (% change "
                     f"peak → next-10 minimum, negative when tension drops), IR30, IR60, IR120, each as a {ci}. "
                     "Metadata: per-set bar plots (Figs. 8–10).", bars=True),
        _group_asset("endings_pipeline_effect", T.build_pipeline_effect,
                     "Paper Table 2: per generator model × pipeline (× judge configuration): n, rubric score, "
                     f"the tension metrics, each as a {ci}, and every metric's difference from the same "
                     "model's vanilla pipeline; plus reference rows (all vanilla stories pooled; each corpus "
                     "named in `endings.reference_corpora`, default every measured corpus, by name).", extra_deps=rubric_dep, with_rubric=True),
        _group_asset("endings_length_buckets", T.build_length_buckets,
                     "Paper Table 9 (length invariance): story mean no-rate by word-count bucket "
                     "(<2k, 2–3k, 3–4k, 4–5k words) per corpus / generated set (never pooled): n, "
                     f"mean ({ci}) and median."),
    ]
