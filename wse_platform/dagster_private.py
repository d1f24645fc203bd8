"""The one place that reaches into Dagster's private modules.

Each name below has no public equivalent in the Dagster versions we support (see pyproject):
the stale-status resolver and partition threshold `wse status` mirrors, the asset graph view,
the materialization a runless check evaluation targets (`assets/sync.py`),
the data-version tag and provenance reader, resource/context introspection for config source
assets, the implicit asset job name, the workspace origin a CLI run needs to be re-executable
from the UI, and the SQLite event log storage's per-query connection (`SqliteEventLogStorage._connect`,
overridden by `ReusedEngineSqliteEventLogStorage`, named in the generated `dagster.yaml`).
`tests/platform/test_dagster_private.py` imports every name, so a Dagster upgrade
that moves one fails loudly there instead of deep inside a run.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import threading
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from typing import NamedTuple

from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster import AssetKey
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.decorator_utils import get_function_params
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME
from dagster._core.definitions.data_version import (DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus,
                                                    extract_data_provenance_from_entry)
from dagster._core.definitions.decorators.op_decorator import is_context_provided
from dagster._core.definitions.job_base import InMemoryJob  # execute_selection: execute_in_process's own steps
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.execution.execute_in_process import (core_execute_in_process, merge_run_tags,
                                                        type_check_and_normalize_args)
from dagster._core.definitions.events import AssetKeyPartitionKey  # the resolver's cause sort keys (status_replay)
from dagster._core.definitions.observe import observe
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
from dagster._core.definitions.resource_annotation import get_resource_args
from dagster._core.assets import AssetDetails
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME as INDEX_SHARD
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.workspace.load_target import WorkspaceFileTarget
from dagster._time import get_current_datetime

try:  # the threshold Dagster uses; fall back to its documented value
    from dagster._core.definitions.data_version import (
        SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD as PARTITION_THRESHOLD,
    )
except ImportError:  # pragma: no cover
    PARTITION_THRESHOLD = 100


# Modules a run imports lazily after the definitions are built (execution) and that `DagsterInstance.get()`
# imports in each new process (storage, secrets): the worker template imports them once before forking.
# Measured by the cpu256 helper: a forked worker's instance cost 1.5-2.9 CPU s without the last two, 0.3 s with them.
WORKER_WARM_MODULES = ("dagster._core.execution.api", "dagster._core.storage.base_storage",
                       "dagster._core.secrets.env_file",
                       # imported by a cell run before its first request (helper clistart, issue 24: ~0.06 CPU s per worker)
                       "dagster._core.executor.in_process", "dagster._core.storage.local_compute_log_manager")


class ReusedEngineSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log storage (same files, schema, rows, locking and retries), except that
    each database file's engine and its connection are kept for the process instead of being made for
    every query and every stored event.

    The stock storage builds a new SQLAlchemy engine per query and per stored event (`_connect`:
    `create_engine`, a new SQLite connection whose first statement parses the schema, the dialect's
    first-connect checks, close, `dispose`): ~2 ms of CPU each, ~18,000 times in a 3-cell
    `wse materialize` (issue 24 item 3; `bench/cell_overhead.py --profile`). Here one connection per
    file stays open (SQLAlchemy's `QueuePool`, the pool it uses for SQLite files by default), used
    under the storage's own lock as before; it is returned to the pool with a rollback, so it holds no
    transaction or lock between uses and other processes read and write the file as before. A file
    that was replaced or removed since (another inode at the path) gets a new engine; only the most
    recent `KEEP` run files keep theirs. `tests/platform/test_instance_storage.py` pins it.
    """

    KEEP = 16

    def __init__(self, base_dir: str, inst_data=None):
        self._engines: "OrderedDict[str, tuple[object, object]]" = OrderedDict()
        self._present: set[tuple[str, str]] = set()  # index columns and completed data migrations seen
        super().__init__(base_dir, inst_data=inst_data)
        _LIVE_STORAGES.add(self)

    def release_connections(self) -> None:
        """Close the kept connections now (new ones are made on the next query): the files are then
        as another process finds them, e.g. before `wse status` stamps them for its saved report (a
        held connection closing at exit would checkpoint the WAL after the stamp)."""
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1][0].dispose()

    # Dagster asks these before most index queries (a schema inspection or a query each time; `has_table`
    # before each stored check event, with a new engine of its own: ~12 % of a cell's `create_run`).
    # Tables, columns and completed migrations are only ever added, so a "yes" is remembered (until the
    # index file is replaced); a "no" is asked again.
    def has_asset_key_col(self, column_name: str) -> bool:
        return self._remember(("column", column_name), super().has_asset_key_col)

    def has_secondary_index(self, name: str) -> bool:
        return self._remember(("migration", name), super().has_secondary_index)

    def has_table(self, table_name: str) -> bool:  # asked per stored check event (a new engine each time)
        return self._remember(("table", table_name), super().has_table)

    def _remember(self, fact: tuple[str, str], ask) -> bool:
        if fact in self._present:
            return True
        if ask(fact[1]):
            self._present.add(fact)
            return True
        return False

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(inst_data=inst_data, **config_value)

    def _initdb(self, engine, for_index_shard=False) -> None:
        """Dagster's `_initdb` creates the tables and stamps the alembic revision when the database has no
        revision stamped, else does nothing; to tell, it loads every migration script of its alembic folder
        (`check_alembic_revision`: ~0.1 s of CPU) for each file a process opens first (the index, each other
        run's file it reads: ~0.2-0.3 s per cell run in a worker, issue 24). Here the stamp is read first (one
        query); a stamped file needs nothing, as Dagster finds; an unstamped (new) one, or any error, goes to
        Dagster's `_initdb` as before (`tests/platform/test_instance_storage.py`)."""
        from alembic.runtime.migration import MigrationContext

        try:
            with engine.connect() as conn:
                if MigrationContext.configure(conn).get_current_revision():
                    return
        except Exception:  # noqa: BLE001 - locked, unreadable...: Dagster's own handling (retries, errors)
            pass
        super()._initdb(engine, for_index_shard=for_index_shard)

    def _file_id(self, shard: str):
        try:
            st = os.stat(self.path_for_shard(shard))
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @contextmanager
    def _connect(self, shard: str):
        from sqlalchemy import create_engine
        from sqlalchemy.pool import QueuePool

        with self._db_lock:
            engine, file_id = self._engines.pop(shard, (None, None))
            if engine is not None and file_id != self._file_id(shard):
                engine.dispose()  # the file was replaced or removed: connect to what is at the path now
                engine = None
                if shard == INDEX_SHARD:
                    self._present.clear()
            if engine is None:
                if shard != INDEX_SHARD and shard not in self._initialized_dbs and self._from_template(shard):
                    self._initialized_dbs.add(shard)  # a copy of what `_initdb` makes: nothing to check
                engine = create_engine(self.conn_string_for_shard(shard), poolclass=QueuePool, pool_size=1,
                                       max_overflow=2, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS,
                                                                     "check_same_thread": False})
                if shard not in self._initialized_dbs:
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
                file_id = self._file_id(shard)
            self._engines[shard] = (engine, file_id)
            while len(self._engines) > self.KEEP:
                self._engines.popitem(last=False)[1][0].dispose()
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def dispose(self) -> None:
        self.release_connections()
        super().dispose()

    # A new run's database: a copy of an empty one that `_initdb` made (same DDL, WAL mode, alembic stamp),
    # instead of `_initdb` per run (an alembic revision check, the DDL, the stamp: ~17 % of a cell run's
    # `create_run`, issue 24 item 3). The empty database is made once per instance folder and per
    # `template_key()` (Dagster's version, the tables' DDL, the migration scripts), so an upgrade makes a
    # new one. `tests/platform/test_run_template.py` compares a copy with what `_initdb` makes.
    RUN_TEMPLATE = True  # False: `_initdb` for every run file, as Dagster does (bench/run_start_cost.py)

    def _from_template(self, shard: str) -> bool:
        """Create the file of run `shard` as a copy of the empty database; False (nothing done) if the
        file exists already (another process made it: `_initdb` checks it as before) or no copy can be made."""
        path = self.path_for_shard(shard)
        if not self.RUN_TEMPLATE or os.path.exists(path):
            return False
        template = self._run_template()
        if template is None:
            return False
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            shutil.copyfile(template, tmp)
            os.link(tmp, path)  # appears complete, or not at all; fails if another process made it meanwhile
            return True
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _run_template(self) -> str | None:
        """The empty run database of this Dagster (made now if missing), or None if it cannot be made."""
        if getattr(self, "_template", False) is not False:
            return self._template
        folder = os.path.join(self._base_dir, TEMPLATE_DIR)  # not `*.db` in base_dir: no run of Dagster's
        path = os.path.join(folder, f"{template_key()}.sqlite")
        self._template = path if os.path.exists(path) else _make_run_template(self, folder, path)
        return self._template


