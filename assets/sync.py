"""`in_sync`: the `wse status` verdict as a check on every asset, so the UI is not green when a cell is stale.

Dagster computes no unsynced status for a partitioned asset as a whole (its graph, catalog and
"Materialize unsynced" call such an asset up to date: dagster-io/dagster#20463, #22553), and it
never passes an upstream's staleness on to what is built from it. Every materializable asset
therefore carries a warning check `in_sync` that fails when any of its materialized partitions is
stale or incomplete by the rule of `wse status` (`wse_platform/status.py`), listing them with
their causes, e.g. `ncp_cell_config[...]: has a new data version (ncp-gen › t_max: 1 → 2)`. The UI
then shows the asset with a failed (yellow) check on the graph, in the catalog and on its page.

The check is asset-level, not partitioned: Dagster (1.13) stores a runless evaluation of a
*partitioned* check once per partition only (a second one breaks a unique index; pinned in
tests/platform/test_dagster_private.py), and the sensor below must report again and again.

One function (`verdict`) decides, in three places:
- in the step that materializes the asset, right after it (a success hook on every materializable
  asset, `with_own_check`): a runless evaluation of the materialization the step just wrote, so
  the UI never shows a rebuilt asset without a verdict on its newest materialization, nor the run's
  *planned* ("Running", no text) evaluation once the asset is built. Runless, not the run's own
  check result: Dagster stores a run's evaluation in the row its plan inserted when the run was
  created, so a verdict the sensor reported meanwhile (a newer row) would hide it;
- in the run's `sync_checks` step (after its assets): the run's planned evaluations get the verdict
  the hook reported (copied, nothing recomputed), and the step reports the verdicts its rebuild
  changed on other assets (downstream of it), so a run leaves no asset showing a verdict older than
  the run (not computed when the rebuild changed nothing: the same data versions, its assets in sync
  before and after, `rebuilt_as_before`);
- in the `sync_status` sensor (every 30 s), when the verdict differs from the latest evaluation
  (a config or prompt edit, an upstream rebuild, a code change, an edit undone, an asset built
  before this check existed), or when the latest is a run's planned evaluation (the UI would show
  "Running" with no text until the asset is built): a runless evaluation of the asset's newest
  materialization. Dagster ties a check result to the materialization it checked, so the next
  rebuild supersedes it. Where the latest row is a run's planned evaluation (or its "rebuilding"
  mark) and that run is in flight, the verdict goes into that run's row, marked, instead
  (`assets/sync_rebuilding.py in_run`): a runless row would describe the materialization before, and
  the UI hides such a row from the moment the run writes the asset until its hook has said the verdict.
A hand-written sensor: an automation condition could request check runs, but only when a *direct*
dependency changed, and only as runs; staleness travels down the whole lineage, and the status
computation already knows it (incrementally: a few queries when nothing changed).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetCheckResult, AssetCheckSeverity, AssetCheckSpec,
                     AssetChecksDefinition, AssetKey, AssetRecordsFilter, AssetsDefinition,
                     DefaultSensorStatus, HookContext, MetadataValue, SensorEvaluationContext, SensorResult,
                     multi_asset_check, sensor, success_hook)

from assets.automation import LazyGraph, named
from wse_platform.dagster_private import (DATA_VERSION_TAG, AssetCheckEvaluationTargetMaterializationData, AssetGraph,
                                          latest_check_executions, latest_materialization_heads,
                                          latest_materialization_ids, run_materialized)
from wse_platform.status import INCOMPLETE, MISSING, STALE, CellStatus, compute_status, event_marks

IN_SYNC = "in_sync"
PARTITION_TAG = "dagster/partition"  # the run's partition key (Dagster's tag on a partitioned run)
SENSOR = "sync_status"
OUT_OF_SYNC = (STALE, INCOMPLETE)
DESCRIPTION = ("Every materialized partition is in sync with what it was built from: no config, prompt, code "
               "version or upstream partition changed since (the rule of `wse status`). Fails (warning) naming "
               "the stale partitions and their causes, and the incomplete ones (built before some upstream "
               "partitions existed); `wse materialize --stale` and the `wse_automation` sensor rebuild them.")
MAX_LISTED = 10  # out-of-sync partitions named in the description; all of them are in the metadata


def verdict(rows: Sequence[CellStatus]) -> tuple[bool, str, dict]:
    """(passed, description, metadata) of `in_sync` for one asset, from its status rows (one per
    partition; an unpartitioned asset has one)."""
    built = [r for r in rows if r.status != MISSING]
    out = [r for r in built if r.status in OUT_OF_SYNC]
    meta = {"materialized_partitions": len(built), "stale_partitions": sum(r.status == STALE for r in out),
            "incomplete_partitions": sum(r.status == INCOMPLETE for r in out)}
    flat = len(rows) == 1 and rows[0].partition is None
    if not built:
        return False, "no materialization of this asset is recorded", meta
    if not out:
        n = len(built)
        return True, ("in sync with its inputs" if flat else "its one materialized partition is in sync with its "
                      "inputs" if n == 1 else f"all {n} materialized partitions are in sync with their inputs"), meta
    todo = "rebuild with `wse materialize --stale` (under `wse ui` the `wse_automation` sensor does)"
    if flat:
        lines = [f"{c}" for c in out[0].causes]
        head = f"{out[0].status}: {todo}"
    else:
        lines = [f"{r.partition}: {r.status}" + "".join(f"; {c}" for c in r.causes) for r in out]
        head = f"{len(out)} of {len(built)} materialized partitions out of sync: {todo}"
    shown = lines[:MAX_LISTED] + ([f"… and {len(lines) - MAX_LISTED} more (metadata `out_of_sync`)"]
                                  if len(lines) > MAX_LISTED else [])
    meta["out_of_sync"] = MetadataValue.md("\n".join(f"- {line}" for line in lines))
    return False, "\n".join([head, *(f"- {line}" for line in shown)]), meta


def status_by_asset(graph: AssetGraph, instance, marks: dict | None = None,
                    assets: Sequence[AssetKey] | None = None, resolver=None) -> dict[str, list[CellStatus]]:
    """Every materializable asset's status rows (the `wse status` computation, incremental); with
    `assets`, those assets' rows (what is downstream of them is not computed)."""
    out: dict[str, list[CellStatus]] = {}
    for r in compute_status(graph, instance, only_problems=False, marks=marks, assets=assets, resolver=resolver):
        out.setdefault(r.asset, []).append(r)
    return out


