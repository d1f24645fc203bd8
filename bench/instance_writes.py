"""What `wse_platform.instance_sqlite` and the reused-engine event log storage save: Dagster runs
against a fresh SQLite instance, without and with them.

Each round starts three fresh processes: `off` (Dagster's stock instance), `on` (with
`instance_sqlite.install`) and `engines` (also the event log storage the generated `dagster.yaml`
names, `dagster_private.ReusedEngineSqliteEventLogStorage`); each
materializes a chain of three trivial assets into its own `DagsterInstance.local_temp` once
(warm-up), then `--runs` times, and reports wall and CPU seconds per run (each run stores ~40
events: run creation, steps, materializations). Rounds alternate the order; medians are printed.

    python bench/instance_writes.py [--rounds 3] [--runs 8]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, tempfile, time
from dagster import DagsterInstance, asset, materialize

@asset
def a1() -> None: return None

@asset(deps=[a1])
def a2() -> None: return None

@asset(deps=[a2])
def a3() -> None: return None

home = tempfile.mkdtemp(dir=sys.argv[3])
if sys.argv[1] == "engines":
    open(home + "/dagster.yaml", "w").write(
        "event_log_storage:\n  module: wse_platform.dagster_private\n  class: ReusedEngineSqliteEventLogStorage\n"
        f"  config:\n    base_dir: {home}/history/runs\n")
if sys.argv[1] in ("on", "engines"):
    from wse_platform.instance_sqlite import install
    install(home)
with DagsterInstance.local_temp(home) as inst:
    materialize([a1, a2, a3], instance=inst)
    n = int(sys.argv[2])
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        materialize([a1, a2, a3], instance=inst)
    print(json.dumps({"wall": (time.perf_counter() - t) / n, "cpu": (time.process_time() - c) / n}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=8)
    args = ap.parse_args()
    modes = ("off", "on", "engines")
    out: dict[str, list[dict]] = {m: [] for m in modes}
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_DISABLE_TELEMETRY": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                res = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.runs), tmp], env=env,
                                     capture_output=True, text=True, check=True)
                out[mode].append(json.loads(res.stdout.strip().splitlines()[-1]))
                print(f"round {r + 1} {mode:>7}: {out[mode][-1]['wall']:.3f} s wall, {out[mode][-1]['cpu']:.3f} s CPU "
                      "per run", flush=True)
    for mode in modes:
        print(f"median {mode:>7}: {statistics.median(x['wall'] for x in out[mode]):.3f} s wall, "
              f"{statistics.median(x['cpu'] for x in out[mode]):.3f} s CPU per run")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