TEMPLATE_DIR = ".wse-run-template"


@functools.lru_cache(maxsize=1)
def template_key() -> str:
    """What an empty run database depends on: Dagster's version, the DDL of its event log tables and
    indexes (SQLite dialect) and the names of its migration scripts (the alembic stamp)."""
    import dagster
    import sqlalchemy
    from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
    from sqlalchemy.dialects import sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    dialect = sqlite.dialect()
    ddl = []
    for table in SqlEventLogStorageMetadata.sorted_tables:
        ddl.append(str(CreateTable(table).compile(dialect=dialect)))
        ddl.extend(sorted(str(CreateIndex(i).compile(dialect=dialect)) for i in table.indexes))
    scripts = os.path.join(os.path.dirname(dagster.__file__), "_core", "storage", "alembic", "versions")
    names = sorted(os.listdir(scripts)) if os.path.isdir(scripts) else []
    text = json.dumps([dagster.__version__, sqlalchemy.__version__, ddl, names])
    return f"{dagster.__version__}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _make_run_template(storage: SqliteEventLogStorage, folder: str, path: str) -> str | None:
    """Dagster's own `_initdb` on a new file outside the instance folder (no process holds it open, so
    closing it checkpoints its WAL into the file), then moved into place atomically."""
    import tempfile

    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    work = tempfile.mkdtemp(prefix="wse-run-template-")
    try:
        made = os.path.join(work, "run.db")
        engine = create_engine(f"sqlite:///{made}", poolclass=NullPool)
        try:
            storage._initdb(engine)
        finally:
            engine.dispose()
        if os.path.exists(made + "-wal") and os.path.getsize(made + "-wal"):
            return None  # not checkpointed into the file: a copy would lack the schema
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        shutil.copyfile(made, tmp)
        os.replace(tmp, path)  # concurrent makers write identical files; each move is atomic
        return path
    except Exception:  # noqa: BLE001 - no template: every run file is made by `_initdb` as before
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


