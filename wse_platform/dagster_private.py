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

import os
import weakref
from collections import OrderedDict
from contextlib import contextmanager

from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.decorator_utils import get_function_params
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME
from dagster._core.definitions.data_version import (DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus,
                                                    extract_data_provenance_from_entry)
from dagster._core.definitions.decorators.op_decorator import is_context_provided
from dagster._core.definitions.events import AssetKeyPartitionKey  # the resolver's cause sort keys (status_replay)
from dagster._core.definitions.observe import observe
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
from dagster._core.definitions.resource_annotation import get_resource_args
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin
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
                       "dagster._core.secrets.env_file")


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

    # Dagster asks these before most index queries (a schema inspection or a query each time). Columns
    # and completed migrations are only ever added, so a "yes" is remembered (until the index file is
    # replaced); a "no" is asked again.
    def has_asset_key_col(self, column_name: str) -> bool:
        return self._remember(("column", column_name), super().has_asset_key_col)

    def has_secondary_index(self, name: str) -> bool:
        return self._remember(("migration", name), super().has_secondary_index)

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


_LIVE_STORAGES: "weakref.WeakSet[ReusedEngineSqliteEventLogStorage]" = weakref.WeakSet()


def release_event_log_connections() -> None:
    """`release_connections` on every reused-engine event log storage of this process."""
    for storage in list(_LIVE_STORAGES):
        storage.release_connections()


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


__all__ = [
    "AssetCheckEvaluationTargetMaterializationData", "check_history", "shown_in_ui", "AssetGraph", "AssetKeyPartitionKey", "AssetGraphView", "CachingStaleStatusResolver",
    "DATA_VERSION_TAG", "IMPLICIT_ASSET_JOB_NAME",
    "PARTITION_THRESHOLD", "RemoteJobOrigin", "RemoteRepositoryOrigin", "ReusedEngineSqliteEventLogStorage",
    "SINGLETON_REPOSITORY_NAME", "StaleStatus",
    "TemporalContext", "WorkspaceFileTarget", "extract_data_provenance_from_entry", "get_current_datetime",
    "get_function_params", "get_resource_args", "is_context_provided", "latest_check_executions", "observe",
    "release_event_log_connections", "WORKER_WARM_MODULES",
]