def _evaluation(key: AssetKey, rec, judged: tuple) -> AssetCheckEvaluation:
    """The runless `in_sync` evaluation of materialization `rec` of `key` (a record, or a
    `MaterializationHead`: its storage id, run id and timestamp); `judged` = `verdict(rows)`."""
    passed, description, meta = judged
    target = AssetCheckEvaluationTargetMaterializationData(storage_id=rec.storage_id, run_id=rec.run_id,
                                                           timestamp=rec.timestamp)
    return AssetCheckEvaluation(asset_key=key, check_name=IN_SYNC, passed=passed, severity=AssetCheckSeverity.WARN,
                                description=description, metadata=meta, target_materialization_data=target)


def report_own_verdicts(graph: AssetGraph, instance, run_id: str, keys: Sequence[AssetKey]) -> list:
    """Report `in_sync` on the materializations run `run_id` has just written of `keys` (a step's
    assets), as runless evaluations: the newest row, so the UI shows it at once, whatever the sensor
    reported while the run was planned or in flight. The status computed is that of these assets,
    the run's other assets of the same partitioning and their ancestors. Returns the evaluations."""
    # storage id, run and time of each newest materialization, without deserializing the records
    built = {key: head for key, head in latest_materialization_heads(instance, keys).items() if head.run_id == run_id}
    if not built:
        return []
    # what is downstream of them (the run's later steps, the tables) is left pending for the next
    # computation, which recomputes just the partitions that read what changed
    asked = sorted(built, key=lambda k: k.to_user_string())
    marks = event_marks(graph, instance)
    rows = status_by_asset(graph, instance, marks, assets=asked,
                           resolver=RunResolver.for_hook(graph, instance, run_id, asked, marks))
    events = [_evaluation(key, rec, verdict(rows.get(key.to_user_string(), [])))
              for key, rec in sorted(built.items(), key=lambda kv: kv[0].to_user_string())]
    for ev in events:
        instance.report_runless_asset_event(ev)
    return events


