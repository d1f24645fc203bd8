"""CPU milliseconds per LLM request of the WSE generation + judging path, in one process (issue 24 items 1, 4, 5).

What a WSE cell's Dagster steps do per request, without Dagster: for each architecture a fresh
client (a run's session: cache on, journal, call records written into a DuckDB warehouse in the
batches a run writes them, `resources.llm.FLUSH_EVERY` / `FLUSH_INTERVAL_S`) runs
`simulate_cell` with the early judges (`wse.early.CellJudges`: a 3-member consistency panel per
step, a 3-member richness panel per trajectory); then the judging step's replay
(`judge_consistency` + `judge_richness` over the same trajectories: every answer a cache hit).
The model is `bench/fleet_server.py` with an instant service (a subprocess; its CPU is reported
apart and not counted). Reported: the process's CPU (all threads, `time.process_time`) per
request of each phase, and per-component CPU (the calling thread's CPU, `time.thread_time`,
around the named functions; components nest: e.g. the records write is inside `_finish`).

    PYTHONPATH=. python bench/request_cpu.py [--archs 3] [--seeds 42] [--horizon 3]
    PYTHONPATH=. python bench/request_cpu.py --ref main       # the same on REF's code first, then this tree's
    PYTHONPATH=. python bench/request_cpu.py --benchmark ncp --seeds 20   # NCP-Bench: 3 architectures x 20 specs, t_max 3

NCP-Bench (`--benchmark ncp`, `--horizon` = t_max): per architecture what the cell's run does in one
process: the live episodes (`ncp_episodes`, through `ncp.kept.keeping`), then the re-audit under the
in-loop auditor (`ncp_reaudit_episodes`: the auditor answers from memory, `ncp.kept.answered`), each
with its own client of the same run id. Per-request figures divide by the live episodes' requests.

`--ref REF` checks REF out into a temporary git worktree, runs this script there on REF's code
(`--code`), then here, and prints both and their ratio (the machine's load average with each).
"""
from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")

# (module, attribute) pairs timed; where a module imported the name, the import is patched too
COMPONENTS = {
    "client.complete_many (all of the client in the asking thread)": [("wse_platform.llm.client",
                                                                       "LLMClient.complete_many")],
    "flow tasks (trajectory / episode threads, client included)": [("wse_platform.flow", "each")],
    "judge requests (blinding, prompts)": [("wse_platform.wse.judges", "consistency_request"),
                                           ("wse_platform.wse.judges", "richness_request")],
    "client._prepare (content key)": [("wse_platform.llm.client", "LLMClient._prepare")],
    "cache.get_many": [("wse_platform.llm.cache", "ResponseCache.get_many")],
    "cache.claim": [("wse_platform.llm.cache", "ResponseCache.claim")],
    "cache.put_many": [("wse_platform.llm.cache", "ResponseCache.put_many")],
    "client._finish (validation, record)": [("wse_platform.llm.client", "LLMClient._finish")],
    "call records write (warehouse)": [("wse_platform.llm.accounting", "write_call_records")],
    "journal append": [("wse_platform.llm.journal", "Journal.append")],
    "backend generate (transport)": [("wse_platform.llm.backends.openai_http", "OpenAIHTTPBackend.generate")],
    "ncp prompts (Prompter)": [("wse_platform.ncp.prompter", "Prompter.%s" % m) for m in
                               ("narrator", "player", "opening", "hiagent", "subgoal_summary", "fact_update",
                                "conflict_check", "double_check", "node_update", "commitment_status")],
    "ncp kept answers (request_digest)": [("wse_platform.kept_answers", "request_digest")],
    "ncp re-audit (replay, answers from memory included)": [("wse_platform.ncp.reaudit", "_replay")],
}


