"""Two per-cell costs of a run's start (issue 24 item 3), A/B in one process, CPU seconds:

- `create`: `instance.create_run_for_job` of one cell's run (the run's event log database, its planned
  events) as now (each new run file a copy of the empty database, `RUN_TEMPLATE = True`; the index's
  tables asked once, `has_table` remembered), with Dagster's `_initdb` per run file, and as before
  (`_initdb` per run file, `has_table` asked with a new engine per stored check event), interleaved;
- `marks`: `status.event_marks` (each cell run's hooks compute `in_sync` ~4 times) as now (only the
  storage ids, `dagster_private.latest_materialization_ids`) and as before (`get_asset_records`, every
  stored materialization deserialized), interleaved, after checking both give the same marks.

It works in a copy of a folder made by `bench/cell_overhead.py --fresh` (the original is not written):

    python bench/cell_overhead.py --fresh --cells 3 --workdir /tmp/cell-x     # once: the folder
    python bench/run_start_cost.py /tmp/cell-x [--n 20]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def _old_marks(graph, instance) -> dict:
    """`status.event_marks` as it was before `latest_materialization_ids`."""
    keys = list(graph.toposorted_asset_keys)
    marks = {k.to_user_string(): [0, 0] for k in keys}
    for record in instance.get_asset_records(keys):
        entry = record.asset_entry
        marks[entry.asset_key.to_user_string()][0] = entry.last_materialization_storage_id or 0
    for key in keys:
        if graph.get(key).is_observable:
            found = instance.fetch_observations(key, limit=1).records
            marks[key.to_user_string()][1] = found[0].storage_id if found else 0
    return marks


def _interleaved(n: int, variants: dict) -> dict:
    cpu = dict.fromkeys(variants, 0.0)
    names = list(variants)
    for i in range(n):
        for name in (names if i % 2 == 0 else names[::-1]):
            t = time.process_time()
            variants[name]()
            cpu[name] += time.process_time() - t
    return {k: v / n for k, v in cpu.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--n", type=int, default=20, help="calls of each variant (default 20)")
    args = ap.parse_args()
    from cell_overhead import copy_folder
    cfg = copy_folder(args.folder, "run-start-cost-")
    work = cfg.parent
    os.environ["DAGSTER_HOME"] = str(work / "dagster_home")
    try:
        return _measure(cfg, args.n)
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def _measure(cfg: Path, n: int) -> int:
    from cell_overhead import cells_of
    from dagster import DagsterInstance

    from wse_platform import status
    from wse_platform.dagster_private import ReusedEngineSqliteEventLogStorage
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import QUIET_RUN_CONFIG

    defs = build_definitions(str(cfg))
    graph = defs.resolve_asset_graph()
    instance = DagsterInstance.get()
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")

    new, old = status.event_marks(graph, instance), _old_marks(graph, instance)
    assert new == old, "the marks differ"
    per = _interleaved(n, {"now (storage ids)": lambda: status.event_marks(graph, instance),
                           "before (get_asset_records)": lambda: _old_marks(graph, instance)})
    print(f"event_marks over {len(new)} assets, {n} calls each, CPU ms per call: "
          + ", ".join(f"{k} {v * 1000:.1f}" for k, v in per.items()))

    cell = cells_of(cfg, 1)[0]
    job = defs.resolve_implicit_global_asset_job_def()
    keys = [k for k in graph.toposorted_asset_keys if graph.get(k).partitions_def is not None
            and graph.get(k).is_materializable and graph.get(k).partitions_def.has_partition_key(cell)]
    subset = job.get_subset(asset_selection=set(keys))

    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
    remembered = ReusedEngineSqliteEventLogStorage.has_table

    def create(template: bool, remember: bool = True):
        ReusedEngineSqliteEventLogStorage.RUN_TEMPLATE = template
        ReusedEngineSqliteEventLogStorage.has_table = remembered if remember else SqliteEventLogStorage.has_table
        instance.create_run_for_job(subset, run_config=QUIET_RUN_CONFIG, asset_selection=frozenset(keys),
                                    tags={"dagster/partition": cell})
    create(True)  # the empty database is made once, not in the figures
    create(False)
    per = _interleaved(n, {"now": lambda: create(True),
                           "_initdb per run": lambda: create(False),
                           "before (_initdb per run, has_table asked each time)": lambda: create(False, False)})
    ReusedEngineSqliteEventLogStorage.RUN_TEMPLATE = True
    ReusedEngineSqliteEventLogStorage.has_table = remembered
    print(f"create_run_for_job of cell {cell} ({len(keys)} assets), {n} runs each, CPU ms per run: "
          + ", ".join(f"{k} {v * 1000:.1f}" for k, v in per.items()))
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