_LIVE_STORAGES: "weakref.WeakSet[ReusedEngineSqliteEventLogStorage]" = weakref.WeakSet()


_ALEMBIC_MAPS: dict = {}   # (scripts folder, version locations, sourceless, recursive) -> alembic's RevisionMap


def share_alembic_revisions() -> None:
    """Alembic's revision map of a migration-scripts folder loaded once per process, not once per storage.

    Dagster's SQLite run, event log and schedule storages each check their schema revision (and a new
    instance stamps it) through a new `alembic.script.ScriptDirectory` every time, and each new one
    executes every revision file of Dagster's migration folder again to learn the head: 6 loads when a
    command creates a Dagster home (~0.4 s of CPU, issue 24: the workers' template does it at the start of
    a fleet run), 2-3 when it opens one. The map is read-only once built (the files are the installed
    package's); a `ScriptDirectory` for another folder or other version options gets its own. Idempotent."""
    from alembic.script import ScriptDirectory

    if getattr(ScriptDirectory.from_config, "_wse_shared", False):
        return
    made = ScriptDirectory.from_config.__func__

    def from_config(cls, config):
        script = made(cls, config)
        key = (script.dir, tuple(script.version_locations or ()), script.sourceless,
               script.recursive_version_locations)
        shared = _ALEMBIC_MAPS.setdefault(key, script.revision_map)
        script.revision_map = shared   # built on first use, then reused by every later ScriptDirectory
        return script

    from_config._wse_shared = True   # type: ignore[attr-defined]
    ScriptDirectory.from_config = classmethod(from_config)   # type: ignore[method-assign]