class Meter:
    def __init__(self) -> None:
        self.cpu: dict[str, float] = {k: 0.0 for k in COMPONENTS}
        self.calls: dict[str, int] = {k: 0 for k in COMPONENTS}
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap(self, name: str, fn):
        meter = self

        @functools.wraps(fn)
        def timed(*a, **k):
            depth = getattr(meter._local, name, 0)   # recursion or nesting of the same component: count once
            setattr(meter._local, name, depth + 1)
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                setattr(meter._local, name, depth)
                if depth == 0:
                    dt = time.thread_time() - t0
                    with meter._lock:
                        meter.cpu[name] += dt
                        meter.calls[name] += 1
        return timed

    def wrap_each(self, name: str, each):
        """`flow.each` with each item's function timed in its own thread."""
        @functools.wraps(each)
        def timed_each(client, items, fn, **kw):
            return each(client, items, self.wrap(name, fn), **kw)
        return timed_each

    def install(self) -> list[str]:
        missing = []
        for name, targets in COMPONENTS.items():
            for mod_name, attr in targets:
                try:
                    mod = importlib.import_module(mod_name)
                except ImportError:
                    missing.append(f"{mod_name}.{attr}")
                    continue
                owner, _, leaf = attr.rpartition(".")
                holder = getattr(mod, owner) if owner else mod
                fn = getattr(holder, leaf, None)
                if fn is None:
                    missing.append(f"{mod_name}.{attr}")
                    continue
                timed = self.wrap(name, fn) if attr != "each" else self.wrap_each(name, fn)
                setattr(holder, leaf, timed)
                if not owner:   # `from module import fn` elsewhere
                    for other in list(sys.modules.values()):
                        if getattr(other, "__name__", "").startswith("wse_platform") and \
                                getattr(other, leaf, None) is fn:
                            setattr(other, leaf, timed)
        return missing


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_server(code: Path) -> tuple[subprocess.Popen, int]:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fleet_server.py"), "--port", str(port),
                             "--slots", "1024", "--median", "0.001", "--sigma", "0.1"],
                            env={**os.environ, "PYTHONPATH": str(code)})
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the fleet server did not start")
            time.sleep(0.1)


def settings_for(tmp: Path, port: int, horizon: int):
    from wse_platform.config import settings_from_dict
    url = f"http://127.0.0.1:{port}/v1"

    def model(name: str) -> dict:
        return {"backend": "litellm", "model_id": f"hosted_vllm/{name}", "api_base": url, "endpoint_concurrency": 64,
                "sampling": {"temperature": 0.7, "max_tokens": 256}, "extra": {"timeout_s": 600, "max_retries": 2}}
    panel = [{"model": m, "prompt_version": "v1"} for m in ("fleet-j1", "fleet-j2", "fleet-j3")]
    return settings_from_dict({
        "models": {n: model(n) for n in ("fleet", "fleet-j1", "fleet-j2", "fleet-j3")},
        "cache_dir": str(tmp / "cache"), "warehouse_path": str(tmp / "wh.duckdb"),
        "artifacts_dir": str(tmp / "artifacts"), "concurrency": {"embedded": 1, "litellm": 8, "vllm": 1},
        "wse": {"models": ["fleet"], "horizon": horizon, "consistency_judges": panel, "richness_judges": panel},
        "ncp": {"narrators": ["fleet"], "player_model": "fleet", "auditor": {"model": "fleet-j1", "prompt_version": "v1"},
                "t_max": horizon, "architectures": NCP_ARCHS}})


NCP_ARCHS = ["baseline+adversarial", "baseline+natural", "memory+adversarial"]


def ncp_specs(n: int) -> list:
    import yaml
    from wse_platform.ncp.spec import NCP_DATASET_DIR, NarrativeSpec, read_index
    order, _ = read_index(NCP_DATASET_DIR / "index.yaml")
    out = []
    for spec_id in order[:n]:
        with open(NCP_DATASET_DIR / "specs" / f"{spec_id}.yaml", encoding="utf-8") as fh:
            out.append(NarrativeSpec.model_validate(yaml.load(fh, Loader=yaml.CSafeLoader)))
    return out


