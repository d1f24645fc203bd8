"""Launch materializations in-process, many partitions per process, stale-only when asked.

This is the Dagster entry layer (like `definitions.py`), not domain code. Each
`dagster asset materialize` call pays ~4 s of start-up; here one process plans the whole
selection and executes it run by run: unpartitioned assets once, partitioned ones per
partition key, in dependency order. Runs are recorded in the Dagster instance at
$DAGSTER_HOME, so the UI, staleness and `wse status` see them.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DagsterInstance,
    Definitions,
    SourceAsset,
    materialize,
)

from wse_platform.config import Settings

DAGSTER_YAML = """\
# Written by wse-platform. Telemetry off; a run queue with per-backend concurrency limits
# (run tag `wse/backend`), so parallel cells respect each backend's limit.
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: {max_runs}
    tag_concurrency_limits:
{limits}
"""


def ensure_dagster_home(settings: Settings) -> Path:
    """Point $DAGSTER_HOME at a persistent instance (next to the warehouse) unless already set."""
    home = Path(os.environ.get("DAGSTER_HOME") or settings.warehouse.parent / "dagster_home")
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    cfg = home / "dagster.yaml"
    # Runs the sensors/CLI launch carry `wse/backend`; backfills launched in the UI carry the
    # partition tag `dagster/partition/model`, limited per model by its backend's limit.
    entries = [("wse/backend", backend, n) for backend, n in sorted(settings.concurrency.items())]
    entries += [("dagster/partition/model", name, settings.concurrency[m.backend])
                for name, m in sorted(settings.models.items()) if m.backend in settings.concurrency]
    limits = "\n".join(f"      - key: {key}\n        value: {value}\n        limit: {n}" for key, value, n in entries)
    text = DAGSTER_YAML.format(max_runs=max(4, sum(settings.concurrency.values())), limits=limits or "      []")
    if not cfg.exists() or cfg.read_text() != text:
        cfg.write_text(text)
    return home


def get_instance(settings: Settings) -> DagsterInstance:
    ensure_dagster_home(settings)
    return DagsterInstance.get()


# Runs log to the instance (UI) in full; the terminal only shows warnings and our own progress.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class RunPlanStep:
    """One in-process run: a set of assets sharing a partitions definition, for one partition (or none)."""
    keys: list[AssetKey]
    partition_key: str | None

    def label(self) -> str:
        names = ", ".join(k.to_user_string() for k in self.keys)
        return f"[{self.partition_key}] {names}" if self.partition_key else names


@dataclass
class RunReport:
    steps: list[tuple[RunPlanStep, bool, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.steps)


def materializable(defs: Definitions) -> dict[AssetKey, AssetsDefinition]:
    out: dict[AssetKey, AssetsDefinition] = {}
    for a in defs.assets or []:
        if isinstance(a, AssetsDefinition) and a.is_materializable:
            for k in a.keys:
                out[k] = a
    return out


def observable_sources(defs: Definitions) -> list:
    return [a for a in defs.assets or []
            if (isinstance(a, SourceAsset) and a.is_observable)
            or (isinstance(a, AssetsDefinition) and a.is_observable and not a.is_materializable)]


def observe_sources(defs: Definitions, instance: DagsterInstance) -> list[str]:
    """Record the current data versions of the config source assets; returns the changed ones.

    Fingerprints are computed in-process and only changed partitions are recorded (runless
    observations), so an unchanged config costs a few queries, not one run per source. A source
    whose observe function needs a context or resources is observed with a regular run.
    """
    from dagster._core.definitions.observe import observe  # public `observe` is not re-exported

    from assets.versioning import changed_observations, source_versions

    changed: list[str] = []
    for src in observable_sources(defs):
        current = source_versions(src) if isinstance(src, SourceAsset) else None
        if current is None:
            observe([src], instance=instance, resources=defs.resources, run_config=QUIET_RUN_CONFIG)
            changed.append(src.key.to_user_string() if isinstance(src, SourceAsset) else str(src.keys))
            continue
        events = changed_observations(instance, src, current)
        for ev in events:
            instance.report_runless_asset_event(ev)
        if events:
            changed.append(src.key.to_user_string())
    return changed


def plan(defs: Definitions, keys: Iterable[AssetKey],
         partitions: dict[AssetKey, list[str] | None]) -> list[RunPlanStep]:
    """Dependency-ordered run steps. `partitions[key]` = the partition keys to run (None = unpartitioned).

    Ready assets that share a partitions definition (and their same-partitioned descendants in
    `keys`) run together, one run per partition key; a run contains only the assets that need
    that partition, so a fresh generation cell is never re-run because its verdicts are stale.
    """
    graph = defs.resolve_asset_graph()
    todo = set(keys)
    steps: list[RunPlanStep] = []
    by_name = lambda k: k.to_user_string()  # noqa: E731
    while todo:
        ready = [k for k in todo if not (graph.get(k).parent_keys & todo)]
        if not ready:
            raise RuntimeError(f"dependency cycle among {sorted(k.to_user_string() for k in todo)}")
        groups: dict[object, list[AssetKey]] = {}
        for k in sorted(ready, key=by_name):
            groups.setdefault(graph.get(k).partitions_def, []).append(k)
        pdef, group = next(iter(groups.items()))
        # Keep downstream assets of the same partitioning in the same runs (fewer runs).
        grew = True
        while grew:
            grew = False
            for k in sorted(todo - set(group), key=by_name):
                node = graph.get(k)
                if node.partitions_def == pdef and node.parent_keys & todo <= set(group):
                    group.append(k)
                    grew = True
        if pdef is None:
            steps.append(RunPlanStep(group, None))
        else:
            order = list(pdef.get_partition_keys())
            wanted = {k: set(order if partitions.get(k) is None else partitions[k]) for k in group}
            union = set().union(*wanted.values())
            for pk in [p for p in order if p in union]:
                steps.append(RunPlanStep([k for k in group if pk in wanted[k]], pk))
        todo -= set(group)
    return steps


def execute(defs: Definitions, steps: Sequence[RunPlanStep], instance: DagsterInstance,
            tags: dict[str, str] | None = None, echo=print) -> RunReport:
    assets = [a for a in defs.assets or [] if isinstance(a, (AssetsDefinition, SourceAsset))]
    assets += [c for c in (defs.asset_checks or [])]
    report = RunReport()
    for i, step in enumerate(steps, 1):
        t0 = time.perf_counter()
        echo(f"[{i}/{len(steps)}] materializing {step.label()}")
        result = materialize(
            assets, instance=instance, resources=defs.resources, partition_key=step.partition_key,
            run_config=QUIET_RUN_CONFIG,
            selection=AssetSelection.assets(*step.keys), raise_on_error=False, tags=tags or {},
        )
        dt = time.perf_counter() - t0
        report.steps.append((step, result.success, dt))
        if not result.success:
            echo(f"    FAILED after {dt:.1f}s: {_first_error(result)}")
        else:
            echo(f"    ok ({dt:.1f}s)")
    return report


def _first_error(result) -> str:
    for ev in result.all_events:
        if ev.is_failure and ev.step_failure_data and ev.step_failure_data.error:
            err = ev.step_failure_data.error
            return f"{ev.step_key}: {err.message.strip()}"
    return "see the run log in the Dagster UI"
