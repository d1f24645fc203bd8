"""Rerun benchmark (issue 6): is an unchanged rerun nearly free, and is `wse status` fast?

1. `wse demo` twice into a fresh folder (warehouse, LLM cache, Dagster home): the second,
   unchanged, run's wall time as a share of the first (target ≤ 10 %) and its backend calls
   (`llm_calls` rows with cache_hit = false in the second run's runs; target 0).
2. `wse status` on the 144-cell paper grid (12 litellm models × 12 architectures; no model is
   called): wall time of the whole command, first call (records every config fingerprint) and
   steady state (target ≤ 5 s).

    python bench/rerun.py                       # the shipped wse.yaml (demo scale, ~10 min)
    python bench/rerun.py --config tiny.yaml    # a smaller config for a quick run
    python bench/rerun.py --skip-demo           # only the status timing
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAPER_MODELS = 12


def _env(folder: Path) -> dict[str, str]:
    """Every mutable path inside `folder`, so a run starts from nothing."""
    env = dict(os.environ)
    env.update(WSE_WAREHOUSE=str(folder / "warehouse.duckdb"), WSE_CACHE_DIR=str(folder / "llm_cache"),
               WSE_ARTIFACTS_DIR=str(folder / "artifacts"), DAGSTER_HOME=str(folder / "dagster_home"),
               DAGSTER_DISABLE_TELEMETRY="1", PYTHONPATH=str(REPO))
    (folder / "dagster_home").mkdir(parents=True, exist_ok=True)
    return env


def _wse(args: list[str], env: dict[str, str], log: Path) -> float:
    t0 = time.perf_counter()
    with log.open("a") as out:
        rc = subprocess.call([sys.executable, "-m", "wse_platform.cli", *args], env=env, cwd=REPO,
                             stdout=out, stderr=subprocess.STDOUT)
    dt = time.perf_counter() - t0
    if rc != 0:
        print(f"  `wse {' '.join(args)}` exited with {rc} (log: {log})")
    return dt


def _run_ids(warehouse: Path) -> set[str]:
    from wse_platform.warehouse import Warehouse
    wh = Warehouse(warehouse)
    if "llm_calls" not in wh.tables():
        return set()
    return set(wh.query("SELECT DISTINCT run_id FROM llm_calls")["run_id"].to_list())


def _backend_calls(warehouse: Path, run_ids: set[str]) -> tuple[int, int]:
    """(calls that reached a backend, all recorded calls) among `run_ids`."""
    from wse_platform.warehouse import Warehouse
    if not run_ids:
        return 0, 0
    df = Warehouse(warehouse).query("SELECT run_id, cache_hit FROM llm_calls")
    df = df.filter(df["run_id"].is_in(sorted(run_ids)))
    return int((~df["cache_hit"]).sum()), df.height


def _dagster_runs(home: Path) -> int:
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home))).get_runs_count()


def bench_demo(config: str | None, folder: Path) -> dict:
    env = _env(folder)
    log = folder / "demo.log"
    args = (["--config", config] if config else []) + ["demo"]
    first = _wse(args, env, log)
    before = _run_ids(folder / "warehouse.duckdb")
    runs_before = _dagster_runs(folder / "dagster_home")
    second = _wse(args, env, log)
    new_ids = _run_ids(folder / "warehouse.duckdb") - before
    backend, recorded = _backend_calls(folder / "warehouse.duckdb", new_ids)
    return {"first_s": first, "second_s": second, "share": second / first if first else float("nan"),
            "second_backend_calls": backend, "second_recorded_calls": recorded,
            "second_dagster_runs": _dagster_runs(folder / "dagster_home") - runs_before, "log": str(log)}


def paper_grid_config(folder: Path) -> Path:
    """12 litellm models × the 12 WSE architectures at paper scale (plus NCP and 100-Endings cells)."""
    from wse_platform.config import DEFAULT_CONFIG
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    names = [f"model{i:02d}" for i in range(PAPER_MODELS)]
    raw["profile"] = "paper"
    raw["models"] = {n: {"backend": "litellm", "model_id": f"openai/{n}", "params_b": float(i + 1), "family": "grid"}
                     for i, n in enumerate(names)}
    raw["wse"] = {"models": names, "consistency_judge": {"model": names[0], "count": 3},
                  "richness_judge": {"model": names[0], "count": 3}, "model_groups": {"grid": names}}
    raw["ncp"] = {"narrators": names, "player_model": names[1], "auditor": {"model": names[0]},
                  "reaudit_auditors": [{"model": names[2]}], "extraction_models": names[:3]}
    raw["endings"] = {"forecaster": names[0], "judge": names[1], "generators": names,
                      "corpora": [{"name": "public_domain", "path": str(REPO / "data/stories/public_domain")}]}
    path = folder / "paper_grid.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def bench_status(folder: Path, repeats: int = 3) -> dict:
    env = _env(folder)
    cfg = paper_grid_config(folder)
    log = folder / "status.log"
    times = [_wse(["--config", str(cfg), "status"], env, log) for _ in range(repeats)]
    return {"first_s": times[0], "steady_s": min(times[1:]) if len(times) > 1 else times[0], "log": str(log)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="config for the demo runs (default: the shipped wse.yaml)")
    p.add_argument("--workdir", help="keep the run folders here (default: a temporary folder)")
    p.add_argument("--skip-demo", action="store_true")
    p.add_argument("--skip-status", action="store_true")
    args = p.parse_args(argv)
    root = Path(args.workdir or tempfile.mkdtemp(prefix="wse_rerun_"))
    root.mkdir(parents=True, exist_ok=True)
    ok = True
    if not args.skip_demo:
        config = str(Path(args.config).resolve()) if args.config else None
        r = bench_demo(config, root / "demo")
        ok &= r["share"] <= 0.10 and r["second_backend_calls"] == 0
        print(f"demo ({args.config or 'wse.yaml'}): first {r['first_s']:.1f}s, second (unchanged) "
              f"{r['second_s']:.1f}s = {100 * r['share']:.1f}% of the first (target ≤ 10%); "
              f"second run: {r['second_backend_calls']} backend calls (target 0), "
              f"{r['second_recorded_calls']} recorded calls, {r['second_dagster_runs']} Dagster runs  [log {r['log']}]")
    if not args.skip_status:
        r = bench_status(root / "status")
        ok &= r["steady_s"] <= 5.0
        print(f"wse status, 144-cell paper grid: first call {r['first_s']:.1f}s (records every fingerprint), "
              f"steady state {r['steady_s']:.1f}s (target ≤ 5 s; whole command incl. start-up)  [log {r['log']}]")
    print(f"work folder: {root}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
