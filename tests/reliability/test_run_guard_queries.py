"""The run guard asks the instance little per run (issue 24 item 3: the platform's time per cell).

Before each run it checks that what the run reads was ever built; a 6-asset cell run reading the
same config and source assets asked once per (asset, parent) pair, and every later run asked again.
Now an input found built is not asked about again in the same command, and the config versions
the guard watches are read in one query (`config_recorded_elsewhere`, before every run)."""
from dagster import AssetKey, AssetMaterialization, AssetSpec, DagsterInstance, Definitions, StaticPartitionsDefinition, asset

from assets.versioning import CONFIG_TAG
from wse_platform import runner
from wse_platform.dagster_private import DATA_VERSION_TAG
from wse_platform.run_guard import RunGuard

CELLS = StaticPartitionsDefinition(["a", "b", "c"])
SOURCE = AssetSpec("source")
CONFIGS = [AssetSpec(f"config_{i}", tags={CONFIG_TAG: "true"}) for i in range(3)]


@asset
def table() -> None:
    return None


@asset(partitions_def=CELLS, deps=[table])
def gen() -> None:
    return None


@asset(partitions_def=CELLS, deps=[table, gen])
def judge() -> None:
    return None


def test_inputs_found_built_are_not_asked_again_and_config_versions_take_one_query(monkeypatch):
    instance = DagsterInstance.ephemeral()
    for spec in CONFIGS:
        instance.report_runless_asset_event(AssetMaterialization(spec.key, tags={DATA_VERSION_TAG: "v1"}))
    defs = Definitions(assets=[*CONFIGS, table, gen, judge])
    runner.execute(defs, runner.plan(defs, [AssetKey("table")], {AssetKey("table"): None}), instance,
                   echo=lambda _: None)
    asked: list = []
    real = instance.fetch_materializations
    monkeypatch.setattr(instance, "fetch_materializations", lambda f, **kw: asked.append(f.asset_key) or real(f, **kw))
    guard = RunGuard(defs, instance=instance)
    steps = runner.plan(defs, [AssetKey("gen"), AssetKey("judge")], {AssetKey("gen"): None, AssetKey("judge"): None})
    assert len(steps) == 3  # one run per cell, gen and judge together
    report = runner.execute(defs, steps, instance, echo=lambda _: None, guard=guard)
    assert report.ok and report.stopped_by is None
    assert asked == [AssetKey("table")]  # was: table asked by gen and judge in each of the 3 runs, 3 configs x 4