class RunResolver:
    """One stale-status resolver for the step hooks of one run (in this process, one after the other),
    instead of one per hook: Dagster's resolver caches every record it reads, and each hook of a run
    asks about the same ancestors again (the sources, the configs, the earlier steps' assets).

    Reused only while nothing it may have read changed: every asset the earlier hooks' computation
    covered (their assets and all their ancestors, any partition: a hook also recomputes other
    partitions whose inputs changed) has the same event marks (`event_marks`: the newest
    materialization and observation ids, read by the hook anyway) as at the previous hook. A step's
    own new materializations are of assets no earlier hook covered (steps run in topological order).
    Another run writing a covered asset meanwhile (another cell of the same asset, a source), another
    run, graph or instance: a new resolver, as before."""
    _kept: RunResolver | None = None  # the latest run's, in this process

    def __init__(self, graph: AssetGraph, instance, run_id: str):
        from wse_platform.status import _resolver
        self.graph, self.instance, self.run_id = graph, instance, run_id
        self.resolver = _resolver(graph, instance)
        self.covered: set[str] = set()
        self.marks: Mapping[str, list[int]] = {}

    @classmethod
    def for_hook(cls, graph: AssetGraph, instance, run_id: str, keys: Sequence[AssetKey], marks: Mapping):
        """The resolver for the hook of run `run_id` about to compute the status of `keys` (and their
        ancestors), `marks` = `event_marks` read just now."""
        kept = cls._kept
        if kept is None or not kept.still_valid(graph, instance, run_id, marks):
            kept = cls._kept = cls(graph, instance, run_id)
        for key in keys:
            kept.covered |= {k.to_user_string() for k in (key, *graph.get_ancestor_asset_keys(key))}
        kept.marks = marks
        return kept.resolver

    def still_valid(self, graph: AssetGraph, instance, run_id: str, marks: Mapping) -> bool:
        return (self.run_id == run_id and self.graph is graph and self.instance is instance
                and all(marks.get(a) == self.marks.get(a) for a in self.covered))


def with_own_check(objs: list, graph: LazyGraph) -> list:
    """Every materializable asset's step reports its `in_sync` right after it succeeds (a success
    hook: same process, before the run's next step), so no rebuilt asset waits for the run's
    `sync_checks` step or the sensor's next tick to show a verdict on what it just wrote."""
    out = []
    for o in objs:
        if isinstance(o, AssetsDefinition) and not isinstance(o, AssetChecksDefinition) and o.is_materializable:
            keys = sorted(o.keys, key=lambda k: k.to_user_string())

            @success_hook(name=f"{IN_SYNC}_of_{o.node_def.name}")
            def own_verdict(context: HookContext, keys=keys) -> None:
                report_own_verdicts(graph.resolved(), context.instance, context.run_id, keys)

            o = o.with_hooks({own_verdict})
        out.append(o)
    return out


def _reported_by_run(instance, keys: Sequence[AssetKey], run_id: str) -> dict[AssetKey, AssetCheckEvaluation]:
    """The evaluations the assets' step hooks reported in this run, where that is the latest one and
    checked the asset's newest materialization (two queries for all the assets)."""
    latest = latest_check_executions(instance, [AssetCheckKey(k, IN_SYNC) for k in keys])
    newest = latest_materialization_ids(instance, keys)
    out = {}
    for check_key, record in latest.items():
        ev = record.evaluation
        target = ev.target_materialization_data if isinstance(ev, AssetCheckEvaluation) else None
        if target is not None and target.run_id == run_id and newest.get(check_key.asset_key) == target.storage_id:
            out[check_key.asset_key] = ev
    return out


