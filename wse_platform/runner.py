"""Launch materializations in-process, many partitions per process, stale-only when asked.

This is the Dagster entry layer (like `definitions.py`), not domain code. Each
`dagster asset materialize` call pays ~4 s of start-up; here one process plans the whole
selection and executes it run by run: unpartitioned assets once, partitioned ones per
partition key, in dependency order. Runs are recorded in the Dagster instance at
$DAGSTER_HOME, so the UI, staleness and `wse status` see them.
"""
from __future__ import annotations

import fnmatch
import os
import signal
import sys
import threading
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
from wse_platform.errors import InfrastructureError

# Written by a serializer (yaml.safe_dump), never by string formatting: a model name is a value,
# it can never become YAML structure (issue 23, item 1). Only this fixed header is text.
DAGSTER_YAML_HEADER = """\
# Written by wse-platform. Telemetry off; a run queue with per-backend concurrency limits
# (run tag `wse/backend`), so parallel cells respect each backend's limit.
# Under `wse ui`, the daemon fails runs whose process died (kill -9, OOM) instead of leaving them STARTED;
# `wse` commands do the same for their own in-process runs at start (runner.fail_orphaned_runs).
"""


def dagster_yaml(settings: Settings) -> str:
    """The text of `dagster.yaml` for `settings` (see `ensure_dagster_home`)."""
    import yaml

    # Runs the sensors/CLI launch carry `wse/backend`; backfills launched in the UI carry the
    # partition tag `dagster/partition/model`, limited per model by its backend's limit.
    entries = [("wse/backend", backend, n) for backend, n in sorted(settings.concurrency.items())]
    entries += [("dagster/partition/model", name, settings.concurrency[m.backend])
                for name, m in sorted(settings.models.items()) if m.backend in settings.concurrency]
    doc = {
        "telemetry": {"enabled": False},
        # Dagster's SQLite event log (same files), one engine per file and process (dagster_private.py)
        "event_log_storage": {"module": "wse_platform.dagster_private", "class": "ReusedEngineSqliteEventLogStorage",
                              "config": {"base_dir": str(Path(settings.dagster_home).absolute() / "history" / "runs")}},
        "run_monitoring": {"enabled": True, "start_timeout_seconds": 180, "max_resume_run_attempts": 0,
                           "poll_interval_seconds": 60},
        "run_coordinator": {
            # Dagster's QueuedRunCoordinator, marking a run's planned checks before queuing it (issue 21)
            "module": "assets.run_queue", "class": "MarkingRunCoordinator",
            "config": {"max_concurrent_runs": max(4, sum(settings.concurrency.values())),
                       "tag_concurrency_limits": [{"key": str(k), "value": str(v), "limit": int(n)}
                                                  for k, v, n in entries]}},
    }
    return DAGSTER_YAML_HEADER + yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, width=1_000_000)


GENERATED_MARK = "# Written by wse-platform"


def user_managed(cfg: Path) -> bool:
    """A `dagster.yaml` that wse-platform did not write (its first line is not our mark): the user's
    own instance configuration (storage on Postgres, a run launcher...), which we only read."""
    try:
        with cfg.open(encoding="utf-8", errors="replace") as f:
            return not f.readline().startswith(GENERATED_MARK)
    except FileNotFoundError:
        return False


