"""The daemon's view of one code location, for tests: sensor ticks and the runs they request.

What the UI (under `wse ui`, the daemon) does is driven here the way the daemon drives it: every
sensor of the definitions ticks with its own cursor (the `config_observer` and `sync_status`
sensors, and Dagster's own automation-condition evaluation for `wse_automation`), the runs it asks
for are executed, and the loop repeats until nothing more is requested.
"""
from __future__ import annotations

from dagster import (
    AssetKey,
    AutomationConditionSensorDefinition,
    build_sensor_context,
    evaluate_automation_conditions,
)


class Daemon:
    """The daemon's view of one code location: sensor ticks with cursors, and the runs they request."""

    def __init__(self, defs, instance):
        self.defs, self.instance, self.cursor = defs, instance, None
        self.sensor_cursors: dict[str, str | None] = {}
        self.graph = defs.resolve_asset_graph()

    def tick(self) -> set[tuple[str, str | None]]:
        """One tick of every sensor; returns the (asset, partition) pairs whose runs were requested."""
        wanted: set[tuple[str, str | None]] = set()
        for sensor in self.defs.sensors:
            if isinstance(sensor, AutomationConditionSensorDefinition):
                result = evaluate_automation_conditions(self.defs, self.instance, cursor=self.cursor)
                self.cursor = result.cursor
                for key in self.graph.materializable_asset_keys:
                    wanted |= {(key.to_user_string(), None if p is None else str(p))
                               for p in result.get_requested_partitions(key)}
                continue
            data = sensor.evaluate_tick(build_sensor_context(instance=self.instance, definitions=self.defs,
                                                             cursor=self.sensor_cursors.get(sensor.name)))
            self.sensor_cursors[sensor.name] = data.cursor
            for ev in data.asset_events:
                self.instance.report_runless_asset_event(ev)
            for req in data.run_requests:
                wanted |= {(k.to_user_string(), req.partition_key) for k in req.asset_selection}
        return wanted

    def run(self, wanted: set[tuple[str, str | None]]) -> None:
        from wse_platform.runner import execute, plan

        keys = sorted({AssetKey(a) for a, _ in wanted}, key=lambda k: k.to_user_string())
        parts = {k: (None if self.graph.get(k).partitions_def is None
                     else sorted(p for a, p in wanted if a == k.to_user_string())) for k in keys}
        report = execute(self.defs, plan(self.defs, keys, parts), self.instance, echo=lambda *_: None)
        assert report.ok

    def settle(self, max_ticks: int = 8) -> set[tuple[str, str | None]]:
        """Tick and run until nothing is requested; everything requested on the way."""
        done: set[tuple[str, str | None]] = set()
        for _ in range(max_ticks):
            wanted = self.tick()
            if not wanted:
                return done
            done |= wanted
            self.run(wanted)
        raise AssertionError(f"automation did not settle: {sorted(done)}")


def setup(cfg):
    """(definitions, instance) of a tiny-grid config."""
    from resources.settings import settings_for
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import get_instance

    return build_definitions(str(cfg)), get_instance(settings_for(str(cfg)))