def run_ncp(args, settings, client, meter: "Meter", missing: list[str]) -> dict:
    """NCP-Bench: each architecture's cell on the first `--seeds` specs, t_max = `--horizon`, as the cell's
    run does it in one process: `ncp_episodes` (the live episodes through `ncp.kept.keeping`, one client),
    then `ncp_reaudit_episodes` under the in-loop auditor (the stored transcripts replayed through
    `ncp.kept.answered`: the live auditor answers come from memory, the rest through the client; a second
    client, as the re-audit step opens its own session)."""
    from wse_platform.ncp import kept
    from wse_platform.ncp.episode import EpisodeSetup, run_episodes
    from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows
    specs = ncp_specs(args.seeds)
    by_id = {sp.spec_id: sp for sp in specs}
    archs = NCP_ARCHS[: args.archs]
    phases = {"episodes": [0.0, 0.0, 0], "reaudit": [0.0, 0.0, 0]}   # cpu, wall, requests
    taken = 0
    for arch in archs:
        c0, w0 = time.process_time(), time.perf_counter()
        run_id = f"bench-{arch}-{os.getpid()}"   # the cell's run: both steps' sessions
        c = client(run_id)
        setup = EpisodeSetup.from_settings(settings, "fleet", arch, generation_version="bench")
        res = run_episodes(kept.keeping(c, arch), specs, setup)
        c.flush_records()
        n = len(c.drain_call_records())
        c.close()
        ph = phases["episodes"]
        ph[0] += time.process_time() - c0
        ph[1] += time.perf_counter() - w0
        ph[2] += n
        c0, w0 = time.process_time(), time.perf_counter()
        rows = sorted(({k: r.get(k) for k in ("model", "arch", "spec_id", "turn", "player_input", "narrator_text")}
                       for r in res.turn_rows()), key=lambda r: (r["spec_id"], r["turn"]))
        c = client(run_id)
        replay = kept.answered(c, arch)
        reaudit(replay, by_id, transcripts_from_rows(rows), setup.auditor, t_max=args.horizon,
                sampling=settings.ncp.sampling)
        taken += getattr(replay, "taken", 0)
        c.flush_records()
        n = len(c.drain_call_records()) + getattr(replay, "taken", 0)
        c.close()
        ph = phases["reaudit"]
        ph[0] += time.process_time() - c0
        ph[1] += time.perf_counter() - w0
        ph[2] += n
    live = phases["episodes"][2]
    cpu = phases["episodes"][0] + phases["reaudit"][0]
    out = {"archs": archs, "specs": len(specs), "t_max": args.horizon, "reaudit_answers_from_memory": taken}
    for name, (pcpu, pwall, n) in phases.items():
        out[name] = {"requests": n, "cpu_s": round(pcpu, 2), "wall_s": round(pwall, 2),
                     "cpu_ms_per_request": round(1000 * pcpu / max(1, n), 3),
                     "cpu_ms_per_live_request": round(1000 * pcpu / max(1, live), 3)}
    out.update({
        # per request that reached the client in the live episodes: the re-audit's cost is the live loop's
        "all": {"requests": live, "cpu_ms_per_request": round(1000 * cpu / max(1, live), 3)},
        "components_cpu_ms_per_request_all": {k: round(1000 * v / max(1, live), 3) for k, v in meter.cpu.items()},
        "component_calls": meter.calls, "not_timed_here": missing})
    return out


