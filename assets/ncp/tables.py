"""NCP-Bench paper tables: Table 1 summary, survival curves (Figure 4), auditor sensitivity
(Table 2) and the genre table (Table 7). Thin: the metrics live in `wse_platform.metrics.ncp`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from dagster import MetadataValue, asset

from assets.helpers import markdown_preview, write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.metrics.ncp import (auditor_ablation_table, auditor_sensitivity, genre_table,
                                      human_baseline_table, summary_table, survival_table)
from wse_platform.ncp.plots import plot_survival
from wse_platform.run_split import weight_metadata

GROUP = "ncp_bench"
METRICS_CODE = ("wse_platform/metrics/ncp.py",)


# each table's CPU seconds in a tables run (`bench/fleet.py`'s NCP folder: 100 specs x 3 architectures, t_max 3;
# `bench/fleet_tail.py`): `wse materialize --parallel` balances the tables' runs side by side by these
# (`run_split`); one without a weight counts as the mean of the others. Only the grouping follows from them.
RUN_WEIGHTS = {"ncp_survival": 0.18, "ncp_auditor_sensitivity": 0.12, "ncp_genre": 0.06, "ncp_summary": 0.05,
               "ncp_human_baseline": 0.04}


def _weight(name: str) -> dict:
    return weight_metadata(RUN_WEIGHTS, name)


def _episodes(wh, table: str = "ncp_episodes"):
    return wh.query(f'SELECT * FROM "{table}" ORDER BY model, arch, auditor_id, spec_id')


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.ncp is None:
        return []

    @asset(name="ncp_summary", metadata=_weight("ncp_summary"), deps=["ncp_episodes"], group_name=GROUP, kinds={"duckdb"},
           code_version=code_version(*METRICS_CODE),
           description="Paper Table 1: one row per narrator model × architecture × in-loop auditor — average "
                       "turns, trajectory %, satisfied-commitment %, % of episodes ending in a fact / commitment / "
                       "player-input conflict (plus success / survival shares), survival at turn 20 (share of episodes "
                       "with >= 20 turns, the reference's) and the Kaplan–Meier estimate (km_survival_at_20).")
    def ncp_summary(warehouse: WarehouseResource):
        wh = warehouse.get()
        return write_table(wh, "ncp_summary", summary_table(_episodes(wh)))

    @asset(name="ncp_survival", metadata=_weight("ncp_survival"), deps=["ncp_episodes"], group_name=GROUP, kinds={"duckdb"},
           code_version=code_version(*METRICS_CODE, "wse_platform/ncp/plots.py", "wse_platform/plotting.py"),
           description="Paper Figure 4: one row per cell × auditor × turn 0..T_max — survival as the "
                       "reference computes it (share of episodes whose turn count is >= t), and the secondary "
                       "Kaplan–Meier estimate km_survival (lifelines; CONFLICT is the event, SUCCESS / SURVIVAL "
                       "censored at their last turn) with 95% CI and at-risk count.")
    def ncp_survival(settings: SettingsResource, warehouse: WarehouseResource):
        s = settings.get()
        wh = warehouse.get()
        eps = _episodes(wh)
        t_max = max([s.ncp.t_max or 0] + ([int(eps["turns"].max())] if not eps.is_empty() else []))
        df = survival_table(eps, t_max=t_max)
        png = plot_survival(df, s.artifacts / "ncp" / "survival.png")
        return write_table(wh, "ncp_survival", df, plots={"survival_curves": png}, settings=s)

    @asset(name="ncp_auditor_sensitivity", metadata=_weight("ncp_auditor_sensitivity"), deps=["ncp_reaudit_episodes"], group_name=GROUP, kinds={"duckdb"},
           code_version=code_version(*METRICS_CODE),
           description="Re-audit analysis (the second, cheaper counterpart of Table 2; the paper's Table 2 "
                       "itself is ncp_auditor_ablation): stored transcripts replayed by each auditor "
                       "configuration, metrics per auditor (row_type 'auditor') and, per auditor pair and "
                       "metric, Pearson and Spearman correlations across environments (episodes matched on "
                       "model, arch, spec; row_type 'correlation').")
    def ncp_auditor_sensitivity(warehouse: WarehouseResource):
        wh = warehouse.get()
        df = auditor_sensitivity(_episodes(wh, "ncp_reaudit_episodes"))
        return write_table(wh, "ncp_auditor_sensitivity", df, extra_metadata={
            "n_auditors": int((df["row_type"] == "auditor").sum()) if df.height else 0})

    @asset(name="ncp_genre", metadata=_weight("ncp_genre"), deps=["ncp_episodes", "ncp_specs"], group_name=GROUP, kinds={"duckdb"},
           code_version=code_version(*METRICS_CODE),
           description="Paper Table 7: trajectory % and satisfied-commitment % per primary genre × narrator "
                       "model (kept apart per architecture and auditor).")
    def ncp_genre(warehouse: WarehouseResource):
        wh = warehouse.get()
        genres = wh.query("SELECT spec_id, primary_genre FROM ncp_specs")
        df = genre_table(_episodes(wh), dict(genres.iter_rows()))
        return write_table(wh, "ncp_genre", df, extra_metadata={
            "by_genre": MetadataValue.md(markdown_preview(df, rows=30))})

    @asset(name="ncp_human_baseline", metadata=_weight("ncp_human_baseline"), deps=["ncp_episodes"], group_name=GROUP, kinds={"duckdb"},
           code_version=code_version(*METRICS_CODE),
           description="Paper Table 5: on each spec a human narrated (`wse ncp play --as narrator`), every "
                       "model's episode and each human session — turns, nodes reached / total, commitments "
                       "satisfied / total, SUCCESS / SURVIVED / FAILURE and the failure mode. Empty until a "
                       "human has played.")
    def ncp_human_baseline(warehouse: WarehouseResource):
        wh = warehouse.get()
        return write_table(wh, "ncp_human_baseline", human_baseline_table(_episodes(wh)))

    out = [ncp_summary, ncp_survival, ncp_auditor_sensitivity, ncp_genre, ncp_human_baseline]
    if settings.ncp.ablation is not None:
        @asset(name="ncp_auditor_ablation", deps=["ncp_ablation_episodes"], group_name=GROUP, kinds={"duckdb"},
               code_version=code_version(*METRICS_CODE),
               description="Paper Table 2 as run: one row per auditor configuration in the loop of the "
                           "`ncp.ablation` cell — turns, trajectory %, satisfied %, fact / commitment / "
                           "player-input conflict %, Succ. count (n_succ = reached T_max + satisfied all "
                           "achievements, also split), survival at turn 20.")
        def ncp_auditor_ablation(warehouse: WarehouseResource):
            wh = warehouse.get()
            table = auditor_ablation_table(_episodes(wh, "ncp_ablation_episodes"))
            return write_table(wh, "ncp_auditor_ablation", table)

        out.append(ncp_auditor_ablation)
    return out
