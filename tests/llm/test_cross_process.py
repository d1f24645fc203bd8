"""Across processes: one request in flight per request key (issue 23 item 3) and one in-flight
limit per endpoint (issue 24 item 2).

Before: four `wse materialize` of one partition started at once sent the same requests twice
(two processes missed the cache together) and `llm_calls` counted both; each process (and each
model) kept its own in-flight limit, so a server with N slots saw runs x N requests.
Real processes against the fault-injecting stand-in server, which counts requests in flight.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.llm.injecting_server import InjectingServer, reply

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import json, os, sys, time
from pathlib import Path
from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest

tmp, url, limit, run, start, n, model, parties = sys.argv[1:9]
models = {m: {"backend": "litellm", "model_id": f"openai/{m}", "api_base": url, "endpoint_concurrency": int(limit),
              "extra": {"structured_output": "prompt", "max_retries": 0}} for m in ("judge_a", "judge_b")}
client = LLMClient(make_settings(Path(tmp), **models), run_id=run, progress=False)
reqs = [LLMRequest(role="r", model=model, messages=[{"role": "user", "content": f"q{i}"}])
        for i in range(int(start), int(start) + int(n))]
client.backend(model)
barrier = Path(tmp) / "barrier"
barrier.mkdir(exist_ok=True)
(barrier / run).touch()
while len(os.listdir(barrier)) < int(parties):  # all processes ask at the same moment
    time.sleep(0.01)
client.complete_many(reqs)
print(json.dumps([[r["request_key"], r["cache_hit"]] for r in client.call_records()]))
"""


def _run_workers(tmp_path: Path, url: str, specs: list[tuple[str, int, int, int, str]]) -> list[list]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSE_SLOTS_DIR": str(tmp_path / "slots")}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), url, str(limit), run, str(start), str(n),
                               model, str(len(specs))], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for run, limit, start, n, model in specs]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=120)
            assert p.returncode == 0, stderr[-2000:]
            out.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:  # a worker that hangs is not left running after the test
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return out


def test_same_requests_from_four_processes_are_sent_once_and_counted_once(tmp_path):
    with InjectingServer([reply("Y")], delay_s=0.3) as srv:
        records = _run_workers(tmp_path, srv.url, [(f"run-{k}", 8, 0, 6, "judge_a") for k in range(4)])
        prompts = [r["messages"][-1]["content"] for r in srv.requests]
    assert sorted(prompts) == sorted(f"q{i}" for i in range(6))  # each request reached the server once
    paid = [key for rows in records for key, hit in rows if not hit]
    assert len(paid) == len(set(paid)) == 6  # ... and is counted once (the others are cache hits)
    assert sum(len(rows) for rows in records) == 24


def test_two_processes_and_two_models_never_exceed_the_endpoint_limit(tmp_path):
    with InjectingServer([reply("Y")], delay_s=0.25) as srv:
        _run_workers(tmp_path, srv.url, [("run-a", 3, 0, 9, "judge_a"), ("run-b", 3, 100, 9, "judge_b")])
        seen = srv.max_in_flight
    assert len(srv.requests) == 18
    assert seen == 3  # never more than the limit, and the limit is used


def test_a_claim_left_by_a_dead_process_is_taken_over(tmp_path):
    import socket

    from tests.llm.conftest import make_settings
    from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
    from wse_platform.llm.cache import ResponseCache, content_key

    settings = make_settings(tmp_path)
    req = LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": "hi"}])
    backend = ScriptedBackend({"*": "answer"}, namespace="claims")
    client = LLMClient(settings, backends={"smollm2": backend})
    key = content_key(client._prepare(req).request_key, 1)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cache = ResponseCache(settings.cache)
    cache._con.execute("INSERT INTO claims VALUES (?, 'killed-run', ?, ?, ?)",
                       (key, socket.gethostname(), int(dead.stdout), time.time()))
    result = client.complete(req)  # before the takeover this waited for an answer that never comes
    assert result.output == "answer" and backend.n_calls == 1