def run(args) -> dict:
    meter = Meter()
    missing = meter.install()   # first: the names imported below are the timed ones
    from wse_platform.config import WSE_ARCHITECTURES
    from wse_platform.llm import LLMClient
    from wse_platform.llm.accounting import write_call_records
    from wse_platform.warehouse import Warehouse
    from wse_platform.wse import early, judges
    from wse_platform.wse.seeds import build_episode_seeds
    from wse_platform.wse.simulate import simulate_cell
    from wse_platform.wse.worlds import load_initial_worlds
    from resources.llm import FLUSH_EVERY, FLUSH_INTERVAL_S

    seeds = build_episode_seeds(load_initial_worlds())[: args.seeds]
    archs = list(WSE_ARCHITECTURES)[: args.archs]
    proc, port = start_server(Path(args.code))
    tmp = Path(tempfile.mkdtemp(prefix="wse-request-cpu-"))
    out: dict = {"code": args.code, "load_average_before": [round(x, 2) for x in os.getloadavg()],
                 "archs": archs, "seeds": len(seeds), "horizon": args.horizon}
    try:
        settings = settings_for(tmp, port, args.horizon)
        wh = Warehouse(settings.warehouse)
        wh.ensure_schema()

        def client(run_id: str | None = None) -> LLMClient:
            return LLMClient(settings, run_id=run_id, progress=False,
                             record_sink=lambda rows: write_call_records(wh, rows),
                             flush_every=FLUSH_EVERY, flush_interval_s=FLUSH_INTERVAL_S)
        if args.benchmark == "ncp":
            out.update(run_ncp(args, settings, client, meter, missing))
            out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            return out
        trajectories = []
        # --- generation with the early judges, one client per cell (a run's session) ---
        c0, s0, w0 = time.process_time(), proc_cpu(proc.pid), time.perf_counter()
        gen_requests = 0
        for arch in archs:
            c = client()
            with early.early_judging(c, settings, "fleet", arch, force=True) as cj:
                simulate_cell(c, settings, "fleet", arch, seeds, early=cj)
            c.flush_records()
            gen_requests += len(c.drain_call_records())
            c.close()
            trajectories += [judges.JudgedTrajectory(model="fleet", arch=arch, seed=s, steps=tuple(cj._steps[s.seed_id]))
                             for s in seeds if cj._steps.get(s.seed_id)]
        gen_cpu, gen_server, gen_wall = time.process_time() - c0, proc_cpu(proc.pid) - s0, time.perf_counter() - w0
        # --- the judging step's replay: every answer from the cache ---
        c0, w0 = time.process_time(), time.perf_counter()
        c = client()
        judges.judge_consistency(c, settings, settings.wse.consistency_judge, trajectories)
        judges.judge_richness(c, settings, settings.wse.richness_judge, trajectories)
        c.flush_records()
        replay = c.drain_call_records()
        c.close()
        rep_cpu, rep_wall = time.process_time() - c0, time.perf_counter() - w0
        hits = sum(1 for r in replay if r.get("cache_hit"))
        total = gen_requests + len(replay)
        out.update({
            "generation_and_early_judging": {"requests": gen_requests, "cpu_s": round(gen_cpu, 2),
                                             "cpu_ms_per_request": round(1000 * gen_cpu / gen_requests, 3),
                                             "wall_s": round(gen_wall, 2),
                                             "server_cpu_ms_per_request": round(1000 * gen_server / gen_requests, 3)},
            "judging_replay": {"requests": len(replay), "cache_hits": hits, "cpu_s": round(rep_cpu, 2),
                               "cpu_ms_per_request": round(1000 * rep_cpu / max(1, len(replay)), 3),
                               "wall_s": round(rep_wall, 2)},
            "all": {"requests": total, "cpu_ms_per_request": round(1000 * (gen_cpu + rep_cpu) / total, 3)},
            "components_cpu_ms_per_request_all": {k: round(1000 * v / total, 3) for k, v in meter.cpu.items()},
            "component_calls": meter.calls,
            "not_timed_here": missing,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        })
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benchmark", choices=("wse", "ncp"), default="wse")
    ap.add_argument("--archs", type=int, default=3, help="architectures (cells), in WSE_ARCHITECTURES order "
                    "(NCP: baseline+adversarial, baseline+natural, memory+adversarial)")
    ap.add_argument("--seeds", type=int, default=42, help="WSE seeds / NCP specs")
    ap.add_argument("--horizon", type=int, default=3, help="WSE horizon / NCP t_max")
    ap.add_argument("--code", default=str(REPO), help="the repository whose wse_platform is measured")
    ap.add_argument("--ref", help="measure REF's code first (temporary git worktree), then this tree's")
    args = ap.parse_args()
    if args.ref:
        sys.path.insert(0, str(REPO / "bench"))
        from checkouts import ref_worktree, run_json
        with ref_worktree(args.ref) as wt:
            rows = []
            for code in (wt, REPO):
                rows.append(run_json(__file__, ["--benchmark", args.benchmark, "--archs", str(args.archs), "--seeds",
                                                str(args.seeds), "--horizon", str(args.horizon), "--code", str(code)],
                                     code))
                print(json.dumps({"ref" if code == wt else "this tree": rows[-1]}, indent=1), flush=True)
            a, b = (r["all"]["cpu_ms_per_request"] for r in rows)
            print(json.dumps({"cpu_ms_per_request": {args.ref: a, "this tree": b, "ratio": round(b / a, 3)}}))
        return 0
    sys.path.insert(0, args.code)
    os.environ.setdefault("WSE_NO_PROGRESS", "1")
    print(json.dumps(run(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
