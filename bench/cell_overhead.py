"""The platform's own time per cell (issue 24 item 3): a cell rerun whose every answer is cached.

`--fresh` makes its own folder: it starts the simulated model server of `bench/fleet_server.py`,
writes a WSE config the way `bench/fleet.py` does (one model "fleet", a 3-judge panel, horizon 3,
`--seeds` seeds), and materializes `--cells` cells once (generation, judging, aggregates, the
final tables). Then it reruns, each in one fresh process, `wse materialize --partition <1 cell>`
and `--partition <N cells>` (`--parallel 1`, the same selection). Every answer now comes from
the LLM cache, so what remains is the platform: run creation, the event log, warehouse writes,
the asset checks (`in_sync` over every cell of the grid) and, once per process, imports, the
instance and the definitions. The server stays up during the reruns and the bench FAILS if any
request reaches it (a cache miss would make the figure meaningless).

Printed: each command's wall and CPU time and each run's wall time as the CLI reports it, and
    per cell  = (wall of N cells - wall of 1 cell) / (N - 1)
    per process (fixed) = wall of 1 cell - per cell
`--grid` first records 144 WSE cells (12 models x 12 architectures) and 300 NCP cells
(100 narrators x 3 architectures) as built in the instance (runless materializations of the
cells' assets, `bench/cell_grid.py`), so `in_sync` and the status computation work over a grid
of the issue's size. `--profile` profiles the N-cell rerun (cProfile) and prints the most
expensive functions (cumulative).

    python bench/cell_overhead.py --fresh [--cells 4] [--seeds 2] [--grid] [--profile] [--workdir DIR]
    python bench/cell_overhead.py <folder with wse.yaml> --cells 3     # an existing folder (e.g. fleet.py's)
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SELECT = ["group:wse_sources", "group:wse_cells", "group:wse_verdicts", "group:wse_tables"]
ALL_ARCHS = ["B1", "B1+WMOD", "B1+WMEM", "B1+WMEM+WMOD", "B2", "B2+WMOD", "B2+WMEM", "B2+WMEM+WMOD", "B3",
             "B3+WMOD", "B3+WMEM", "B3+WMEM+WMOD"]


def _fleet():
    spec = importlib.util.spec_from_file_location("fleet_bench", REPO / "bench" / "fleet.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def copy_folder(folder: Path, prefix: str) -> Path:
    """A private copy of a bench folder (made by `--fresh`/`--workdir`) in a new temp folder; its config,
    the instance's storage folders (dagster.yaml) and the status files are rewritten to name the copy.
    Returns the copy's `wse.yaml`."""
    work = Path(tempfile.mkdtemp(prefix=prefix)) / "folder"
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns("*.lock", "*.prof", "rerun-*"))
    cfg = work / "wse.yaml"
    for f in [cfg, *(work / "dagster_home").glob("*.yaml"), *(work / "dagster_home").glob("*.json")]:
        f.write_text(f.read_text().replace(str(folder), str(work)))
    return cfg


def cells_of(cfg: Path, n: int) -> list[str]:
    raw = yaml.safe_load(cfg.read_text())
    archs = raw["wse"].get("architectures") or ALL_ARCHS
    return [f"{a}|{m}" for m in raw["wse"]["models"] for a in archs][:n]


def env_for(folder: Path) -> dict:
    env = {**os.environ, "DAGSTER_HOME": str(folder / "dagster_home"), "PYTHONPATH": str(REPO)}
    for k in ("WSE_CONFIG", "WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR"):
        env.pop(k, None)
    return env


def profiled(out: Path) -> list[str]:
    """`python -c <code> -` running the CLI's `main` (not `entry`: that ends the process with `os._exit`,
    so `-m cProfile` never wrote its file) under cProfile with a CPU-time timer, stats written to `out`."""
    code = ("import cProfile, sys, time\nfrom wse_platform.cli import main\n"
            "p = cProfile.Profile(time.process_time)\np.enable()\ntry:\n    rc = main(sys.argv[1:])\n"
            f"finally:\n    p.disable()\n    p.dump_stats({str(out)!r})\nsys.exit(rc)")
    return ["-c", code]


