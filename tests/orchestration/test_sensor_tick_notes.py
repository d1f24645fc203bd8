"""What the UI's tick history says for a sensor tick that recorded something but requested no run.

Seen in the scripted walkthrough (`bench/ui_walkthrough.py`, `wse.horizon` 2 → 3 under `wse ui`):
Dagster files a tick without run requests as *skipped*, and with no skip reason of ours its line in
the sensor's tick history read "Sensor function returned an empty result" — for the very
`config_observer` tick that recorded the edit and the `sync_status` tick that reported 21 failed
`in_sync` checks. The line now says what the tick recorded."""
from __future__ import annotations

from types import SimpleNamespace

from dagster import (AssetCheckEvaluation, AssetCheckSeverity, AssetKey, AssetMaterialization, AssetObservation,
                     DagsterInstance, build_sensor_context)

import assets.automation as automation
import assets.sync as sync

EMPTY = "Sensor function returned an empty result"


def _evaluation(asset: str, passed: bool) -> AssetCheckEvaluation:
    return AssetCheckEvaluation(asset_key=AssetKey(asset), check_name=sync.IN_SYNC, passed=passed,
                                severity=AssetCheckSeverity.WARN, description="x")


def _tick(sensor_def):
    with DagsterInstance.ephemeral() as instance:
        return sensor_def.evaluate_tick(build_sensor_context(instance=instance))


def test_a_sync_status_tick_that_reported_verdicts_says_which(monkeypatch):
    events = [_evaluation(a, False) for a in ("wse_trajectories", "wse_cell_metrics", "wse_x3", "wse_x4", "wse_x5", "wse_x6", "wse_x7")]
    events.append(_evaluation("wse_judge_agreement", True))
    monkeypatch.setattr(sync, "sync_events", lambda graph, instance, seen, **kw: (events, {"x": "1"}))
    data = _tick(sync.build_sensor(automation.LazyGraph([])))
    assert len(data.asset_events) == 8 and data.run_requests == []
    note = data.skip_message
    assert note != EMPTY and note.startswith("reported `in_sync` of 8 assets (no run to request): 7 failed")
    assert "wse_cell_metrics, wse_trajectories" in note and "… and 2 more" in note  # sorted, at most 5 named
    assert note.endswith("1 passed: wse_judge_agreement")
    monkeypatch.setattr(sync, "sync_events", lambda graph, instance, seen, **kw: ([], {}))  # nothing new: as before
    assert _tick(sync.build_sensor(automation.LazyGraph([]))).skip_message == "no in_sync verdict changed"


def test_a_config_observer_tick_that_recorded_an_edit_says_which(monkeypatch):
    recorded = [AssetMaterialization(AssetKey("wse_cell_config"), partition="B1|smollm2"),
                AssetObservation(AssetKey("wse_dracor_plays"))]
    monkeypatch.setattr(automation, "config_specs", lambda objs: ["spec"])
    monkeypatch.setattr(automation, "config_events", lambda instance, spec, s: recorded)
    monkeypatch.setattr(automation, "settings_for", lambda path: None)
    settings = SimpleNamespace(source_file=None, rejudge_cron="0 3 * * *")
    sensors, _, _ = automation.build_automation(settings, None, [])
    [observer] = [s for s in sensors if s.name == "config_observer"]
    data = _tick(observer)
    assert len(data.asset_events) == 2 and data.run_requests == []
    assert data.skip_message == ("recorded 2 changes (no run to request; `wse_automation` rebuilds what depends "
                                 "on them): wse_cell_config[B1|smollm2], wse_dracor_plays")
