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
        self.failed: list[str] = []  # labels of the runs that failed
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

    def runs(self, wanted: set[tuple[str, str | None]]) -> list:
        """The runs the daemon launches for one tick's requests: one per partition key (the sensor
        groups a tick's requests by partition; assets of different partitionings never share a run),
        most downstream first. The daemon starts them together; run one after the other in this
        order, a run that reads what another run of the same tick rebuilds reads it *before* the
        rebuild, as it may under the daemon."""
        from wse_platform.runner import RunPlanStep

        order = {k: i for i, k in enumerate(self.graph.toposorted_asset_keys)}
        groups: dict[tuple[object, str | None], list[AssetKey]] = {}
        for a, p in wanted:
            key = AssetKey(a)
            groups.setdefault((self.graph.get(key).partitions_def, p), []).append(key)
        steps = [RunPlanStep(sorted(keys, key=order.__getitem__), p) for (_, p), keys in groups.items()]
        return sorted(steps, key=lambda st: (-max(order[k] for k in st.keys), str(st.partition_key)))

    def run(self, wanted: set[tuple[str, str | None]]) -> None:
        from wse_platform.runner import execute

        for step in self.runs(wanted):
            report = execute(self.defs, [step], self.instance, echo=lambda *_: None)
            if not report.ok:
                self.failed.append(step.label())

    def settle(self, max_ticks: int = 8) -> set[tuple[str, str | None]]:
        """Tick and run until nothing is requested; everything requested on the way."""
        done: set[tuple[str, str | None]] = set()
        for _ in range(max_ticks):
            wanted = self.tick()
            if not wanted:
                assert not self.failed, f"failed runs: {self.failed}"
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
