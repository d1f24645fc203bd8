"""The tail of a fleet command, alone: the final tables rebuilt over a finished `bench/fleet.py` folder.

Copies `<workdir>/<benchmark>` (left by `python bench/fleet.py --workdir <workdir> ...`) and runs
`python -m wse_platform.cli materialize --select group:<benchmark>_tables [--parallel P]` in the copy
`--repeat` times (no model server: the tables read the warehouse only), printing per run the wall
time, the CPU seconds of the whole process tree (`fleet.TreeCpu`: worker processes forked by the
fork server included) and the load average. Run from the repository root:

    python bench/fleet_tail.py /tmp/wse-fleet-x --benchmark ncp [--parallel 4] [--repeat 2]

`--breakdown` reruns nothing: it reads the finished fleet folder's run history (the instance's run and event
log SQLite files) and prints where the command's time after the fleet's last answer went, against that answer:
the runs still going then (the last cell: its remaining steps, their asset checks and hooks), the hand-off to the
final tables' runs, each of their steps, and the command's end after the last run (`command.json`, written by
`bench/fleet.py`; the closing status check and the exit):

    python bench/fleet_tail.py /tmp/wse-fleet-x --benchmark wse --breakdown
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import REPO, TreeCpu, read_sequences  # noqa: E402


def _epoch(ts) -> float:
    """An event log / run storage time stamp (a naive UTC 'YYYY-MM-DD HH:MM:SS.ffffff' string or epoch seconds)."""
    from datetime import datetime, timezone
    if isinstance(ts, (int, float)):
        return float(ts)
    return datetime.fromisoformat(ts).replace(tzinfo=timezone.utc).timestamp()


def tail_runs(folder: Path) -> tuple[float, list[dict]]:
    """(the fleet's last answer (epoch s), the runs that ended after it, in start order): per run its id,
    partition (None: an unpartitioned run, e.g. the final tables), start, end and steps
    [(step, start, success, the step's hook done)], times in seconds after the last answer."""
    import sqlite3
    last = max(q["e"] for q in read_sequences(folder / "sequences.jsonl"))
    hist = folder / "dagster_home" / "history"
    con = sqlite3.connect(f"file:{hist / 'runs.db'}?mode=ro", uri=True)
    part = dict(con.execute("SELECT run_id, value FROM run_tags WHERE key = 'dagster/partition'").fetchall())
    runs = []
    for rid, start, end in con.execute("SELECT run_id, start_time, end_time FROM runs WHERE end_time IS NOT NULL"):
        if end < last:
            continue
        ev = sqlite3.connect(f"file:{hist / 'runs' / (rid + '.db')}?mode=ro", uri=True)
        steps: dict[str, list] = {}
        for ts, kind, step in ev.execute("SELECT timestamp, dagster_event_type, step_key FROM event_logs "
                                         "WHERE step_key IS NOT NULL AND dagster_event_type IN "
                                         "('STEP_START', 'STEP_SUCCESS', 'STEP_FAILURE', 'HOOK_COMPLETED') ORDER BY id"):
            t = _epoch(ts) - last
            row = steps.setdefault(step, [step, None, None, None])
            if kind == "STEP_START":
                row[1] = t
            elif kind == "HOOK_COMPLETED":
                row[3] = t
            else:
                row[2] = t
        ev.close()
        runs.append({"run_id": rid, "partition": part.get(rid), "start": start - last, "end": end - last,
                     "steps": [tuple(r) for r in steps.values()]})
    con.close()
    return last, sorted(runs, key=lambda r: r["start"])


def breakdown(folder: Path) -> str:
    """The command's time after the fleet's last answer, from the run history (see the module doc)."""
    last, runs = tail_runs(folder)
    lines = []
    cmd = json.loads((folder / "command.json").read_text()) if (folder / "command.json").exists() else None
    if cmd:
        lines.append(f"command: {cmd['t0'] - last:+.2f} s .. {cmd['t1'] - last:+.2f} s after the last answer")
    for r in runs:
        lines.append(f"run {r['run_id'][:8]} {r['partition'] or '(unpartitioned)'}: {r['start']:+.2f} .. {r['end']:+.2f}")
        for step, start, done, hook in r["steps"]:
            if done is None or done < 0:
                continue
            lines.append(f"    {step:34s} {max(start or 0.0, 0.0):+6.2f} .. {done:+6.2f}  {done - max(start or 0.0, 0.0):5.2f} s"
                         + (f"  (hook {hook - done:.2f} s)" if hook is not None and hook >= done else ""))
    cells = [r for r in runs if r["partition"] is not None]
    tables = [r for r in runs if r["partition"] is None and r["start"] > 0]
    parts = {}
    if cells:
        parts["last_cell_finish_s"] = max(r["end"] for r in cells)
    if tables:
        first_step = min((s[1] for r in tables for s in r["steps"] if s[1] is not None), default=None)
        if cells and first_step is not None:
            parts["handoff_to_tables_s"] = first_step - parts["last_cell_finish_s"]
        if first_step is not None:
            parts["tables_s"] = max(r["end"] for r in tables) - first_step
    if cmd and runs:
        parts["after_last_run_s"] = cmd["t1"] - last - max(r["end"] for r in runs)
        parts["after_last_answer_s"] = cmd["t1"] - last
    lines.append(json.dumps({k: round(v, 2) for k, v in parts.items()}))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description="the final tables of a finished fleet folder, timed")
    ap.add_argument("workdir")
    ap.add_argument("--benchmark", default="wse")
    ap.add_argument("--parallel", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--breakdown", action="store_true",
                    help="no rerun: the fleet run's own time after its last answer, from its run history")
    args = ap.parse_args()
    if args.breakdown:
        print(breakdown(Path(args.workdir) / args.benchmark))
        return 0
    src = Path(args.workdir) / args.benchmark
    for n in range(args.repeat):
        folder = Path(tempfile.mkdtemp(prefix="wse-tail-")) / args.benchmark
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("*.lock"))
        text = (folder / "wse.yaml").read_text().replace(str(src), str(folder))
        (folder / "wse.yaml").write_text(text)
        env = {**os.environ, "DAGSTER_HOME": str(folder / "dagster_home"), "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "wse_platform.cli", "--config", str(folder / "wse.yaml"), "materialize",
               "--select", f"group:{args.benchmark}_tables", *(("--parallel", str(args.parallel)) if args.parallel else ())]
        load0, t0 = os.getloadavg()[0], time.time()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tree = TreeCpu(proc.pid)
        out = proc.communicate()[0]
        cpu = tree.total()
        print(json.dumps({"benchmark": args.benchmark, "run": n, "rc": proc.returncode, "parallel": args.parallel,
                          "wall_s": round(time.time() - t0, 1), "tree_cpu_s": cpu,
                          "load_avg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)],
                          "runs": [line.strip() for line in out.splitlines() if "ok (" in line or "FAILED" in line]}),
              flush=True)
        shutil.rmtree(folder.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
