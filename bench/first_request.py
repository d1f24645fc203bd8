"""How long from `wse materialize` starting to the first request reaching the fleet? (issue 24)

For each benchmark, runs the command `bench/fleet.py` runs (`python -m wse_platform.cli --config <folder>/wse.yaml
materialize --select group:<bench>_{sources,cells,verdicts,tables}`) on a fresh folder (warehouse, cache, Dagster
home) against a fresh `bench/fleet_server.py`, and stops the command once the server has seen its first request.
It prints, per run, the wall time to the first request and the CPU seconds the command's process tree (the CLI,
the workers' template, the workers) had spent by then, and the CLI's first lines with their times.

Several checkouts are compared in one run, alternately (A B A B ...), so the machine's load moves them alike:

    python bench/first_request.py [--benchmarks ncp,wse,endings] [--rounds 3] [--code . /tmp/d_base] [--slots 64]

The paper designs are those of `bench/fleet.py` (its `config`, from this checkout's `bench/fleet.py` and `wse.yaml`
for every checkout). Wall times under a shared machine's load are noise: read the CPU and the ratios of runs
made side by side; the 1-minute load average is printed with every run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import fleet  # noqa: E402  (bench/fleet.py: the paper designs' config)

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int, by_process: dict | None = None) -> float:
    """CPU seconds (user + system) of `root` and its descendants now (Linux /proc); `by_process` gets
    pid -> (its role: cli, template (the fork server), worker, other; CPU s)."""
    parent, tree = fleet.process_tree(root)
    if by_process is not None:
        for p in tree:
            by_process[p] = (_role(p, root, parent), parent[p][1] / TICK)
    return sum(parent[p][1] for p in tree) / TICK


def _role(pid: int, root: int, parent: dict) -> str:
    """cli (the command), template (multiprocessing's fork server, a child of the command), worker (a child of
    the fork server, or a spawned pool process), other (the resource tracker...)."""
    if pid == root:
        return "cli"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return "other"
    up = parent.get(pid, (0, 0))[0]
    if up == root and "forkserver" in cmd:
        return "template"
    if up != root or "spawn_main" in cmd:
        return "worker"
    return "other"


def first_request(code: Path, bench: str, args, keep: bool = False) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"wse-first-{bench}-"))
    try:
        port = fleet.free_port()
        log = folder / "sequences.jsonl"
        log.write_text("")
        server = fleet.start_server(port, log, args.slots, args.median, quiet=True)
        try:
            cfg = fleet.config(folder, f"http://127.0.0.1:{port}/v1", args.slots, bench, args.stride,
                               (args.seeds, args.specs, args.stories), (args.horizon, args.t_max, args.k), code)
            env = fleet.cli_env(folder, code)
            if args.pycache:   # compiled modules kept (outside the checkouts) as a user's checkout keeps them
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                env["PYTHONPYCACHEPREFIX"] = str(Path(args.pycache).resolve())
            cmd = [sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "materialize",
                   "--select", *(f"group:{bench}_{stage}" for stage in fleet.STAGES)]
            load = os.getloadavg()[0]
            lines: list[tuple[float, str]] = []
            t0 = time.time()
            proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1, start_new_session=True)

            def read() -> None:
                for line in proc.stdout:
                    lines.append((time.time() - t0, line.rstrip()))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            samples: list[tuple[float, float, dict]] = []   # (time since start, tree CPU s, per process)
            first = None
            while time.time() - t0 < args.timeout:
                per: dict = {}
                samples.append((time.time() - t0, tree_cpu(proc.pid, per), per))
                if log.stat().st_size:
                    first = min(json.loads(x)["a"] for x in log.read_text().splitlines() if x.strip()) - t0
                    break
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # this command's session: the CLI, its fork server and workers
            except ProcessLookupError:
                pass
            proc.wait()
            reader.join(5)
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:   # a loaded machine: not worth waiting for
                server.kill()
                server.wait()
        cpu, roles = None, {}
        if first is not None:   # the tree's CPU at the first request's arrival (the last sample before it)
            before = [s for s in samples if s[0] <= first] or samples[:1]
            cpu = before[-1][1]
            for role, c in before[-1][2].values():
                roles[role] = round(roles.get(role, 0) + c, 2)
            # when the workers' template was built: its CPU's last rise before the first request
            tmpl = [(t, sum(c for r, c in per.values() if r == "template")) for t, _, per in before]
            ready = next((t for t, c in tmpl if tmpl and c >= tmpl[-1][1] - 0.02 and c > 0), None)
            roles["template_done_at_s"] = None if ready is None else round(ready, 2)
        return {"code": str(code), "bench": bench, "first_request_s": None if first is None else round(first, 2),
                "cpu_s": None if cpu is None else round(cpu, 2), "cpu_by_role": roles, "load_1m": round(load, 2),
                "cli_cpu_at_first_line": _cli_cpu_at(samples, lines[0][0]) if lines else None,
                "lines": [f"{t:6.2f} (CLI {_cli_cpu_at(samples, t):5.2f} CPU s) {s[:90]}" for t, s in lines[:args.lines]]}
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _cli_cpu_at(samples: list, t: float) -> float:
    """The CLI process's own CPU seconds at time `t` (the last sample before it): the work it did before a line,
    less dependent on the machine's load than the wall time."""
    before = [per for ts, _, per in samples if ts <= t] or [samples[0][2]]
    return round(sum(c for role, c in before[-1].values() if role == "cli"), 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", default="ncp,wse,endings")
    ap.add_argument("--code", nargs="+", default=[str(REPO)], help="checkouts to compare, run alternately")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--median", type=float, default=0.4)
    ap.add_argument("--stride", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=42)
    ap.add_argument("--specs", type=int, default=100)
    ap.add_argument("--stories", type=int, default=5)
    ap.add_argument("--horizon", type=int, default=3)
    ap.add_argument("--t-max", type=int, default=3)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--lines", type=int, default=4, help="the CLI's first lines to print per run")
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    ap.add_argument("--pycache", default=None, metavar="DIR",
                    help="let the command keep compiled modules in DIR (PYTHONPYCACHEPREFIX; PYTHONDONTWRITEBYTECODE "
                         "dropped): without it, where the environment sets PYTHONDONTWRITEBYTECODE and a checkout has "
                         "no __pycache__, every process compiles the project's modules again")
    args = ap.parse_args()
    codes = [Path(c).resolve() for c in args.code]
    results: list[dict] = []
    for bench in [b.strip() for b in args.benchmarks.split(",") if b.strip()]:
        for r in range(args.rounds):
            for code in (codes if r % 2 == 0 else codes[::-1]):   # A B, B A, ...: neither always first
                res = first_request(code, bench, args)
                results.append(res)
                if not args.quiet:
                    print(json.dumps({k: v for k, v in res.items() if k != "lines"}), flush=True)
                    for line in res["lines"]:
                        print("    " + line)
    print("summary (median over rounds): benchmark, checkout, first request s, CPU s of the command's processes "
          "to it, of the CLI before its first run line, of the workers' template; load")
    for bench in dict.fromkeys(r["bench"] for r in results):
        for code in codes:
            rs = [r for r in results if r["bench"] == bench and r["code"] == str(code) and r["first_request_s"]]
            if rs:
                print(f"  {bench:8s} {str(code):32s} {statistics.median(r['first_request_s'] for r in rs):6.2f} s "
                      f"{statistics.median(r['cpu_s'] for r in rs):6.2f} CPU s; CLI before its first run "
                      f"{statistics.median(r['cli_cpu_at_first_line'] or 0 for r in rs):5.2f} CPU s, template "
                      f"{statistics.median(r['cpu_by_role'].get('template', 0) for r in rs):5.2f} CPU s  "
                      f"(n={len(rs)}, load {min(r['load_1m'] for r in rs)}-{max(r['load_1m'] for r in rs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