def release_event_log_connections() -> None:
    """`release_connections` on every reused-engine event log storage of this process."""
    for storage in list(_LIVE_STORAGES):
        storage.release_connections()


def latest_materialization_ids(instance, keys) -> dict:
    """{asset key: storage id of its newest materialization} for the `keys` that have one: the
    `last_materialization_storage_id` of `instance.get_asset_records(keys)`, read from the same rows
    without deserializing each stored materialization (its metadata: table schemas, column lineage),
    which was ~85 % of `status.event_marks` (issue 24 item 3). From each asset row only the stored
    record's `storage_id` and event timestamp are read (plain JSON); where the row holds no such record,
    or one older than the asset's latest wipe, the newest materialization after the wipe is looked up in
    the event log, as Dagster's `get_asset_records` then does (one grouped query for those keys).
    `tests/platform/test_materialization_ids.py` compares both over builds, a wipe and a rebuild."""
    from dagster import DagsterEventType

    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        return _ids_from_records(instance.get_asset_records(list(keys)))
    fresh, other = _materialization_rows(storage, list(keys))
    out = {key: head.storage_id for key, head in fresh.items()}
    if other:
        out.update(_newest_ids(storage, [k for k, _ in other], [d for _, d in other],
                               DagsterEventType.ASSET_MATERIALIZATION))
    return out


class MaterializationHead(NamedTuple):
    """What a check evaluation names of the materialization it checked (`AssetCheckEvaluationTargetMaterializationData`)."""
    storage_id: int
    run_id: str | None  # None only inside this module (a stored record without one)
    timestamp: float


def latest_materialization_heads(instance, keys) -> dict:
    """{asset key: `MaterializationHead` of its newest materialization} for the `keys` that have one: the
    storage id, run id and timestamp of `instance.get_asset_records(keys)`'s `last_materialization_record`,
    read from the same rows as plain JSON instead of deserializing each stored materialization (its metadata:
    table schemas, previews), as `latest_materialization_ids` does; where a row holds no readable record,
    or one older than the asset's latest wipe, from `get_asset_records` itself (`assets/sync.py`'s step
    hooks; `tests/platform/test_materialization_ids.py` compares both)."""
    storage = instance.event_log_storage
    keys = list(keys)
    if not keys:
        return {}
    out, other = {}, keys
    if isinstance(storage, SqlEventLogStorage):
        fresh, unread = _materialization_rows(storage, keys)
        out = {key: head for key, head in fresh.items() if head.run_id}
        other = [k for k, _ in unread] + [k for k, head in fresh.items() if not head.run_id]
    for record in instance.get_asset_records(other) if other else []:
        rec = record.asset_entry.last_materialization_record
        if rec is not None:
            out[record.asset_entry.asset_key] = MaterializationHead(rec.storage_id, rec.run_id, rec.timestamp)
    return out


def _materialization_rows(storage, keys: list) -> tuple[dict, list]:
    """The asset rows' newest materializations read as plain JSON: ({key: `MaterializationHead`, its
    run id None where the stored record has none}, [(key, asset details)] where the row holds no
    readable record or one older than the asset's latest wipe)."""
    fresh, other = {}, []
    for row in storage._fetch_asset_rows(asset_keys=keys):
        key = AssetKey.from_db_string(row["asset_key"])
        if not key:
            continue
        details = AssetDetails.from_db_string(row["asset_details"])
        wiped = details.last_wipe_timestamp if details else None
        head = _record_head(row["last_materialization"])
        if head is not None and (wiped is None or head.timestamp > wiped):
            fresh[key] = head
        else:
            other.append((key, details))
    return fresh, other