def build_checks(objs: list, graph: LazyGraph) -> list:
    """One subsettable `multi_asset_check` with an `in_sync` spec per materializable asset: a run
    resolves those of the assets it materialized, in one step (with the verdicts the assets' own
    steps reported; computed here for an asset whose step reported none)."""
    specs = [AssetCheckSpec(IN_SYNC, asset=s.key, description=DESCRIPTION, blocking=False)
             for o in objs if isinstance(o, AssetsDefinition) and o.is_materializable for s in o.specs]

    @multi_asset_check(name="sync_checks", specs=specs, can_subset=True,
                       description="`in_sync` of the assets a run materialized (the `wse status` verdict).")
    def sync_checks(context):
        keys = sorted(context.selected_asset_check_keys, key=lambda k: k.asset_key.to_user_string())
        said = _reported_by_run(context.instance, [k.asset_key for k in keys], context.run.run_id)
        todo = [k.asset_key for k in keys if k.asset_key not in said]
        # only the run's assets and their ancestors: a cell run does not recompute the final tables' status
        rows = status_by_asset(graph.resolved(), context.instance, assets=todo) if todo else {}
        after: dict[AssetKey, bool] = {}
        for key in keys:
            ev = said.get(key.asset_key)
            passed, description, meta = ((ev.passed, ev.description, ev.metadata) if ev is not None
                                         else verdict(rows.get(key.asset_key.to_user_string(), [])))
            after[key.asset_key] = passed
            yield AssetCheckResult(asset_key=key.asset_key, check_name=IN_SYNC, passed=passed,
                                   severity=AssetCheckSeverity.WARN, description=description, metadata=meta)
        # what this run's rebuild changed elsewhere (downstream assets, ...): said now, not at the
        # sensor's next tick (up to 30 s later); nothing to say after a rebuild that changed nothing
        g, pk = graph.resolved(), context.run.tags.get(PARTITION_TAG)
        own = {k.asset_key.to_user_string() for k in context.selected_asset_check_keys}
        if not rebuilt_as_before(context.instance, context.run.run_id,
                                 {k: pk if g.get(k).partitions_def is not None else None for k in after}, after):
            report_changed_verdicts(g, context.instance, skip=own)
        else:  # the calls it recorded (cache hits too) are a new version of `llm_calls`: its readers only
            readers = readers_of_new_calls(g, context.instance, context.run.run_id)
            if readers:
                report_changed_verdicts(g, context.instance, skip=own, assets=readers)
    return [sync_checks]


def readers_of_new_calls(graph: AssetGraph, instance, run_id: str) -> list[AssetKey]:
    """The built assets that read `llm_calls` (`llm_usage`) when run `run_id` recorded calls in it
    (`assets/core.py`'s `mark_llm_calls`): a rebuild `rebuilt_as_before` still changed their inputs."""
    from assets.core import LLM_CALLS
    key = AssetKey(LLM_CALLS)
    if not graph.has(key):
        return []
    # the run's own materializations (its event log), not the newest few of `llm_calls`: any number
    # of other runs may have recorded calls since
    if not run_materialized(instance, run_id, key):
        return []
    children = [c for c in graph.get(key).child_keys if graph.get(c).is_materializable]
    built = [r.asset_entry.asset_key for r in instance.get_asset_records(children) if r.asset_entry.last_materialization]
    return sorted(built, key=lambda k: k.to_user_string())


def rebuilt_as_before(instance, run_id: str, partition: Mapping[AssetKey, str | None],
                      after: Mapping[AssetKey, bool]) -> bool:
    """This run's rebuild cannot have changed another asset's `in_sync` verdict: each asset it
    materialized (`after`: asset -> its verdict now) passes now and passed before the run (its latest
    evaluation not made by this run), and its materialization (of `partition[asset]`, None for an
    unpartitioned asset) replaced one
    with the same data version. Other assets read data versions and their upstreams' status only,
    so the status computation for them (the final tables read every cell) is skipped: a cell rerun
    whose answers all come from the cache. Conservative: anything else (a new data version or
    partition, a verdict that was or is failing, no data version) returns False. A few queries per asset."""
    if not after or not all(after.values()):
        return False
    for key in after:
        found = AssetRecordsFilter(asset_key=key, asset_partitions=[partition[key]] if partition.get(key) else None)
        recs = instance.fetch_materializations(found, limit=2).records  # the newest 4 only if the run built it twice
        if len(recs) == 2 and recs[1].run_id == run_id:
            recs = instance.fetch_materializations(found, limit=4).records
        if not recs or recs[0].run_id != run_id:
            return False
        before = next((r for r in recs if r.run_id != run_id), None)
        if before is None:  # first build of this partition, or built more than 3 times in this run
            return False
        versions = [(r.asset_materialization.tags or {}).get(DATA_VERSION_TAG) for r in (recs[0], before)]
        if versions[0] is None or versions[0] != versions[1]:
            return False
        if not _passed_before(instance, key, run_id):
            return False
    return True


