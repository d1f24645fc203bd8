"""A command reads its configuration once and every run it starts uses that version (issue 23, item 4).

Before: each in-process run reloaded the config file when its mtime changed, so `wse.horizon`
edited 2 → 3 while `wse materialize` ran was used by the next run but recorded against the
version read at the start; restoring the old file made the horizon-3 results look fresh.
"""
import os

import yaml
from dagster import Definitions, StaticPartitionsDefinition, asset

from resources import SettingsResource, settings_for
from tests.conftest import write_config
from wse_platform import cli, runner


def test_an_edit_during_the_command_is_not_used_by_its_later_runs(tmp_path, monkeypatch, capsys):
    cfg = write_config(tmp_path, wse={"horizon": 2})
    monkeypatch.setenv("WSE_CONFIG", str(cfg))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    for var in ("WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    seen = []

    @asset(partitions_def=StaticPartitionsDefinition(["run1", "run2"]))
    def cell(context, settings: SettingsResource):
        seen.append((context.partition_key, settings.get().wse.horizon))

    monkeypatch.setattr(cli, "_defs", lambda args: Definitions(assets=[cell], resources={
        "settings": SettingsResource(config_path=None)}))
    real_run = runner.run_in_location

    def edit_before_run2(defs, step, instance, tags):
        if step.partition_key == "run2":  # the user edits the file while the command runs
            raw = yaml.safe_load(cfg.read_text())
            raw["wse"]["horizon"] = 3
            cfg.write_text(yaml.safe_dump(raw))
            st = os.stat(cfg)
            os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
        return real_run(defs, step, instance, tags)

    monkeypatch.setattr(runner, "run_in_location", edit_before_run2)
    assert cli.main(["materialize"]) == 0
    assert seen == [("run1", 2), ("run2", 2)]  # was: run2 computed with horizon 3
    assert "changed since this command read it" in capsys.readouterr().out
    assert settings_for(None).wse.horizon == 3  # the next command reads the file as it is now


def test_a_config_version_recorded_by_another_process_stops_the_command():
    """`wse ui`'s config_observer records the edited config while `wse materialize` runs: a later
    run of the command would be recorded against that version but computed with the pinned one."""
    from dagster import AssetKey, AssetMaterialization, AssetSpec, DagsterInstance

    from assets.versioning import CONFIG_TAG
    from wse_platform.dagster_private import DATA_VERSION_TAG
    from wse_platform.run_guard import RunGuard

    instance = DagsterInstance.ephemeral()
    cfg = AssetSpec("cell_config", tags={CONFIG_TAG: "true"})
    ran, lines = [], []

    @asset(partitions_def=StaticPartitionsDefinition(["run1", "run2"]), deps=[cfg])
    def cell(context):
        ran.append(context.partition_key)
        if context.partition_key == "run1":  # the other process notices the edited file meanwhile
            instance.report_runless_asset_event(AssetMaterialization("cell_config", tags={DATA_VERSION_TAG: "v2"}))

    instance.report_runless_asset_event(AssetMaterialization("cell_config", tags={DATA_VERSION_TAG: "v1"}))
    defs = Definitions(assets=[cfg, cell])
    steps = runner.plan(defs, [AssetKey("cell")], {AssetKey("cell"): None})
    report = runner.execute(defs, steps, instance, echo=lines.append, guard=RunGuard(defs, instance=instance))
    assert ran == ["run1"]  # was: run2 ran and was recorded against v2
    assert "another process recorded a new version of cell_config" in report.stopped_by