def ensure_dagster_home(settings: Settings) -> Path:
    """Point $DAGSTER_HOME at a persistent instance (next to the warehouse) unless already set."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    cfg = home / "dagster.yaml"
    if user_managed(cfg):  # e.g. an instance on Postgres with a run launcher: never rewritten
        return home
    text = dagster_yaml(settings)
    if not cfg.exists() or cfg.read_text() != text:
        tmp = cfg.with_name(f".dagster.yaml.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, cfg)  # atomic: a process opening the instance never reads a half-written file
    return home


class InstanceBroken(InfrastructureError):
    """The Dagster instance at $DAGSTER_HOME cannot be opened; the message names it and gives the fix."""


def get_instance(settings: Settings) -> DagsterInstance:
    """The persistent instance, created and migrated by one process at a time.

    Two processes creating the SQLite storages at once can both stamp the schema and leave
    "more than one head" behind for good, so creation (and any migration Dagster does on open)
    runs under a file lock next to the instance; opening an existing instance takes the lock
    only for a moment. A broken instance is reported with the fix instead of a traceback.
    """
    from filelock import FileLock

    from dagster import AssetKey

    from wse_platform.instance_health import check_files, explain

    home = settings.dagster_home
    try:
        home.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(home / ".wse-instance.lock"), timeout=300)
        lock.acquire()
    except OSError as err:  # a full or read-only disk or folder: named as such (instance_health)
        raise InstanceBroken(explain(home, err) or f"cannot use the Dagster home {home}: {err}") from err
    try:
        try:
            ensure_dagster_home(settings)  # dagster.yaml is (re)written under the lock too
        except OSError as err:
            raise InstanceBroken(explain(home, err) or f"cannot write {home / 'dagster.yaml'}: {err}") from err
        if problem := check_files(home):  # before Dagster silently re-creates an emptied file
            raise InstanceBroken(problem)
        from wse_platform.dagster_private import share_alembic_revisions
        share_alembic_revisions()   # each storage's schema check reads Dagster's migration scripts once per process
        try:
            instance = DagsterInstance.get()
            # touch every storage so that any creation/migration happens here, under the lock
            instance.get_runs(limit=1)
            instance.get_latest_materialization_event(AssetKey("wse_instance_probe"))
            instance.all_instigator_state()
        except Exception as err:  # noqa: BLE001 - any failure to open is reported the same way
            if cause := explain(home, err):
                raise InstanceBroken(cause) from err
            raise InstanceBroken(
                f"the Dagster instance at {home} cannot be opened: {type(err).__name__}: "
                f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}\n"
                "  It holds only run history and materialization records (the warehouse and the LLM cache "
                "are separate files and are not affected).\n"
                f"  fix: move it aside (mv {home} {home}.broken) and run `wse materialize` without --stale "
                "(the record of what was built goes with it; cached LLM answers are reused)") from err
    finally:
        lock.release()
    fail_orphaned_runs(instance)
    return instance


def warehouse_problem(settings: Settings, defs: Definitions | None = None,
                      instance: DagsterInstance | None = None) -> str | None:
    """Why the warehouse cannot back what the Dagster instance says is built (None: no problem).

    Staleness comes from the instance's records, which survive a truncated or deleted warehouse
    file; without this check `wse status` would call such a warehouse fresh.
    """
    from wse_platform.warehouse import Warehouse, WarehouseError

    try:
        Warehouse(settings.warehouse).check_readable()
    except WarehouseError as err:
        return str(err)
    if defs is not None and instance is not None and (not settings.warehouse.exists()
                                                      or Warehouse(settings.warehouse).is_empty_file()):
        built = [k.to_user_string() for k in materializable(defs) if instance.get_latest_materialization_event(k)]
        if built:
            return (f"the warehouse file {settings.warehouse} does not exist (or is empty), but the Dagster "
                    f"instance at {os.environ.get('DAGSTER_HOME')} records {len(built)} assets as built "
                    f"(e.g. {built[0]}): their tables are gone.\n  fix: rebuild with `wse materialize` "
                    "(without --stale: the run history still lists them as built; cached LLM answers are reused)")
    return None


# Runs log to the instance (UI) in full; the terminal only shows warnings and our own progress.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class RunPlanStep:
    """One in-process run: a set of assets sharing a partitions definition, for one partition (or none)."""
    keys: list[AssetKey]
    partition_key: str | None
    tags: dict[str, str] = field(default_factory=dict)  # this run's own tags (progress.TAG: its planned requests)

    def label(self) -> str:
        names = ", ".join(k.to_user_string() for k in self.keys)
        return f"[{self.partition_key}] {names}" if self.partition_key else names


@dataclass
class RunReport:
    steps: list[tuple[RunPlanStep, bool, float]] = field(default_factory=list)
    interrupted_by: str | None = None  # signal name when SIGINT/SIGTERM stopped the command
    stopped_by: str | None = None  # the infrastructure failure that stopped the command (run_guard)
    first_failure: str | None = None  # `step: cause` of the first failed run, on one line

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


def expand_multi_assets(defs: Definitions, keys: Sequence[AssetKey]) -> tuple[list[AssetKey], list[str]]:
    """`keys` plus the other outputs of every multi-asset that cannot run partially (they are
    written by one computation), and a note naming what was added and why."""
    by_key = materializable(defs)
    out, notes, seen = list(keys), [], set(keys)
    for k in keys:
        a = by_key[k]
        missing = [s for s in a.keys if s not in seen] if not a.can_subset else []
        if missing:
            out += missing
            seen |= set(missing)
            names = ", ".join(sorted(x.to_user_string() for x in a.keys))
            notes.append(f"{k.to_user_string()} is computed together with "
                         f"{', '.join(sorted(m.to_user_string() for m in missing))} (one step writes {names}); "
                         "selected them too")
    return out, notes


def observable_sources(defs: Definitions) -> list:
    return [a for a in defs.assets or []
            if (isinstance(a, SourceAsset) and a.is_observable)
            or (isinstance(a, AssetsDefinition) and a.is_observable and not a.is_materializable
                and not any(s.tags.get("wse/file_source") for s in a.specs))]  # recorded with the config versions


def observe_sources(defs: Definitions, instance: DagsterInstance) -> list[str]:
    """Record the current data versions of the config assets (and of any observable source);
    returns the keys that changed.

    Config fingerprints are computed in-process and only changed partitions are recorded
    (runless materializations, `assets.versioning`), so an unchanged config costs a few queries,
    not one run per source. Observable sources: changed partitions as runless observations; one
    whose observe function needs a context or resources is observed with a regular run.
    """
    from wse_platform.dagster_private import observe  # public `observe` is not re-exported

    from assets.versioning import record_config_versions

    changed = record_config_versions(instance, list(defs.assets or []))
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


def source_versions(src) -> dict[str | None, str] | None:
    """Current data version(s) of an observable source, by partition (None = unpartitioned);
    None when the observe function needs a context or resources (then observe it with a run)."""
    from dagster import DataVersion, DataVersionsByPartition, ObserveResult
    from wse_platform.dagster_private import get_function_params, get_resource_args, is_context_provided

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


def changed_observations(instance: DagsterInstance, src, current: dict[str | None, str]) -> list:
    """AssetObservation events for the partitions of `src` whose data version differs from the last one."""
    from dagster import AssetObservation
    from wse_platform.dagster_private import DATA_VERSION_TAG

    def last(pk):
        rec = instance.get_latest_data_version_record(src.key, is_source=True, partition_key=pk)
        return rec.asset_observation.tags.get(DATA_VERSION_TAG) if rec and rec.asset_observation else None

    return [AssetObservation(asset_key=src.key, partition=pk, tags={DATA_VERSION_TAG: v})
            for pk, v in current.items() if last(pk) != v]


def _parents(graph, key: AssetKey) -> set[AssetKey]:
    """Parents of `key`, looking through external assets (`llm_calls` is written by the LLM
    assets upstream of it, so `llm_usage` runs after them)."""
    out: set[AssetKey] = set()
    frontier = list(graph.get(key).parent_keys)
    while frontier:
        p = frontier.pop()
        if p in out or not graph.has(p):
            continue
        out.add(p)
        if not graph.get(p).is_materializable:
            frontier.extend(graph.get(p).parent_keys)
    return out


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
        ready = [k for k in todo if not (_parents(graph, k) & todo)]
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
                ups = _parents(graph, k)
                # not in the same run as what writes an external table it reads (no edge orders them there)
                if (node.partitions_def == pdef and ups & todo <= set(group)
                        and not (ups - node.parent_keys) & set(group)):
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
            tags: dict[str, str] | None = None, echo=print, guard=None) -> RunReport:
    """Run the steps in order. SIGINT/SIGTERM stop the whole sequence (see `StopOnSignal`); so does
    an infrastructure failure, and a run reading an asset that failed is skipped (`run_guard`)."""
    from wse_platform.instance_sqlite import install
    from wse_platform.procs import freeze_long_lived
    from wse_platform.run_guard import RunGuard, first_failure

    if instance.root_directory:  # cheaper SQLite commits for the runs' events (instance_sqlite.py)
        install(instance.root_directory)
    guard = guard or RunGuard(defs)
    freeze_long_lived()  # the definitions are loaded: the garbage collector's scans leave them out (procs.py)
    report = RunReport()
    with StopOnSignal() as stop:
        for i, step in enumerate(steps, 1):
            if stop.signal_name or guard.stopped:
                break
            if moved := guard.config_recorded_elsewhere():
                guard.stopped = moved
                break
            if skip := guard.skip_reason(step):
                echo(f"[{i}/{len(steps)}] skipped {step.label()}: {skip}")
                guard.mark_failed(step)
                report.steps.append((step, False, 0.0))
                continue
            t0 = time.perf_counter()
            echo(f"[{i}/{len(steps)}] materializing {step.label()}")
            result = run_in_location(defs, step, instance, tags or {})
            dt = time.perf_counter() - t0
            report.steps.append((step, result.success, dt))
            guard.after(step, result)
            interrupted = _interrupted(result)
            if interrupted:
                echo(f"    INTERRUPTED after {dt:.1f}s (the run is recorded as failed)")
            elif not result.success:
                report.first_failure = report.first_failure or first_failure(result)
                echo(f"    FAILED after {dt:.1f}s: {first_failure(result)}")
            else:
                echo(f"    ok ({dt:.1f}s)")
            if interrupted and not stop.signal_name:
                stop.signal_name = "an interrupt"  # seen by Dagster before our watcher counted it
            if note := guard.config_note():
                echo(f"note: {note}")
        report.interrupted_by = stop.signal_name
    if report.interrupted_by:
        echo(f"interrupted by {report.interrupted_by}: stopped after {len(report.steps)} of {len(steps)} runs "
             f"(an interrupted run is recorded as failed); {len(steps) - len(report.steps)} not started")
    elif guard.stopped:
        report.stopped_by = guard.stopped
    if report.stopped_by and len(steps) > len(report.steps):
        echo(f"stopped: none of the {len(steps) - len(report.steps)} remaining runs was started; fix the cause "
             "below and rerun (`wse materialize --stale` runs what is missing)")
    return report


_INTERRUPT_ERRORS = ("DagsterExecutionInterruptedError", "KeyboardInterrupt")


def _interrupted(result) -> bool:
    """Whether Dagster's own interrupt handling ended this run (its handler, not ours, is active in a run)."""
    for ev in result.all_events:
        data = ev.step_failure_data if ev.is_step_failure else None
        if data and data.error and data.error.cls_name in _INTERRUPT_ERRORS:
            return True
    return False