def run_materialized(instance, run_id: str, key) -> bool:
    """Whether run `run_id` recorded a materialization of `key`: one query on the run's events (asset key
    and event type columns), not the run's materialization records deserialized with their metadata
    (`assets/sync.py readers_of_new_calls`; `tests/platform/test_materialization_ids.py`)."""
    from dagster import DagsterEventType

    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        recs = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
        return any(r.event_log_entry.dagster_event.asset_key == key for r in recs)
    import sqlalchemy as db
    from dagster._core.storage.event_log.schema import SqlEventLogStorageTable as table
    from dagster._core.storage.sqlalchemy_compat import db_select

    query = db_select([table.c.id]).where(db.and_(
        table.c.run_id == run_id, table.c.asset_key == key.to_string(),
        table.c.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION.value)).limit(1)
    with storage.run_connection(run_id) as conn:
        return conn.execute(query).fetchone() is not None


def latest_observation_ids(instance, keys) -> dict:
    """{asset key: storage id of its newest observation} for the `keys` that have one (after the asset's
    latest wipe), in one grouped query on the event log's (asset key, event type, id) index: what
    `instance.fetch_observations(key, limit=1)` answers per key, one query (and asset-details lookup)
    each (`status.event_marks`, issue 24 item 3; `tests/platform/test_materialization_ids.py`)."""
    from dagster import DagsterEventType

    keys = list(keys)
    storage = instance.event_log_storage
    if not keys:
        return {}
    if not isinstance(storage, SqlEventLogStorage):
        found = {k: instance.fetch_observations(k, limit=1).records for k in keys}
        return {k: recs[0].storage_id for k, recs in found.items() if recs}
    return _newest_ids(storage, keys, storage._get_assets_details(keys), DagsterEventType.ASSET_OBSERVATION)


def _newest_ids(storage, keys: list, details: list, event_type) -> dict:
    """{key: max storage id of its `event_type` events after its latest wipe} (Dagster's own wipe filter)."""
    import sqlalchemy as db
    from dagster._core.storage.event_log.schema import SqlEventLogStorageTable as table
    from dagster._core.storage.sqlalchemy_compat import db_select

    query = db_select([table.c.asset_key, db.func.max(table.c.id)]).where(db.and_(
        table.c.asset_key.in_([k.to_string() for k in keys]), table.c.dagster_event_type == event_type.value))
    query = storage._add_assets_wipe_filter_to_query(query, details, keys)
    with storage.index_connection() as conn:
        rows = conn.execute(query.group_by(table.c.asset_key)).fetchall()
    return {AssetKey.from_db_string(key): sid for key, sid in rows if key and sid}


def _ids_from_records(records) -> dict:
    return {r.asset_entry.asset_key: r.asset_entry.last_materialization_storage_id for r in records
            if r.asset_entry.last_materialization_storage_id}