def _passed_before(instance, key: AssetKey, run_id: str) -> bool:
    """The latest `in_sync` evaluation of `key` not made by run `run_id` (nor by its steps' hooks) passed."""
    for rec in instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(key, IN_SYNC), limit=6):
        ev = rec.evaluation
        if rec.run_id == run_id or not isinstance(ev, AssetCheckEvaluation):
            continue
        target = ev.target_materialization_data
        if target is not None and target.run_id == run_id:
            continue
        return bool(ev.passed)
    return False


def report_changed_verdicts(graph: AssetGraph, instance, skip: set[str],
                            assets: Sequence[AssetKey] | None = None) -> int:
    """Report the `in_sync` verdicts that differ from the latest evaluation (as the sensor does),
    except for the assets in `skip` (those the calling run evaluates itself); with `assets`, of those
    assets and what their status computation covers (their ancestors). Returns how many."""
    in_flight: list = []
    events, _ = sync_events(graph, instance, {}, skip=skip, in_flight=in_flight, assets=assets)
    for ev in events:
        instance.report_runless_asset_event(ev)
    record_in_runs(instance, in_flight)
    return len(events) + len(in_flight)


def record_in_runs(instance, in_flight: Sequence[tuple]) -> None:
    """Record `sync_events`' verdicts for runs in flight in those runs' rows."""
    from assets.sync_rebuilding import in_run  # imports this module
    for run, ev in in_flight:
        in_run(instance, run, ev)


def _digest(newest: int, passed: bool, description: str) -> str:
    return hashlib.sha256(json.dumps([newest, passed, description]).encode()).hexdigest()[:16]


def _already_said(record, newest: int, passed: bool, description: str) -> bool:
    """The latest `in_sync` evaluation is this verdict, on the asset's newest materialization.

    While a run that will evaluate the check is in flight, the latest record is its *planned*
    evaluation (no verdict, no target): nothing said yet about the materialization that exists, so
    the verdict is reported on it now (the run's own evaluation supersedes it when it finishes)."""
    ev = record.evaluation if record is not None else None
    if not isinstance(ev, AssetCheckEvaluation):  # None, or AssetCheckEvaluationPlanned (run in flight)
        return False
    from assets.sync_rebuilding import unmarked  # said again marked "rebuilding in run …" by a run: the same verdict
    target = ev.target_materialization_data
    return (target is not None and target.storage_id == newest and ev.passed == passed
            and unmarked(ev.description or "") == description)


def sync_events(graph: AssetGraph, instance, seen: Mapping[str, str], skip: set[str] = frozenset(),
                in_flight: list | None = None,
                assets: Sequence[AssetKey] | None = None) -> tuple[list, dict[str, str]]:
    """The `in_sync` evaluations to report now, and the new sensor state.

    For each materialized asset, the verdict on its newest materialization is compared with the
    latest `in_sync` evaluation (from its run, or reported here before) and reported if it differs.
    `seen`: asset -> digest of (newest materialization, verdict) at the previous tick; an asset whose
    digest is unchanged is not looked up again (one query per changed asset, none when nothing changed).
    `in_flight` (a list): where the latest row is a run's planned evaluation or its "rebuilding" mark
    and that run is in flight, the verdict goes there as (run, evaluation marked as that run's) to be
    recorded in the run's row (`sync_rebuilding.in_run`), not in the returned runless events: a runless
    row of the materialization before would blank the check once the run has written the asset."""
    from assets.sync_rebuilding import marked  # imports this module
    marks = event_marks(graph, instance)
    events: list = []
    state: dict[str, str] = {}
    by_asset = status_by_asset(graph, instance, marks, assets=assets)
    runs_rows = _rows_of_runs(instance, [a for a in by_asset if marks.get(a, [0])[0] and a not in skip])
    runs: dict[str, object] = {}
    for asset, rows in by_asset.items():
        newest = marks.get(asset, [0])[0]
        if not newest:
            continue
        passed, description, meta = verdict(rows)
        state[asset] = _digest(newest, passed, description)
        planned = asset in runs_rows and not isinstance(runs_rows[asset].evaluation, AssetCheckEvaluation)
        if (seen.get(asset) == state[asset] and not planned) or asset in skip:
            continue
        key = AssetKey.from_user_string(asset)
        latest = runs_rows.get(asset) or instance.get_latest_asset_check_evaluation_record(AssetCheckKey(key, IN_SYNC))
        if _already_said(latest, newest, passed, description):
            continue
        res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
        rec = res.records[0] if res.records else None
        if rec is None or rec.storage_id != newest:  # built again meanwhile: that run says, else the next tick
            state.pop(asset)
            continue
        run = _in_flight(instance, runs, runs_rows[asset].run_id) if in_flight is not None and asset in runs_rows \
            else None
        if run is not None:
            in_flight.append((run, _evaluation(key, rec, marked(run.run_id, passed, description, meta))))
        else:
            events.append(_evaluation(key, rec, (passed, description, meta)))
    return events, state


