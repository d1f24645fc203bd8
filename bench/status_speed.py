"""Wall and CPU time of `wse status` on a materialized warehouse (issue 21: ≤ 2 s after a config edit).

Runs the real command in a fresh process `--runs` times (process start, imports, building the
definitions, observing the config sources, the stale resolver) and reports each wall time and
the time the command itself prints for its status computation. `--profile` runs it once more
in-process under cProfile and prints the 25 most expensive functions (cumulative).

`--build-stub` first materializes the config's whole graph with the embedded backend replaced by
a stub that answers "{}" instantly (every call fails validation and is recorded as a failure):
the instance then holds the same assets, partitions and runs as after `wse demo`, in a minute
instead of the demo's model time. `wse status` reads only the instance's records and the
config, not the table contents, so this measures the same work.

`--edit ncp.t_max=2` then measures the case a newcomer meets after editing the config: the whole
output folder (warehouse, Dagster home) is copied into a temp folder with a copy of the config
pointing there, `wse status` runs there once (the state a user edits in: the last full check saved
its report and facts), the edit is applied to the copy, and the calls are timed there (the first
one replays the edit without Dagster, `wse_platform/status_replay.py`, or computes in full where it
cannot; later ones print its report while nothing changes). The original folder is not touched.
A warehouse with the paper's cell counts: `bench/status_grid.py`.

    python bench/status_speed.py --config .wse-demo/wse.yaml [--runs 3] [--profile] [--build-stub]
    python bench/status_speed.py --config wse.yaml --edit ncp.t_max=2 --runs 3
    python bench/status_speed.py --config wse.yaml --after-run wse_cell_metrics --runs 2
    python bench/status_speed.py --config wse.yaml --edit 'wse.architectures=[B1, B2]' --runs 2  # graph-changing
    python bench/status_speed.py --config /tmp/status-grid/wse.yaml --edit 'models.m13={backend: litellm,
        model_id: hosted_vllm/m13, api_base: "http://127.0.0.1:9/v1"}' --edit 'wse.models=[m01, m02, m03, m04,
        m05, m06, m07, m08, m09, m10, m11, m12, m13]' [--full-check] --runs 2
    python bench/status_speed.py --config /tmp/status-grid/wse.yaml --after-run 'wse_cell_metrics --no-status'
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_with_stub(config: str) -> None:
    from wse_platform import cli
    from wse_platform.llm.backends.base import BackendResponse
    from wse_platform.llm.backends.embedded import EmbeddedBackend

    def stub(self, calls, on_result=None):
        out = []
        for i, call in enumerate(calls):
            out.append(BackendResponse(texts=["{}"] * call.n, tokens_in=1, tokens_out=1, latency_s=0.0))
            if on_result is not None:
                on_result(i, out[-1])
        return out

    EmbeddedBackend.generate = stub
    os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"
    t0 = time.perf_counter()
    rc = cli.main(["--config", config, "materialize", "--stale"])
    print(f"stub build: exit {rc} in {time.perf_counter() - t0:.1f} s")


def edited_copy(config: str, edit: list[str] | str | None, run: str | None = None) -> str:
    """Copy the config's output folder (warehouse, Dagster home, cache) to a temp folder, write a
    config pointing there with `edit` applied (and then `wse materialize --select RUN` run there);
    return its path."""
    import yaml

    from wse_platform.config import load_settings

    if os.environ.get("DAGSTER_HOME"):
        sys.exit("unset DAGSTER_HOME: the copy must use the Dagster home next to the copied warehouse")
    settings = load_settings(config)
    out = settings.warehouse.parent
    tmp = Path(tempfile.mkdtemp(prefix="wse-status-"))
    shutil.copytree(out, tmp / out.name)
    raw = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    raw["warehouse_path"] = str(tmp / out.name / settings.warehouse.name)
    for key, path in (("cache_dir", settings.cache), ("artifacts_dir", settings.artifacts)):
        raw[key] = str(tmp / out.name / path.relative_to(out)) if path.is_relative_to(out) else str(path)
    # relative input paths are left as written (they are part of some fingerprints): from the temp
    # folder they fall back to the repository's shipped data, so only the edit changes a version
    copy = tmp / "wse.yaml"
    copy.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    # the state a user edits in: the last `wse status` before the edit ran in this folder (a copy
    # has new file times, so the original's saved report and facts do not apply to it)
    t0 = time.perf_counter()
    before = _status(str(copy))
    print(f"copied {out} to {tmp / out.name}; `wse status` before the edit: {time.perf_counter() - t0:.2f} s wall, "
          f"{before.cpu_s:.2f} s CPU (exit {before.returncode}): {_summary(before)}")
    for one in ([edit] if isinstance(edit, str) else edit or []):
        dotted, value = one.split("=", 1)
        *parents, leaf = dotted.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
        copy.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        print(f"edited {dotted} = {value} in {copy}")
    if run:  # a run: `wse materialize` leaves its status check behind for the next `wse status`
        cmd = [sys.executable, "-m", "wse_platform.cli", "--config", str(copy), "materialize", "--select", *run.split()]
        before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1"})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"`wse materialize --select {run}`: {time.perf_counter() - t0:.1f} s wall, {cpu:.1f} s CPU "
              f"(exit {out.returncode}): {_summary(out)}")
    return str(copy)


NO_REPLAY = ("import sys; from wse_platform import cli, status_replay; status_replay.replay = lambda s: None; "
             "sys.exit(cli.main(['--config', sys.argv[1], 'status']))")


def _status(config: str, full_check: bool = False) -> subprocess.CompletedProcess:
    """One `wse status` in a fresh process; `.cpu_s`: its CPU time (user + system), which a busy
    machine does not inflate the way it inflates wall time. `full_check`: without the replay (as
    for an edit it cannot replay: the full check, with the status cache)."""
    cmd = ([sys.executable, "-c", NO_REPLAY, config] if full_check
           else [sys.executable, "-m", "wse_platform.cli", "--config", config, "status"])
    env = {**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def _summary(out: subprocess.CompletedProcess) -> str:
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr.strip()[-300:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="config of a warehouse that has been materialized")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--build-stub", action="store_true", help="materialize first, with a stub model")
    ap.add_argument("--edit", action="append", help="KEY=VALUE (YAML value, dotted key): time the calls after "
                    "this config edit, in a copy of the output folder; repeat it for an edit of several keys "
                    "(e.g. a model added: its `models.NAME` entry and `wse.models`)")
    ap.add_argument("--after-run", metavar="SELECT", help="in a copy of the output folder (after --edit, if "
                    "given), run `wse materialize --select SELECT`, then time the calls (space-separated names)")
    ap.add_argument("--full-check", action="store_true", help="the timed calls do not replay the edit: they "
                    "time the full check (Dagster's resolver, with the per-partition status cache)")
    args = ap.parse_args()
    if args.build_stub:
        build_with_stub(args.config)
    if args.edit or args.after_run:
        args.config = edited_copy(args.config, args.edit, args.after_run)
    walls = []
    for i in range(args.runs):
        t0 = time.perf_counter()
        out = _status(args.config, args.full_check)
        wall = time.perf_counter() - t0
        walls.append(wall)
        summary = _summary(out)
        inner = re.search(r"\(([\d.]+)s\)", summary)
        print(f"run {i + 1}: {wall:.2f} s wall, {out.cpu_s:.2f} s CPU (exit {out.returncode}); status computation "
              f"{inner.group(1) + ' s' if inner else '?'}; {summary}")
    print(f"best {min(walls):.2f} s, median {sorted(walls)[len(walls) // 2]:.2f} s over {len(walls)} runs; "
          f"load average {os.getloadavg()[0]:.1f} (2 cores: more than 2 means waiting for a CPU)")
    if args.profile:
        from wse_platform import cli
        prof = cProfile.Profile()
        prof.enable()
        cli.main(["--config", args.config, "status"])
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