def _record_head(text):
    """The `MaterializationHead` (storage id, run id or None, event timestamp) of a serialized
    `EventLogRecord`, or None if `text` is not one."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    entry = value.get("event_log_entry") if isinstance(value, dict) and value.get("__class__") == "EventLogRecord" \
        else None
    sid, ts = value.get("storage_id") if entry else None, entry.get("timestamp") if isinstance(entry, dict) else None
    if isinstance(sid, int) and not isinstance(sid, bool) and isinstance(ts, (int, float)):
        run_id = entry.get("run_id")
        return MaterializationHead(sid, run_id if isinstance(run_id, str) and run_id else None, ts)
    return None


def latest_check_executions(instance, keys):
    """{check key: its latest execution record (planned or evaluated)} in one query (`assets/sync.py`).
    The instance has a per-key method only; its event log storage answers for many keys at once."""
    return instance.event_log_storage.get_latest_asset_check_execution_by_key(list(keys))


def check_history(instance, key, partition, limit: int):
    """The newest `limit` execution rows of check `key` for `partition` (None: the rows without one),
    newest first (`assets/sync_rebuilding.py`: the verdict a run's planned row hides)."""
    from dagster._core.storage.event_log.base import PartitionKeyFilter
    return instance.event_log_storage.get_asset_check_execution_history(
        key, limit=limit, partition_filter=PartitionKeyFilter(key=partition))


def shown_in_ui(instance, key):
    """(status, evaluation or None) the UI shows for check `key` as its GraphQL
    `executionForLatestMaterialization` resolves it (Dagster's own code: the latest row, kept only if
    it describes the newest materialization, a run's row also when that run wrote it); None when it
    shows no execution. status: IN_PROGRESS ("Running"), SUCCEEDED, FAILED, EXECUTION_FAILED, SKIPPED."""
    import asyncio

    from dagster._core.loader import LoadingContextForTest
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecord

    async def resolve():
        ctx = LoadingContextForTest(instance)
        rec = await AssetCheckExecutionRecord.gen(ctx, key)
        if rec is None or not await rec.targets_latest_materialization(ctx):
            return None
        return (await rec.resolve_status(ctx)).value, rec.evaluation
    return asyncio.run(resolve())



# The job of an asset selection, once per process (issue 24: run creation). `JobDefinition.execute_in_process`
# with `asset_selection` builds the selection's job (`as_ephemeral_job` -> `get_subset`), and the run's creation
# (`create_run_for_job`) subsets that job again, then takes both jobs' snapshots (`JobSnap.from_job_def`) and
# hashes them: ~0.2-0.3 s of CPU per cell run, the same every time for the same selection of the same job.
# `execute_selection` is that method with both jobs kept per (job, selection); the job of the run's creation is
# the kept job's `get_subset` of the same selection, kept too, so the run records the same job and execution plan
# snapshots (same ids, same lineage), tags, asset selection and partition as before
# (`tests/orchestration/test_selection_jobs.py` compares them with `execute_in_process`'s).
SELECTION_JOBS_KEEP = 8   # selections kept per job (a command's runs use one per kind of step)
_SELECTION_JOBS: "OrderedDict[int, tuple[object, OrderedDict]]" = OrderedDict()   # id(job) -> (job, {keys: job})


def selection_job(job, keys):
    """The ephemeral in-process job `job.execute_in_process(asset_selection=keys)` runs, kept for this process:
    made on first use (the `execute_in_process` way) with its subset of the same selection memoized."""
    selection = frozenset(keys)
    entry = _SELECTION_JOBS.get(id(job))
    if entry is None or entry[0] is not job:
        entry = _SELECTION_JOBS[id(job)] = (job, OrderedDict())
        while len(_SELECTION_JOBS) > 2:   # the definitions of an earlier command (tests)
            _SELECTION_JOBS.popitem(last=False)
    jobs = entry[1]
    made = jobs.get(selection)
    if made is None:
        _, _, asset_selection, resource_defs, _, input_values = type_check_and_normalize_args(
            asset_selection=list(keys))
        made = job.as_ephemeral_job(resource_defs=resource_defs, input_values=input_values,
                                    asset_selection=asset_selection)
        made.get_subset = _memoized_subset(made.get_subset)   # what `create_run_for_job` asks of it
        jobs[selection] = made
        while len(jobs) > SELECTION_JOBS_KEEP:
            jobs.popitem(last=False)
    return made


def _memoized_subset(get_subset):
    kept: dict = {}

    def subset(*, op_selection=None, asset_selection=None, asset_check_selection=None):
        key = (tuple(op_selection) if op_selection else None,
               frozenset(asset_selection) if asset_selection is not None else None,
               frozenset(asset_check_selection) if asset_check_selection is not None else None)
        if key not in kept:
            kept[key] = get_subset(op_selection=op_selection, asset_selection=asset_selection,
                                   asset_check_selection=asset_check_selection)
        return kept[key]
    return subset


def warm_selection(job, keys) -> None:
    """Make the kept job of `keys` and what a run's creation takes of it (both snapshots): in the worker
    template, before the workers are forked from it (`worker_template.warm_selections`)."""
    made = selection_job(job, keys)
    made.get_job_snapshot()
    made.get_subset(asset_selection=frozenset(keys)).get_job_snapshot()


def execute_selection(job, keys, *, instance, partition_key=None, run_config=None, tags=None,
                      raise_on_error=False):
    """`job.execute_in_process(run_config=..., instance=..., partition_key=..., raise_on_error=..., tags=...,
    asset_selection=keys)`, with the selection's job kept (`selection_job`). Same steps as Dagster's method."""
    run_config = dict(run_config or {})
    asset_selection = list(keys)
    ephemeral_job = selection_job(job, asset_selection)
    if partition_key and ephemeral_job.partitions_def:
        with partition_loading_context(dynamic_partitions_store=instance) as ctx:
            ephemeral_job.validate_partition_key(partition_key=partition_key,
                                                 selected_asset_keys=set(asset_selection), context=ctx)
    if not run_config and ephemeral_job.partitioned_config and partition_key:
        run_config = ephemeral_job.partitioned_config.get_run_config_for_partition_key(partition_key)
    return core_execute_in_process(
        job=InMemoryJob(job_def=ephemeral_job), run_config=run_config, instance=instance,
        output_capturing_enabled=True, raise_on_error=raise_on_error,
        run_tags=merge_run_tags(job_def=job, partition_key=partition_key, tags=tags,
                                asset_selection=asset_selection, instance=instance, run_config=run_config),
        run_id=None, asset_selection=frozenset(asset_selection))



class BatchedStaleStatusResolver(CachingStaleStatusResolver):
    """Dagster's stale-status resolver, with one query per (partitioned dependency, cursor) instead of
    one per dependency partition: `_is_dep_updated` asks, for every partition a materialization read
    (a final table reads every cell of several assets), for the dependency partition's newest record
    after the storage id the materialization's provenance names. Here the records of all partitions
    of that dependency after that storage id are read once (newest first, paged) and each partition's
    newest one is taken from them: the same record, so the same answer. A partition with a newer record
    then asks for the record before, as Dagster does. External (source) dependencies, which Dagster
    reads from observations, and a missing cursor: Dagster's own per-partition query. At most `BATCH`
    records are read per dependency and cursor (a table not rebuilt while its cells were, many times):
    a partition not among them asks Dagster's query."""

    BATCH = 1000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._after: dict[tuple, dict] = {}

    def _is_dep_updated(self, provenance, dep_key) -> bool:
        from dagster._core.definitions.data_version import extract_data_version_from_entry
        from dagster._core.storage.event_log.base import AssetRecordsFilter

        dep_asset = self.asset_graph.get(dep_key.asset_key)
        cursor = provenance.input_storage_ids.get(dep_key.asset_key) if dep_key.partition_key is not None else None
        if dep_key.partition_key is None or dep_asset.is_external or not cursor:
            return super()._is_dep_updated(provenance, dep_key)
        kept = self._after.get((dep_key.asset_key, cursor))
        if kept is None:
            res = self._instance.fetch_materializations(
                AssetRecordsFilter(asset_key=dep_key.asset_key, after_storage_id=cursor), limit=self.BATCH)
            newest: dict = {}
            for rec in res.records:  # newest first: a partition's first record is its newest
                newest.setdefault(rec.partition_key, rec)
            kept = self._after[(dep_key.asset_key, cursor)] = (newest, not res.has_more)
        newest, complete = kept
        updated_record = newest.get(dep_key.partition_key)
        if updated_record is None:
            # none after the cursor, or (more than BATCH records since) older than those read: Dagster's query
            return False if complete else super()._is_dep_updated(provenance, dep_key)
        previous_record = self._instance.get_latest_data_version_record(
            dep_key.asset_key, dep_asset.is_external, dep_key.partition_key, before_cursor=cursor + 1)
        previous_version = extract_data_version_from_entry(previous_record.event_log_entry) if previous_record else None
        return self._data_versions_differ(previous_version, extract_data_version_from_entry(updated_record.event_log_entry))


# ---- one target lookup per (asset, partition) in a check step ------------------------------------
# Dagster turns each AssetCheckResult of a partitioned step into an evaluation of the newest
# materialization of its asset's partition, looking that materialization up once per result
# (`AssetCheckResult._get_partitioned_target_materialization_data`: one event-log query each, 16 of the
# 22 data checks of a WSE cell step ask again about an asset already asked about).
_shared_targets = threading.local()
_TARGET_LOOKUP = "_get_partitioned_target_materialization_data"


def _memoized_target(original):
    @functools.wraps(original)
    def lookup(self, step_context, asset_key, partition_key):
        memo = getattr(_shared_targets, "memo", None)
        if memo is None:
            return original(self, step_context, asset_key, partition_key)
        key = (id(step_context.instance), step_context.run_id, asset_key, partition_key)
        if key not in memo:
            memo[key] = original(self, step_context, asset_key, partition_key)
        return memo[key]
    lookup.shares_targets = True
    return lookup


def newest_target(instance, run_id: str, asset_key, partition_key: str):
    """The newest materialization of (asset, partition), as the target Dagster gives a partitioned check
    result of run `run_id` (None: never built); in `check_targets_shared`, read once and shared with
    Dagster's own lookups for the step's results (the same query)."""
    from dagster import AssetRecordsFilter
    memo = getattr(_shared_targets, "memo", None)
    key = (id(instance), run_id, asset_key, partition_key)
    if memo is not None and key in memo:
        return memo[key]
    res = instance.fetch_materializations(AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition_key]),
                                          limit=1)
    mat = res.records[0] if res.records else None
    target = None if mat is None else AssetCheckEvaluationTargetMaterializationData(
        run_id=mat.event_log_entry.run_id, storage_id=mat.storage_id, timestamp=mat.timestamp)
    if memo is not None:
        memo[key] = target
    return target


