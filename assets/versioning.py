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


# --- Observing the config sources without launching a run -------------------------------------
# `dagster.observe` launches one in-process run per source (~0.5 s each); `wse status` must stay
# fast on the 144-cell grid, so the fingerprints are computed directly and only *changed* data
# versions are recorded, as runless observations (the same events an observation run writes).

def source_versions(src) -> dict[str | None, str] | None:
    """Current data version(s) of an observable source, by partition (None = unpartitioned).

    Returns None when the observe function needs a context or resources (then observe it with a run).
    """
    from dagster import ObserveResult
    from dagster._core.decorator_utils import get_function_params
    from dagster._core.definitions.decorators.op_decorator import is_context_provided
    from dagster._core.definitions.resource_annotation import get_resource_args

    fn = getattr(src, "observe_fn", None)
    if fn is None or get_resource_args(fn) or is_context_provided(get_function_params(fn)):
        return None
    value = fn()
    if isinstance(value, DataVersionsByPartition):
        return {pk: dv.value for pk, dv in value.data_versions_by_partition.items()}
    if isinstance(value, ObserveResult):
        value = value.data_version
    if isinstance(value, DataVersion):
        return {None: value.value}
    return None


def last_observed_version(instance, key, partition: str | None = None) -> str | None:
    """The data version of the latest recorded observation of a source (partition)."""
    from dagster._core.definitions.data_version import DATA_VERSION_TAG

    rec = instance.get_latest_data_version_record(key, is_source=True, partition_key=partition)
    if rec is None or rec.asset_observation is None:
        return None
    return rec.asset_observation.tags.get(DATA_VERSION_TAG)


def changed_observations(instance, src, current: dict[str | None, str]) -> list:
    """AssetObservation events for the partitions of `src` whose fingerprint differs from the last one."""
    from dagster import AssetObservation
    from dagster._core.definitions.data_version import DATA_VERSION_TAG

    return [AssetObservation(asset_key=src.key, partition=pk, tags={DATA_VERSION_TAG: version})
            for pk, version in current.items() if last_observed_version(instance, src.key, pk) != version]