class StopOnSignal:
    """First SIGINT/SIGTERM: start no further run; the run in progress is interrupted by Dagster's
    own handler (which replaces ours during a run) and recorded as failed. Second: exit at once.

    Signals are counted through `signal.set_wakeup_fd`, which CPython feeds from its C-level
    handler whichever Python handler is installed, so a second signal is seen even while
    Dagster's handler is active or the step is stuck in native code; a watcher thread then
    calls `os._exit`. Does nothing outside the main thread (signals only reach that one).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, echo=None):
        self.count = 0
        self.signal_name: str | None = None
        self._echo = echo or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self._active = False

    def __enter__(self) -> "StopOnSignal":
        if threading.current_thread() is not threading.main_thread():
            return self
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._old_handlers = {s: signal.getsignal(s) for s in self.SIGNALS}
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        for s in self.SIGNALS:
            signal.signal(s, self._handler)
        self._active = True
        threading.Thread(target=self._watch, name="wse-signal-watch", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        signal.set_wakeup_fd(self._old_fd)
        for s, h in self._old_handlers.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        os.close(self._w)  # the watcher sees end-of-file and stops
        self._active = False

    @staticmethod
    def _handler(signum, frame) -> None:
        """Between runs: nothing to do here; the watcher counts the signal via the wakeup fd."""

    def _watch(self) -> None:
        try:
            while data := os.read(self._r, 64):
                for signum in data:
                    if signum in self.SIGNALS:
                        self.note(signal.Signals(signum))
        finally:
            os.close(self._r)

    def note(self, signum: signal.Signals) -> None:
        with self._lock:
            self.count += 1
            first = self.signal_name is None
            if first:
                self.signal_name = signal.Signals(signum).name
            count = self.count
        if count >= 2 and self._active:
            self._echo(f"{signal.Signals(signum).name} again: exiting now")
            os._exit(128 + int(signum))
        if first:
            self._echo(f"{self.signal_name}: stopping — the current run is interrupted and recorded as failed, "
                       "no further run starts (send it again to exit at once)")


WORKSPACE_FILE = Path(__file__).resolve().parents[1] / "workspace.yaml"
PID_TAG, HOST_TAG, PSTART_TAG = "wse/pid", "wse/host", "wse/process_start"


def _process_start(pid: int) -> str | None:
    """The kernel's start time of a process (guards against a reused pid); None if unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_tags() -> dict[str, str]:
    import socket
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    start = _process_start(os.getpid())
    if start:
        tags[PSTART_TAG] = start
    return tags


