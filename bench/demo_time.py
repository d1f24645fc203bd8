"""How long `wse demo` takes, and where the time goes (not a timed test).

Runs the demo as a newcomer would, in a fresh folder with an empty `.wse/` (its own warehouse,
Dagster home and LLM cache), from a copy of the repo's `wse.yaml` whose input paths point back
into the repo. Prints each run step's time (the demo's own `[i/n] ... ok (s)` lines), the total
wall time, and from the warehouse the model time per role (calls, tokens in/out, seconds), so a
slow demo can be traced to the role or to the platform (steps minus model time).

    python bench/demo_time.py                 # the quick demo, cold (every model call made)
    python bench/demo_time.py --warm          # run twice; the second run answers every call from
                                              # the first one's cache: the platform's own overhead
    python bench/demo_time.py --full          # `wse demo --full`
    python bench/demo_time.py --keep DIR      # leave the folder (and its warehouse) in DIR
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import yaml

REPO = Path(__file__).resolve().parents[1]
STEP = re.compile(r"^\[(\d+)/(\d+)\] materializing (.*)$")
DONE = re.compile(r"^\s+(ok|FAILED after|INTERRUPTED after) \(?([0-9.]+)s")


def demo_config(folder: Path) -> Path:
    """The repo's wse.yaml with its relative input paths made absolute (outputs stay in `folder`)."""
    cfg = yaml.safe_load((REPO / "wse.yaml").read_text(encoding="utf-8"))
    for corpus in (cfg.get("endings") or {}).get("corpora") or []:
        if not Path(corpus["path"]).is_absolute():
            corpus["path"] = str(REPO / corpus["path"])
    for key in ("prompts_dir",):
        if cfg.get(key) and not Path(cfg[key]).is_absolute():
            cfg[key] = str(REPO / cfg[key])
    endings = cfg.get("endings") or {}
    if endings.get("ideas_file") and not Path(endings["ideas_file"]).is_absolute():
        endings["ideas_file"] = str(REPO / endings["ideas_file"])
    target = folder / "wse.yaml"
    target.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return target


def run_demo(folder: Path, full: bool) -> tuple[float, list[tuple[str, float]], int]:
    wse = Path(sys.executable).parent / "wse"
    cmd = [str(wse), "demo"] + (["--full"] if full else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    took = time.perf_counter() - t0
    steps, label = [], None
    for line in proc.stdout.splitlines():
        if m := STEP.match(line):
            label = m.group(3)
        elif (m := DONE.match(line)) and label is not None:
            steps.append((label, float(m.group(2))))
            label = None
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    return took, steps, proc.returncode


def model_time(warehouse: Path) -> list[tuple]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(
            "SELECT role, count(*) AS calls, sum(tokens_in), sum(tokens_out), round(sum(latency_s), 1) AS s "
            "FROM llm_calls WHERE NOT cache_hit GROUP BY role ORDER BY s DESC").fetchall()


def report(title: str, took: float, steps: list[tuple[str, float]], rc: int, roles: list[tuple]) -> None:
    print(f"\n== {title}: {took // 60:.0f} min {took % 60:.1f} s wall (exit code {rc})")
    for label, s in steps:
        print(f"  {s:7.1f} s  {label[:110]}")
    model = sum(r[4] or 0 for r in roles)
    print(f"  steps {sum(s for _, s in steps):.1f} s; model calls {model:.1f} s "
          f"({sum(r[1] for r in roles)} calls made)")
    for role, calls, tin, tout, s in roles:
        print(f"    {role:34s} {calls:3d} calls  {tin or 0:7d} tokens in  {tout or 0:6d} out  {s:7.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", action="store_true", help="a second run on the first run's LLM cache")
    ap.add_argument("--full", action="store_true", help="`wse demo --full`")
    ap.add_argument("--keep", type=Path, help="folder to run in and keep (default: a temporary one)")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="wse-demo-"))
    if args.keep and (folder / ".wse").exists():
        shutil.rmtree(folder / ".wse")
    folder.mkdir(parents=True, exist_ok=True)
    demo_config(folder)
    warehouse = folder / ".wse" / ("demo-full/warehouse.duckdb" if args.full else "warehouse.duckdb")
    try:
        took, steps, rc = run_demo(folder, args.full)
        report("cold (empty .wse)", took, steps, rc, model_time(warehouse) if warehouse.exists() else [])
        if args.warm:
            for name in ("warehouse.duckdb", "warehouse.duckdb.wal", "dagster_home", "artifacts", "demo-full"):
                p = folder / ".wse" / name
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
            took, steps, rc = run_demo(folder, args.full)
            report("warm (LLM cache kept, warehouse and Dagster home new)", took, steps, rc,
                   model_time(warehouse) if warehouse.exists() else [])
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
