# usage: PYTHONPATH=$PWD python bench/status_batched_ab.py CELLS REPS /tmp/some-new-dagster-home
"""A/B in one process: the status computation after one cell run with new data (the tables over every
cell recomputed), with Dagster's resolver (old) vs BatchedStaleStatusResolver (new), interleaved;
the saved status is restored before each computation so both recompute the same partitions."""
import os, sys, shutil, time, json
from pathlib import Path
from dagster import (AssetKey, DagsterInstance, DataVersion, Definitions, MaterializeResult,
                     StaticPartitionsDefinition, asset, materialize)
from wse_platform import status
from wse_platform.dagster_private import CachingStaleStatusResolver, BatchedStaleStatusResolver

N = int(sys.argv[1]); REPS = int(sys.argv[2])
CELLS = StaticPartitionsDefinition([f"c{i:03d}" for i in range(N)])
B = [0]
def mk(name, deps):
    @asset(name=name, partitions_def=CELLS, deps=deps, code_version="1")
    def a() -> MaterializeResult:
        B[0] += 1
        return MaterializeResult(data_version=DataVersion(str(B[0])))
    return a
gen = mk("gen", []); judge = mk("judge", [gen]); score = mk("score", [judge]); usage = mk("usage", [gen])
parts = [gen, judge, score, usage]
tables = []
for i in range(6):
    @asset(name=f"table{i}", deps=parts, code_version="1")
    def t() -> None: return None
    tables.append(t)
defs = Definitions(assets=parts + tables)
home = Path(sys.argv[3]); shutil.rmtree(home, ignore_errors=True); home.mkdir(parents=True)
(home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
from dagster._core.instance.ref import InstanceRef
inst = DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
for pk in CELLS.get_partition_keys():
    materialize(parts, instance=inst, partition_key=pk)
materialize(tables, instance=inst)
status.compute_status(defs, inst, only_problems=False)
materialize(parts, instance=inst, partition_key="c001")  # one cell run, new data
cache = home / status.STATUS_CACHE
saved = cache.read_bytes()
asks = [0]
real = DagsterInstance.get_latest_data_version_record
def spy(self, *a, **k):
    asks[0] += 1
    return real(self, *a, **k)
DagsterInstance.get_latest_data_version_record = spy
cpu = {"old": [], "new": []}; q = {}; rows = {}
for rep in range(REPS):
    for name in (("old", "new") if rep % 2 == 0 else ("new", "old")):
        cache.write_bytes(saved); status._saved_here.clear()
        status.BatchedStaleStatusResolver = CachingStaleStatusResolver if name == "old" else BatchedStaleStatusResolver
        asks[0] = 0
        t0 = time.process_time()
        r = status.compute_status(defs, inst, only_problems=False)
        cpu[name].append(time.process_time() - t0); q[name] = asks[0]; rows[name] = r
assert rows["old"] == rows["new"], "verdicts differ"
med = lambda xs: sorted(xs)[len(xs) // 2]
print(f"cells {N}: old median CPU {med(cpu['old']):.3f} s ({q['old']} get_latest_data_version_record), "
      f"new {med(cpu['new']):.3f} s ({q['new']}); ratio {med(cpu['new'])/med(cpu['old']):.2f}; same rows: yes; "
      f"stale rows {sum(x.status=='stale' for x in rows['new'])}")
