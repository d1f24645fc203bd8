"""Where does a `wse materialize` command's CPU go? Attributes py-spy samples to platform components.

Record the command's whole process tree (the CLI, the fork server, every worker) with py-spy, e.g.
through `bench/fleet.py --py-spy OUT.txt` (py-spy is not a dependency: `pip install py-spy` in any
venv and put it on PATH), then:

    python bench/cpu_components.py OUT.txt [--cpu-s 100.0]

Samples whose innermost frame is a wait (a sleep, a lock, a condition, a selector, the file-lock
poll of the warehouse) are dropped: py-spy's own idle detection counts short timed waits as
active. Every remaining sample goes to the first component (in the order of COMPONENTS) whose
pattern matches the stack, so nested work is counted once, under its most specific owner. Under
load the share follows runnable time, i.e. CPU demand; `--cpu-s` (the tree's measured CPU
seconds, `cli_tree_cpu_s` of fleet.py) turns shares into seconds.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys

# innermost frames that wait rather than compute
IDLE_LEAF = re.compile(r"^(LockAcquisition\._poll_until_acquired|Condition\.wait|watch|EpollSelector\.select|_worker"
                       r"|main\(|_PollLikeSelector\.select|StopOnSignal\._watch|Connection\._recv|Event\.wait"
                       r"|Thread\._wait_for_tstate_lock|sleep|SemLock\.__enter__|Journal\._sync_loop|select|poll"
                       r"|wait)\b")

# (component, owner in HELPERS.md terms, pattern over the stack); first match wins
COMPONENTS = [
    ("worker start: imports after the fork (DagsterInstance.get -> storage modules)", "edges",
     r"init_worker"),
    ("imports elsewhere (CLI start, template build)", "edges", r"_find_and_load|_compile_bytecode"),
    ("LLM call records -> llm_calls (write_call_records)", "cpu256", r"write_call_records"),
    ("plots (matplotlib)", "cpu256", r"matplotlib|wse/plots\.py|wse/figures\.py|plotting\.py"),
    ("in_sync / status / check verdicts / hooks", "percell",
     r"compute_status|own_verdict|report_own_verdicts|status_by_asset|_success_hook|sync_checks|assets/sync"
     r"|_trigger_hook"),
    ("Dagster events of asset checks", "percell", r"asset_check_evaluation"),
    ("warehouse table writes (write_table)", "cpu256/percell", r"write_table|replace_partition"),
    ("judging replay steps (judging assets, client included)", "cpu256",
     r"wse_consistency_verdicts|wse_richness_verdicts"),
    ("WSE generation step (simulate_cell, early judges, client included)", "cpu256",
     r"simulate_cell|CellJudges|early_judges|Ask\.call"),
    ("LLM client elsewhere (event loop, aiohttp, limiter, journal)", "cpu256", r"wse_platform/llm/"),
    ("warehouse opens / reads elsewhere", "percell", r"Warehouse\.(connect|_open|query|table|held)"),
    ("Dagster event log / instance storage", "percell",
     r"handle_new_event|store_event|get_asset_records|get_event_records|EventLog|DagsterInstance|RunStorage"
     r"|ReusedEngine|log_step_event|log_job_event"),
    ("Dagster execution elsewhere", "percell", r"dagster/"),
    ("CLI run scheduling (parallel_runs, workers, cli)", "edges", r"parallel_runs|workers\.py|run_split|cli\.py"),
]


def attribute(lines) -> tuple[collections.Counter, int, int]:
    """(samples per component, busy samples, dropped idle samples) of py-spy raw lines."""
    rows: collections.Counter = collections.Counter()
    busy = idle = 0
    for line in lines:
        try:
            stack, count = line.rstrip("\n").rsplit(" ", 1)
            n = int(count)
        except ValueError:
            continue
        frames = stack.split(";")
        if IDLE_LEAF.match(frames[-1].split(" (")[0].strip()):
            idle += n
            continue
        busy += n
        text = ";".join(frames[1:])   # frames[0] names the process (its command line)
        for name, _owner, pattern in COMPONENTS:
            if re.search(pattern, text):
                rows[name] += n
                break
        else:
            rows["other"] += n
    return rows, busy, idle


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("raw", help="py-spy record --format raw output")
    ap.add_argument("--cpu-s", type=float, default=None, help="measured CPU seconds of the tree (shares -> s)")
    args = ap.parse_args()
    with open(args.raw) as f:
        rows, busy, idle = attribute(f)
    if not busy:
        print("no busy samples", file=sys.stderr)
        return 1
    owners = {name: owner for name, owner, _ in COMPONENTS}
    print(f"busy samples {busy} (idle leaves dropped: {idle})")
    print(f"{'samples':>8} {'share':>6} {'CPU s':>7}  owner           component")
    for name, n in rows.most_common():
        secs = f"{args.cpu_s * n / busy:7.1f}" if args.cpu_s else f"{'':7}"
        print(f"{n:8d} {100 * n / busy:5.1f}% {secs}  {owners.get(name, '-'):15} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