@contextmanager
def check_targets_shared():
    """In this block (this thread: a check op yielding its results), Dagster looks up the materialization
    a partitioned check result describes once per (run, asset, partition), not once per result. The op's
    results are made while it is suspended at its yields, inside the block; what a run's check step
    describes is the newest materialization when the step reports its first result on that asset."""
    from dagster import AssetCheckResult
    method = getattr(AssetCheckResult, _TARGET_LOOKUP, None)  # tests/orchestration/test_checks.py pins it
    if method is not None and not getattr(method, "shares_targets", False):
        setattr(AssetCheckResult, _TARGET_LOOKUP, _memoized_target(method))
    outer = getattr(_shared_targets, "memo", None)
    _shared_targets.memo = {} if outer is None else outer
    try:
        yield
    finally:
        _shared_targets.memo = outer


__all__ = [
    "share_alembic_revisions",
    "AssetCheckEvaluationTargetMaterializationData", "check_history", "shown_in_ui", "AssetGraph", "AssetKeyPartitionKey", "AssetGraphView", "CachingStaleStatusResolver",
    "BatchedStaleStatusResolver",
    "DATA_VERSION_TAG", "IMPLICIT_ASSET_JOB_NAME",
    "PARTITION_THRESHOLD", "RemoteJobOrigin", "RemoteRepositoryOrigin", "ReusedEngineSqliteEventLogStorage",
    "SINGLETON_REPOSITORY_NAME", "StaleStatus",
    "TemporalContext", "WorkspaceFileTarget", "extract_data_provenance_from_entry", "get_current_datetime",
    "get_function_params", "get_resource_args", "is_context_provided", "latest_check_executions", "observe",
    "release_event_log_connections", "WORKER_WARM_MODULES", "latest_materialization_ids", "latest_observation_ids",
    "latest_materialization_heads", "MaterializationHead", "run_materialized",
    "template_key", "execute_selection", "selection_job", "warm_selection", "check_targets_shared", "newest_target",
]
