"""CPU of NCP-Bench's own code per request (prompts, audit, ledger, HiAgent, re-audit), without the LLM client.

`bench/request_cpu.py --benchmark ncp` measures a cell's whole client side, whose per-request figure
moves by +-20 % with the machine's load (threads, the event loop, SQLite, the network). This script
takes the client out: it records the answers of one real run (the simulated server of
`bench/fleet_server.py`, the platform's client), then replays the cells' episodes in one thread
through a stub client that returns the recorded answers (parsed as the client parses them; the
stub's own CPU is measured and subtracted), and reports the CPU per request of what is left: the
episode loop (`ncp.episode._play`: requests built, outputs applied, rows written) through
`ncp.kept.keeping`, then the in-loop re-audit (`ncp.reaudit._replay` through `ncp.kept.answered`,
answers from memory), as a cell's run does them.

    PYTHONPATH=. python bench/ncp_domain_cpu.py [--specs 30] [--t-max 10] [--repeat 5]
    PYTHONPATH=. python bench/ncp_domain_cpu.py --ref main    # REF's code and this tree's, interleaved

With `--ref REF` the answers are recorded once (this tree's code; both send the same requests) and
REF's code (a temporary git worktree) and this tree's are replayed alternately, `--repeat` times
each; printed: the median CPU ms per request of each and their ratio, with the load average.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHS = ["baseline+adversarial", "baseline+natural", "memory+adversarial"]


def key(req) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([req.role, req.model, req.n, req.messages, req.sampling.model_dump(mode="json"),
                         req.allow_truncated], sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()


def record(args, path: Path) -> None:
    """One real run of every cell (episodes, then the re-audit), every answer's texts saved by request."""
    sys.path.insert(0, str(REPO / "bench"))
    import request_cpu as rc
    from wse_platform.llm import LLMClient
    from wse_platform.ncp.episode import EpisodeSetup, run_episodes
    from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows

    answers: dict[str, list[str]] = {}

    class Recording:
        def __init__(self, client):
            self._c = client

        def __getattr__(self, name):
            return getattr(self._c, name)

        def complete(self, req):
            return self.complete_many([req])[0]

        def complete_many(self, reqs):
            out = self._c.complete_many(reqs)
            for q, r in zip(reqs, out):
                if not r.ok:
                    raise RuntimeError(f"{q.role}: {r.failure}")
                answers[key(q)] = list(r.texts)
            return out

    proc, port = rc.start_server(REPO)
    tmp = Path(tempfile.mkdtemp(prefix="ncp-domain-rec-"))
    try:
        settings = rc.settings_for(tmp, port, args.t_max)
        specs = rc.ncp_specs(args.specs)
        for arch in ARCHS:
            c = LLMClient(settings, run_id=f"rec-{arch}", progress=False)
            setup = EpisodeSetup.from_settings(settings, "fleet", arch, generation_version="bench")
            res = run_episodes(Recording(c), specs, setup)
            rows = sorted(({k: r.get(k) for k in ("model", "arch", "spec_id", "turn", "player_input", "narrator_text")}
                           for r in res.turn_rows()), key=lambda r: (r["spec_id"], r["turn"]))
            reaudit(Recording(c), {s.spec_id: s for s in specs}, transcripts_from_rows(rows), setup.auditor,
                    t_max=args.t_max, sampling=settings.ncp.sampling)
            c.close()
        path.write_text(json.dumps({"t_max": args.t_max, "specs": args.specs, "port": port, "answers": answers}))
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def replay(args, path: Path) -> dict:
    """The cells again in this process's code, one thread, answers from `path`; CPU per request."""
    sys.path.insert(0, str(REPO / "bench"))
    import request_cpu as rc
    from wse_platform.llm.types import LLMResult
    from wse_platform.llm.validation import parse_sample
    from wse_platform.ncp import kept, tokens
    from wse_platform.ncp.episode import EpisodeSetup, _play
    from wse_platform.ncp.prompter import Prompter
    from wse_platform.ncp.reaudit import _replay, transcripts_from_rows

    data = json.loads(path.read_text())
    answers = data["answers"]
    tmp = Path(tempfile.mkdtemp(prefix="ncp-domain-rep-"))   # never written: the stub answers every request
    settings = rc.settings_for(tmp, data["port"], data["t_max"])
    shutil.rmtree(tmp, ignore_errors=True)
    specs = rc.ncp_specs(data["specs"])
    by_id = {s.spec_id: s for s in specs}
    tokens.counter(Prompter(EpisodeSetup.from_settings(settings, "fleet", ARCHS[2])).hiagent_texts().tokenizer_model)

    from checkouts import TimedStub

    class Stub(TimedStub):
        use_cache = True

        def __init__(self, run_id):
            super().__init__()
            self.run_id = run_id

        def answer(self, q):
            texts = answers[key(q)]
            outs = []
            for t in texts:
                p = parse_sample(t, q.output_model, q.choices)
                assert p.ok, (q.role, p.message)
                outs.append(p.value)
            return LLMResult(role=q.role, model=q.model, outputs=outs, texts=texts)

    cpu = {"episodes": 0.0, "reaudit": 0.0}
    requests = missed = 0
    for arch in ARCHS:
        setup = EpisodeSetup.from_settings(settings, "fleet", arch, generation_version="bench")
        stub = Stub(f"rep-{arch}")
        t0 = time.thread_time()
        runs = []
        live = kept.keeping(stub, arch)
        for spec in specs:
            runs += _play(live, [spec], setup).runs
        cpu["episodes"] += time.thread_time() - t0 - stub.cpu
        requests += stub.requests
        rows = sorted(({k: r.get(k) for k in ("model", "arch", "spec_id", "turn", "player_input", "narrator_text")}
                       for run in runs for r in run.turn_rows), key=lambda r: (r["spec_id"], r["turn"]))
        stub2 = Stub(f"rep-{arch}")
        t0 = time.thread_time()
        answered = kept.answered(stub2, arch)
        for tr in transcripts_from_rows(rows):
            _replay(answered, Prompter(setup), by_id, [tr], setup.auditor, data["t_max"])
        cpu["reaudit"] += time.thread_time() - t0 - stub2.cpu
        missed += stub2.requests   # re-audit requests not answered from memory (0 when they all were)
    return {"requests": requests, "reaudit_not_from_memory": missed, "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
            "cpu_ms_per_request": round(1000 * sum(cpu.values()) / requests, 4),
            "episodes_ms_per_request": round(1000 * cpu["episodes"] / requests, 4),
            "reaudit_ms_per_live_request": round(1000 * cpu["reaudit"] / requests, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--specs", type=int, default=30)
    ap.add_argument("--t-max", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ref", help="replay REF's code (temporary git worktree) and this tree's alternately")
    ap.add_argument("--answers", help=argparse.SUPPRESS)
    ap.add_argument("--code", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("WSE_NO_PROGRESS", "1")
    if args.answers:   # one replay in this process (`--code` is on sys.path first)
        sys.path.insert(0, args.code)
        print(json.dumps(replay(args, Path(args.answers))), flush=True)
        return 0
    sys.path.insert(0, str(REPO))
    tmp = Path(tempfile.mkdtemp(prefix="ncp-domain-"))
    answers = tmp / "answers.json"
    record(args, answers)
    sys.path.insert(0, str(REPO / "bench"))
    from checkouts import ref_worktree, run_json
    try:
        with (ref_worktree(args.ref, tmp / "ref") if args.ref else contextlib.nullcontext()) as wt:
            codes = [(args.ref, wt), ("this tree", REPO)] if args.ref else [("this tree", REPO)]
            got: dict[str, list[dict]] = {name: [] for name, _ in codes}
            loads = []
            for _ in range(args.repeat):
                for name, code in codes:
                    loads.append(os.getloadavg()[0])
                    got[name].append(run_json(__file__, ["--answers", str(answers), "--code", str(code)], code))
        out = {"specs": args.specs, "t_max": args.t_max, "repeat": args.repeat,
               "load_average_1m": [round(min(loads), 2), round(max(loads), 2)]}
        for name, rows in got.items():
            out[name] = {"requests": rows[0]["requests"], "reaudit_not_from_memory": rows[0]["reaudit_not_from_memory"],
                         **{k: statistics.median(r[k] for r in rows) for k in
                            ("cpu_ms_per_request", "episodes_ms_per_request", "reaudit_ms_per_live_request")},
                         "runs_cpu_ms_per_request": [r["cpu_ms_per_request"] for r in rows]}
        if args.ref:
            out["ratio"] = round(out["this tree"]["cpu_ms_per_request"] / out[args.ref]["cpu_ms_per_request"], 3)
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
