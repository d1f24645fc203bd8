"""Several servers for one model: TWO real llama-cpp-python servers (the embedded GGUF) on two
127.0.0.1 ports behind one config model (`api_base` list -> litellm Router).

Both receive requests; killing one mid-run loses no result and counts no call twice (the
remaining calls go to the other server); `llm_usage` shows backend calls per endpoint.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Literal

import pytest
from pydantic import BaseModel

from tests.llm.conftest import make_settings, needs_llama, smollm2_gguf
from tests.llm.llama_server import MISSING, start, stop
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.accounting import write_call_records
from wse_platform.sql_models import load_models
from wse_platform.warehouse import Warehouse

pytestmark = [needs_llama, pytest.mark.skipif(bool(MISSING), reason=f"llama_cpp.server needs {MISSING}")]


class Answer(BaseModel):
    word: Literal["yes", "no"]  # a few tokens under the grammar: calls finish (no `length`) and stay fast


@pytest.fixture
def two_servers(tmp_path):
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("the SmolLM2 GGUF is not installed")
    procs = []
    try:
        for k in range(2):
            procs.append(start(gguf, tmp_path / f"server{k}.log", n_ctx=512))
        yield procs
    finally:
        for proc, _ in procs:
            stop(proc)


def test_two_servers_share_the_load_and_survive_losing_one(two_servers, tmp_path):
    (proc_a, url_a), (proc_b, url_b) = two_servers
    settings = make_settings(tmp_path, pool={
        "backend": "litellm", "model_id": "openai/smollm2-local", "api_base": [url_a, url_b],
        "endpoint_concurrency": 1, "sampling": {"temperature": 0.7, "max_tokens": 32, "seed": 1},
        "extra": {"structured_output": "json_object_schema", "max_retries": 4, "retry_base_s": 0.05,
                  "timeout_s": 60}})
    wh = Warehouse(tmp_path / "wh.duckdb")
    client = LLMClient(settings, run_id="failover", record_sink=lambda rows: write_call_records(wh, rows),
                       flush_every=1)
    reqs = [LLMRequest(role="test.pool", model="pool", output_model=Answer,
                       messages=[{"role": "user", "content": f"Is {i} an even number? Answer as JSON."}])
            for i in range(8)]

    killed = threading.Event()

    def kill_b_when_both_answered() -> None:  # mid-run: after both servers answered something
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            seen = {r["endpoint"] for r in client.call_records() if r["endpoint"]}
            if len(seen) == 2 or len(client.call_records()) >= 3:
                proc_b.kill()
                killed.set()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_b_when_both_answered, daemon=True)
    watcher.start()
    results = client.complete_many(reqs)
    watcher.join()
    client.flush_records()
    assert killed.is_set()

    # no result lost: every request has a result and none failed for transport reasons
    assert all(r.ok or r.failure.error_kind != "transport" for r in results), [r.failure for r in results]
    recs = client.call_records()
    # no call counted twice: one record per (request, attempt), and the warehouse holds exactly these
    assert len({(r["request_key"], r["attempt"]) for r in recs}) == len(recs) == sum(r.attempts for r in results)
    assert wh.query("SELECT count(*) AS n FROM llm_calls")["n"][0] == len(recs)
    endpoints = [r["endpoint"] for r in recs]
    assert set(endpoints) == {url_a, url_b}, endpoints  # both servers received requests
    assert recs[-1]["endpoint"] == url_a  # after the kill, the remaining calls went to the survivor

    (usage,) = [m for m in load_models() if m.name == "llm_usage"]
    usage.build(wh)
    per_endpoint = wh.query("SELECT calls_per_endpoint::JSON::VARCHAR AS j FROM llm_usage")["j"][0]
    counts = json.loads(per_endpoint)
    assert set(counts) == {url_a, url_b} and sum(counts.values()) == len(recs)