def materialize(folder: Path, cells: list[str], select: list[str], profile: Path | None = None) -> dict:
    """One `wse materialize` command in a fresh process: wall, CPU, the runs' times, its output."""
    cmd = [sys.executable] + (profiled(profile) if profile else ["-m", "wse_platform.cli"]) + [
        "--config", str(folder / "wse.yaml"), "materialize",
        "--select", *select, "--partition", *cells, "--parallel", "1"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, env=env_for(folder), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    runs = [float(x) for x in re.findall(r"ok \((\d+\.\d+)s\)", out.stdout)]
    # the cell runs: "[i/n] materializing [<cell>] ..." followed by "    ok (x s)"
    cell_runs = [float(x) for x in re.findall(r"materializing \[[^\]]+\][^\n]*\n\s+ok \((\d+\.\d+)s\)", out.stdout)]
    (folder / f"rerun-{len(cells)}{'-profile' if profile else ''}.log").write_text(out.stdout + out.stderr)
    return {"rc": out.returncode, "wall": wall, "cpu": cpu, "runs": runs, "cell_runs": cell_runs,
            "out": out.stdout + out.stderr,
            "cells": len(cells), "load": os.getloadavg()[0]}


class Server:
    """bench/fleet_server.py on a free port, fast answers; `calls()` = sequences it served so far."""

    def __init__(self, folder: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = folder / "sequences.jsonl"
        self.log.write_text("")
        self.proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fleet_server.py"), "--port",
                                      str(self.port), "--slots", "64", "--median", "0.005", "--sigma", "0.3",
                                      "--log", str(self.log)])
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("bench/fleet_server.py did not start")
                time.sleep(0.2)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def calls(self) -> int:
        return sum(1 for line in self.log.read_text().splitlines() if line.strip())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def show(label: str, r: dict) -> None:
    print(f"{label}: {r['cells']} cell(s): {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, exit {r['rc']} "
          f"(load average {r['load']:.1f}); runs: {', '.join(f'{x:.1f}' for x in r['runs'])} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description="platform time per cached cell rerun")
    ap.add_argument("folder", type=Path, nargs="?", help="a folder with wse.yaml, warehouse, cache, dagster_home")
    ap.add_argument("--fresh", action="store_true", help="make a new folder against bench/fleet_server.py first")
    ap.add_argument("--workdir", type=Path, default=None, help="with --fresh: where (default: a new temp folder)")
    ap.add_argument("--cells", type=int, default=4, help="N: cells of the N-cell rerun (>= 2)")
    ap.add_argument("--seeds", type=int, default=2, help="with --fresh: WSE seeds per cell")
    ap.add_argument("--select", nargs="+", default=SELECT)
    ap.add_argument("--grid", action="store_true", help="record 144 WSE + 300 NCP cells as built first")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    if args.cells < 2:
        ap.error("--cells must be >= 2 (per cell = difference between N cells and 1 cell)")
    if not args.fresh and args.folder is None:
        ap.error("give a folder or --fresh")
    if args.grid:  # the grid's other cells have no warehouse rows for the final tables (cell_grid's doc)
        args.select = [s for s in args.select if s != "group:wse_tables"]
    server = None
    try:
        if args.fresh:
            folder = args.workdir or Path(tempfile.mkdtemp(prefix="wse-cells-"))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "dagster_home").mkdir(exist_ok=True)
            server = Server(folder)
            fleet = _fleet()
            fleet.config(folder, server.url(), 64, "wse", 10, (args.seeds, 1, 5))
            if args.grid:
                from cell_grid import grid_config  # noqa: PLC0415 - bench/ is on sys.path
                grid_config(folder / "wse.yaml", server.url())
            print(f"building {args.cells} cells in {folder} ...", flush=True)
            build = materialize(folder, cells_of(folder / "wse.yaml", args.cells), args.select)
            show("build (answers from the server)", build)
            if build["rc"] != 0:
                print(build["out"][-4000:])
                return 1
            print(f"  the server answered {server.calls()} sequences", flush=True)
        else:
            folder = args.folder
        if args.grid:
            from cell_grid import record_grid  # noqa: PLC0415
            print(record_grid(folder), flush=True)
        cfg = folder / "wse.yaml"
        before = server.calls() if server else None
        one = materialize(folder, cells_of(cfg, 1), args.select)
        show("cached rerun", one)
        many = materialize(folder, cells_of(cfg, args.cells), args.select,
                           profile=folder / "cell_overhead.prof" if args.profile else None)
        show("cached rerun", many)
        for r in (one, many):
            if r["rc"] != 0:
                print(r["out"][-4000:])
                return 1
        if server is not None and server.calls() != before:
            print(f"FAILED: {server.calls() - before} sequences reached the server during the cached reruns "
                  "(a cache miss): the figures below would include model calls", file=sys.stderr)
            return 1
        per_cell = (many["wall"] - one["wall"]) / (many["cells"] - 1)
        per_cell_cpu = (many["cpu"] - one["cpu"]) / (many["cells"] - 1)
        print(f"per cell: {per_cell:.2f} s wall ({per_cell_cpu:.2f} s CPU); per process (fixed): "
              f"{one['wall'] - per_cell:.1f} s wall ({one['cpu'] - per_cell_cpu:.1f} s CPU)"
              + ("; 0 requests reached the server during the reruns" if server else ""))
        later = many["cell_runs"][1:]  # the first cell run after the source tables' run also re-checks every
        if later:                      # cell reading them (see the README): a per-process cost
            print(f"cell runs of the {many['cells']}-cell rerun as the CLI reports them: "
                  f"{', '.join(f'{x:.1f}' for x in many['cell_runs'])} s; median of all but the first: "
                  f"{statistics.median(later):.1f} s")
        if args.profile:
            import pstats
            pstats.Stats(str(folder / "cell_overhead.prof")).sort_stats("cumulative").print_stats(
                r"(wse_platform|assets|resources|dagster/_core/(instance|storage|execution))", 45)
        return 0
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).resolve().parent), str(REPO)]
    sys.exit(main())