def _in_flight(instance, runs: dict, run_id: str):
    """Run `run_id` if it is queued or in progress (looked up once per call of `sync_events`)."""
    if run_id not in runs:
        run = instance.get_run_by_id(run_id)
        runs[run_id] = run if run is not None and not run.is_finished else None
    return runs[run_id]


def _rows_of_runs(instance, assets: Sequence[str]) -> dict:
    """asset -> its latest `in_sync` row where that is a run's planned evaluation or the run's
    "rebuilding" mark (one query for all). A planned row: the UI shows "Running" with no text there
    until the asset is built, so the sensor says the verdict on the materialization that exists even if
    it said it before the run was planned."""
    from assets.sync_rebuilding import rebuilding_text  # imports this module
    keys = [AssetCheckKey(AssetKey.from_user_string(a), IN_SYNC) for a in assets]
    latest = latest_check_executions(instance, keys) if keys else {}
    return {k.asset_key.to_user_string(): rec for k, rec in latest.items()
            if rec.run_id and (not isinstance(rec.evaluation, AssetCheckEvaluation)
                               or (rec.evaluation.description or "").startswith(rebuilding_text(rec.run_id, "")))}


def build_sensor(graph: LazyGraph):
    @sensor(name=SENSOR, minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING,
            description="Reports the `in_sync` check (the `wse status` verdict) of every asset whose verdict changed "
                        "without a run (a config edit, an upstream rebuild): Dagster shows a partitioned asset green "
                        "whatever its partitions' status, and never passes staleness downstream.")
    def sync_status(context: SensorEvaluationContext):
        seen = json.loads(context.cursor) if context.cursor else {}
        in_flight: list = []
        events, state = sync_events(graph.resolved(), context.instance, seen, in_flight=in_flight)
        record_in_runs(context.instance, in_flight)
        said = [*events, *(ev for _, ev in in_flight)]
        return SensorResult(asset_events=events, cursor=json.dumps(state, sort_keys=True),
                            skip_reason=reported_note(said) if said else "no in_sync verdict changed")
    return sync_status


def reported_note(events: Sequence[AssetCheckEvaluation]) -> str:
    """The tick's line in the UI's tick history: which verdicts it reported (Dagster files a tick that
    requested no run as skipped, by default "Sensor function returned an empty result")."""
    failed = [e.asset_key.to_user_string() for e in events if not e.passed]
    passed = [e.asset_key.to_user_string() for e in events if e.passed]
    parts = [f"{len(x)} {word}: {named(x)}" for x, word in ((failed, "failed"), (passed, "passed")) if x]
    return f"reported `{IN_SYNC}` of {len(events)} assets (no run to request): " + "; ".join(parts)


def build(objs: list) -> tuple[list, list, list]:
    """(`objs` with each asset's own `in_sync` hook, the `in_sync` check op, [the `sync_status`
    sensor]) for the assets in `objs`."""
    from assets import sync_rebuilding  # the verdict kept visible while a run rebuilds (imports this module)
    graph = LazyGraph(objs)
    return with_own_check(objs, graph), build_checks(objs, graph), [build_sensor(graph),
                                                                     *sync_rebuilding.build_sensors(graph)]
