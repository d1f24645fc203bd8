"""Every private Dagster name we use comes through `wse_platform.dagster_private`, and each still exists.

A Dagster upgrade that moves or removes one fails here, naming it, rather than inside a run."""
from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_every_private_name_resolves_to_a_real_object():
    import wse_platform.dagster_private as adapter

    missing = [name for name in adapter.__all__ if getattr(adapter, name, None) is None]
    assert not missing, f"Dagster no longer provides: {missing}"
    assert isinstance(adapter.PARTITION_THRESHOLD, int) and adapter.PARTITION_THRESHOLD > 0
    assert adapter.IMPLICIT_ASSET_JOB_NAME == "__ASSET_JOB"
    assert callable(adapter.observe) and callable(adapter.extract_data_provenance_from_entry)
    import importlib
    for name in adapter.WORKER_WARM_MODULES:  # the worker template warms them: each must still exist
        importlib.import_module(name)


def test_no_other_module_imports_dagster_private_modules():
    offenders = []
    for folder in ("wse_platform", "assets", "resources"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "dagster_private.py":
                continue
            if re.search(r"^\s*(from|import)\s+dagster\._", path.read_text(encoding="utf-8"), flags=re.MULTILINE):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"private Dagster imports outside the adapter: {offenders}"


def test_dagster_still_has_no_asset_level_staleness_for_partitioned_assets():
    """Why the UI's "Materialize unsynced" skips stale cells (README, "What the UI shows"): its
    dialog asks each asset's stale status without a partition, and Dagster answers FRESH for a
    partitioned asset while a partition is STALE. When this fails, Dagster has changed that:
    revisit the README paragraph and the issue-13 note."""
    from dagster import StaticPartitionsDefinition, asset, instance_for_test, materialize

    from wse_platform.dagster_private import AssetGraph
    from wse_platform.status import _resolver

    parts = StaticPartitionsDefinition(["a", "b"])

    def cell(version: str):
        @asset(partitions_def=parts, code_version=version, name="cell")
        def _cell() -> int:
            return 1
        return _cell

    with instance_for_test() as instance:
        for pk in ("a", "b"):
            materialize([cell("1")], partition_key=pk, instance=instance)
        resolver = _resolver(AssetGraph.from_assets([cell("2")]), instance)  # new code: both partitions stale
        from dagster import AssetKey
        assert str(resolver.get_status(AssetKey("cell"), "a")).endswith("STALE")
        assert str(resolver.get_status(AssetKey("cell"), None)).endswith("FRESH")


def test_dagster_still_stores_one_runless_evaluation_per_partition_of_a_partitioned_check():
    """Why `in_sync` (assets/sync.py) is an asset-level check, not a partitioned one: Dagster (1.13)
    keys runless check evaluations by (asset, check, run id '', partition), so a second runless
    evaluation of the same partition breaks a unique index, and the `sync_status` sensor must report
    again and again. When this fails, Dagster has changed that: `in_sync` can become partitioned
    (a status per cell in the UI's partition view)."""
    import warnings

    from dagster import (AssetCheckEvaluation, AssetCheckSeverity, AssetCheckSpec, AssetKey,
                         StaticPartitionsDefinition, instance_for_test)

    from wse_platform.dagster_private import AssetCheckEvaluationTargetMaterializationData

    parts = StaticPartitionsDefinition(["a"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AssetCheckSpec("in_sync", asset="cell", partitions_def=parts)  # partitioned checks exist ...

    def evaluation(partition):
        return AssetCheckEvaluation(
            asset_key=AssetKey("cell"), check_name="in_sync", passed=False, severity=AssetCheckSeverity.WARN,
            partition=partition, target_materialization_data=AssetCheckEvaluationTargetMaterializationData(
                storage_id=1, run_id="r", timestamp=0.0))

    with instance_for_test() as instance:
        for _ in range(2):  # unpartitioned: as often as needed
            instance.report_runless_asset_event(evaluation(None))
        instance.report_runless_asset_event(evaluation("a"))
        with pytest.raises(Exception, match="(?i)unique"):  # ... but their runless evaluations only once
            instance.report_runless_asset_event(evaluation("a"))
