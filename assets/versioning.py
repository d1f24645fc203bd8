"""Config source assets: what each generation cell and each judge configuration depends on.

Each is an observable source asset whose data version is a fingerprint from
`wse_platform.versions`. Generation assets depend on the cell-config asset of their
benchmark (same partitions, so a cell becomes unsynced only when *its* model, prompts,
architecture code or scale change); judging assets depend on the judge-config asset (so a
judge change makes every verdict cell unsynced while trajectories stay fresh).

Dependencies to declare (by key):
    WSE:      trajectories  -> wse_cell_config;      verdicts  -> wse_judge_config
    NCP:      episodes      -> ncp_cell_config;      re-audits -> ncp_reaudit_config
    Endings:  stories/predictions -> endings_set_config; verdicts -> endings_judge_config
"""
from __future__ import annotations

from pathlib import Path

from dagster import DataVersion, DataVersionsByPartition, observable_source_asset

from assets.partitions import BenchmarkPartitions, cell_of
from resources.settings import settings_for
from wse_platform import versions
from wse_platform.config import Settings

CONFIG_ASSETS = {
    "wse": ("wse_cell_config", "wse_judge_config"),
    "ncp": ("ncp_cell_config", "ncp_reaudit_config"),
    "endings": ("endings_set_config", "endings_judge_config"),
}


def code_version(*files: str | Path) -> str:
    """Code version of an asset: hash of the domain source files it runs (repo-relative paths)."""
    return versions.code_version_of(*files)


def _desc(what: str) -> str:
    return (f"Fingerprint of {what}. Observed from `wse.yaml` and the prompt files; a changed "
            "data version marks the downstream cells unsynced.")


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    config_path = settings.source_file
    out = []

    def cur() -> Settings:
        return settings_for(config_path)

    if parts.wse is not None:
        @observable_source_asset(name="wse_cell_config", partitions_def=parts.wse, group_name="wse_bench",
                                 description=_desc("each WSE-bench cell's generation setup (model, prompts, architecture code, scale)"))
        def wse_cell_config():
            s = cur()
            return DataVersionsByPartition({
                k: versions.wse_cell_version(s, *cell_of(k)) for k in parts.wse.get_partition_keys()})

        @observable_source_asset(name="wse_judge_config", group_name="wse_bench",
                                 description=_desc("the WSE-bench judge configuration (consistency and richness judges)"))
        def wse_judge_config():
            return DataVersion(versions.wse_judge_version(cur()))

        out += [wse_cell_config, wse_judge_config]

    if parts.ncp is not None:
        @observable_source_asset(name="ncp_cell_config", partitions_def=parts.ncp, group_name="ncp_bench",
                                 description=_desc("each NCP-Bench cell's episode setup (narrator, player, in-loop auditor, prompts, scale)"))
        def ncp_cell_config():
            s = cur()
            return DataVersionsByPartition({
                k: versions.ncp_cell_version(s, *cell_of(k)) for k in parts.ncp.get_partition_keys()})

        @observable_source_asset(name="ncp_reaudit_config", group_name="ncp_bench",
                                 description=_desc("the NCP-Bench re-audit auditor configurations"))
        def ncp_reaudit_config():
            return DataVersion(versions.ncp_reaudit_version(cur()))

        out += [ncp_cell_config, ncp_reaudit_config]

    if parts.endings is not None:
        @observable_source_asset(name="endings_set_config", partitions_def=parts.endings, group_name="endings",
                                 description=_desc("each 100-Endings story set's generation and forecasting setup"))
        def endings_set_config():
            s = cur()
            return DataVersionsByPartition({
                k: versions.endings_set_version(s, k) for k in parts.endings.get_partition_keys()})

        @observable_source_asset(name="endings_judge_config", group_name="endings",
                                 description=_desc("the 100-Endings Y/N judge configuration"))
        def endings_judge_config():
            return DataVersion(versions.endings_judge_version(cur()))

        out += [endings_set_config, endings_judge_config]
    return out