def _alive(pid: int, start: str | None) -> bool:
    """The run's process still lives: the pid exists and, when its start time was noted, is the same process."""
    from wse_platform.procs import pid_alive
    return pid_alive(pid) and (start is None or _process_start(pid) in (None, start))


def fail_orphaned_runs(instance: DagsterInstance) -> list[str]:
    """Mark failed the in-process runs of `wse` commands whose process is gone (killed with -9):
    they would otherwise stay STARTED for ever. Returns their run ids."""
    import socket

    from dagster import DagsterRunStatus, RunsFilter

    active = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]
    host, failed = socket.gethostname(), []
    for rec in instance.get_run_records(RunsFilter(statuses=active, tags={HOST_TAG: host})):
        run = rec.dagster_run
        pid = run.tags.get(PID_TAG)
        if not pid or not pid.isdigit() or _alive(int(pid), run.tags.get(PSTART_TAG)):
            continue
        instance.report_run_failed(run, f"the process running it (pid {pid} on {host}) is gone, e.g. killed: "
                                        "marked failed by the next `wse` command")
        failed.append(run.run_id)
    return failed


def _remote_origin(job_name: str):
    """The origin `wse ui` (dagster dev -w workspace.yaml) gives this job, so the UI finds the job of a
    CLI run in its code location: the run shows its asset selection and can be re-executed there."""
    from wse_platform.dagster_private import (SINGLETON_REPOSITORY_NAME, RemoteJobOrigin, RemoteRepositoryOrigin,
                                              WorkspaceFileTarget)

    from wse_platform.inputs import files_stamp

    # read once per process while the file stays the same (it was read and parsed for every run)
    stamp = (files_stamp([WORKSPACE_FILE]), job_name)
    if stamp in _ORIGINS:
        return _ORIGINS[stamp]
    origins = WorkspaceFileTarget(paths=[str(WORKSPACE_FILE)]).create_origins()
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(origins[0], SINGLETON_REPOSITORY_NAME), job_name) if origins else None
    _ORIGINS.clear()
    _ORIGINS[stamp] = origin
    return origin


