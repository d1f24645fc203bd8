"""CPU of WSE-bench's own code per request (agents, judges, seeds), without the LLM client or Dagster.

`bench/request_cpu.py` measures a cell's whole client side; this script takes the client out: every
request goes to a stub that answers at once with a schema-valid answer (`bench/fleet_server.py`'s
`instance`, parsed with the request's output model as the client does; the stub's own CPU, summed
over the threads that call it, is subtracted). Per architecture it runs what a cell's run does in
the domain code: `simulate_cell` with the early judges (`wse.early.CellJudges`: a 3-member
consistency panel per step, a 3-member richness panel per trajectory), the rows written
(`step_rows`, `trajectory_rows`), then the judging steps: the seeds read back from their stored
JSON (`assets.wse.sources.stored_seeds`' parse), `judged_trajectories`, `judge_consistency`,
`judge_richness`, `consistency_tables_from_verdicts`. Printed: CPU ms per request (process CPU,
all threads, minus the stub's) and the requests counted.

    PYTHONPATH=. python bench/wse_domain_cpu.py [--archs 12] [--seeds 42] [--horizon 3] [--repeat 3]
    PYTHONPATH=. python bench/wse_domain_cpu.py --ref REF   # REF's code (temporary worktree) and this tree's, alternated
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_stub():
    """A stub whose every answer is schema-valid (`bench/fleet_server.py`'s `instance`), parsed with the
    request's output model as the client parses it."""
    sys.path.insert(0, str(REPO / "bench"))
    import fleet_server
    from checkouts import TimedStub
    from wse_platform.llm.types import LLMResult

    class Stub(TimedStub):
        def __init__(self) -> None:
            super().__init__()
            self._schemas: dict[type, dict] = {}

        def answer(self, q):
            m = q.output_model
            schema = self._schemas.get(m)
            if schema is None:
                schema = self._schemas[m] = m.model_json_schema()
            text = json.dumps(fleet_server.instance(schema))
            return LLMResult(role=q.role, model=q.model, outputs=[m.model_validate_json(text)], texts=[text],
                             call_ids=[f"c{id(q)}"])
    return Stub()


def settings_for(tmp: Path, horizon: int):
    from wse_platform.config import settings_from_dict

    def model(name: str) -> dict:
        return {"backend": "litellm", "model_id": f"hosted_vllm/{name}", "api_base": "http://127.0.0.1:9/v1",
                "sampling": {"temperature": 0.7, "max_tokens": 256}}
    panel = [{"model": m, "prompt_version": "v1"} for m in ("fleet-j1", "fleet-j2", "fleet-j3")]
    return settings_from_dict({
        "models": {n: model(n) for n in ("fleet", "fleet-j1", "fleet-j2", "fleet-j3")},
        "cache_dir": str(tmp / "cache"), "warehouse_path": str(tmp / "wh.duckdb"),
        "artifacts_dir": str(tmp / "artifacts"),
        "wse": {"models": ["fleet"], "horizon": horizon, "consistency_judges": panel, "richness_judges": panel}})


def run(args) -> dict:
    from assets.wse.sources import episode_seed_rows
    from wse_platform.config import WSE_ARCHITECTURES
    from wse_platform.wse import early, judges
    from wse_platform.wse.seeds import build_episode_seeds
    from wse_platform.wse.simulate import simulate_cell, step_rows, trajectory_rows
    from wse_platform.wse.world import EpisodeSeed
    from wse_platform.wse.worlds import load_initial_worlds
    try:   # this tree's per-process parse of the stored seeds, where it has one
        from assets.wse.sources import parse_seed_rows
    except ImportError:
        parse_seed_rows = None

    seeds = build_episode_seeds(load_initial_worlds())[: args.seeds]
    stored = episode_seed_rows(seeds).select("seed_id", "seed_json")
    archs = list(WSE_ARCHITECTURES)[: args.archs]
    settings = settings_for(Path(tempfile.mkdtemp(prefix="wse-domain-")), args.horizon)
    stub = make_stub()
    gen = judge = 0.0
    for arch in archs:
        c0 = time.process_time()
        s0 = stub.cpu
        with early.early_judging(stub, settings, "fleet", arch, force=True) as cj:
            records = simulate_cell(stub, settings, "fleet", arch, seeds, early=cj)
        steps, trajs = step_rows(records), trajectory_rows(records)
        gen += (time.process_time() - c0) - (stub.cpu - s0)
        c0 = time.process_time()
        s0 = stub.cpu
        for _ in range(2):   # the two judging steps each read the seeds
            parsed = parse_seed_rows(stored) if parse_seed_rows else [EpisodeSeed.model_validate_json(b)
                                                                      for b in stored["seed_json"]]
        by_id = {s.seed_id: s for s in parsed}
        rows = steps.select("seed_id", "step", "player_option", "narrative", "new_day")
        judged = judges.judged_trajectories(rows, trajs, by_id)
        tables = judges.judge_consistency(stub, settings, settings.wse.consistency_judge, judged)
        judges.judge_richness(stub, settings, settings.wse.richness_judge, judged)
        judges.consistency_tables_from_verdicts(tables.verdicts, trajs, settings.wse.consistency_judge)
        judge += (time.process_time() - c0) - (stub.cpu - s0)
    n = stub.requests
    return {"archs": len(archs), "seeds": len(seeds), "horizon": args.horizon, "requests": n,
            "generation_and_early_judges_ms_per_request": round(1000 * gen / n, 4),
            "judging_steps_ms_per_request": round(1000 * judge / n, 4),
            "domain_ms_per_request": round(1000 * (gen + judge) / n, 4),
            "stub_ms_per_request": round(1000 * stub.cpu / n, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--archs", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=42)
    ap.add_argument("--horizon", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--code", default=str(REPO))
    ap.add_argument("--ref", help="REF's code (temporary git worktree) and this tree's, alternated --repeat times")
    args = ap.parse_args()
    if not args.ref:
        sys.path.insert(0, args.code)
        os.environ.setdefault("WSE_NO_PROGRESS", "1")
        print(json.dumps({**run(args), "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
        return 0
    sys.path.insert(0, str(REPO / "bench"))
    from checkouts import ref_worktree, run_json
    with ref_worktree(args.ref) as wt:
        got: dict[str, list[float]] = {args.ref: [], "this tree": []}
        for _ in range(args.repeat):
            for name, code in ((args.ref, wt), ("this tree", REPO)):
                row = run_json(__file__, ["--archs", str(args.archs), "--seeds", str(args.seeds), "--horizon",
                                          str(args.horizon), "--code", str(code)], code)
                got[name].append(row["domain_ms_per_request"])
                print(json.dumps({name: row}), flush=True)
        a, b = (statistics.median(v) for v in got.values())
        print(json.dumps({"domain_ms_per_request_median": {args.ref: a, "this tree": b, "ratio": round(b / a, 3)},
                          "load_average": [round(x, 2) for x in os.getloadavg()]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