_ORIGINS: dict = {}   # (the workspace file's `files_stamp`, job name) -> the origin `_remote_origin` made


def run_in_location(defs: Definitions, step: RunPlanStep, instance: DagsterInstance, tags: dict[str, str]):
    """One in-process run of `step` as a run of the code location's implicit asset job
    (`__ASSET_JOB`, which `wse ui` loads), not of an ephemeral job the UI does not know.

    Dagster's in-process execution creates the run without a code-location origin; the origin
    is added at creation (`create_run_for_job` of this instance object only), which is what the
    UI's "Re-execute" needs (tests/orchestration/test_cli_runs.py pins it).
    """
    import functools

    job = defs.resolve_implicit_global_asset_job_def()
    origin = _remote_origin(job.name)
    tags = {**tags, **step.tags, **process_tags()}
    from assets.sync_rebuilding import saying_rebuilding  # `in_sync` stays visible from the run's creation
    from wse_platform.dagster_private import execute_selection

    original = instance.create_run_for_job
    create = functools.partial(original, remote_job_origin=origin) if origin is not None else original
    instance.create_run_for_job = saying_rebuilding(create, defs.resolve_asset_graph, instance)  # type: ignore[method-assign]
    try:
        # `job.execute_in_process(asset_selection=...)` with the selection's job kept for the process (dagster_private)
        return execute_selection(job, list(step.keys), run_config=QUIET_RUN_CONFIG, instance=instance,
                                 partition_key=step.partition_key, raise_on_error=False, tags=tags)
    finally:
        del instance.create_run_for_job  # back to the class's method



def _first_error(result) -> str:
    """`step: cause` of a failed run's first failed step (kept for callers of the old name)."""
    from wse_platform.run_guard import first_failure
    return first_failure(result)


def select_keys(defs, patterns: list[str] | None):
    """The materializable assets `wse materialize --select <patterns>` names (globs on the asset name or
    `group:<name>`; none: all), multi-assets completed (notes on stderr); exits when nothing matches.
    Here, not in `cli`, so the worker template can plan with it without importing the CLI module (a
    process started as `python -m wse_platform.cli` would warn in every worker)."""
    keys = list(materializable(defs))
    if not patterns:
        return keys
    graph = defs.resolve_asset_graph()
    chosen = []
    for k in keys:
        name = k.to_user_string()
        group = graph.get(k).group_name
        if any(fnmatch.fnmatch(name, p) or p == f"group:{group}" for p in patterns):
            chosen.append(k)
    if not chosen:
        raise SystemExit(f"error: --select {patterns} matches no asset")
    chosen, notes = expand_multi_assets(defs, chosen)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return chosen
