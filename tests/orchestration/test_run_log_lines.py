"""What an LLM step stores in its run's event log: the step's own progress lines (`wse_platform.progress`,
done / planned total), not also the LLM client's per-batch lines (`wse_platform.llm.progress`, one every
10 requests). Each log line is a stored Dagster event (issue 24: ~150 events per WSE cell run; a
126-request richness batch added 13 of them, saying what the step's lines say)."""
from __future__ import annotations

from dagster import DagsterInstance, MaterializeResult, asset, materialize

from resources.llm import LLMResource
from wse_platform.llm import LLMRequest, ScriptedBackend


def test_an_llm_step_logs_its_progress_once_not_per_batch(config_file, monkeypatch):
    from tests.conftest import route_llm_clients
    backend = ScriptedBackend({"*": "an answer"})
    route_llm_clients(monkeypatch, {"smollm2": backend})
    n = 40

    @asset
    def batch_of_answers(context, llm: LLMResource) -> MaterializeResult:
        with llm.session(context) as client:
            client.complete_many([LLMRequest(role="test.batch", model="smollm2",
                                             messages=[{"role": "user", "content": f"question {i}"}])
                                  for i in range(n)])
        return MaterializeResult()

    instance = DagsterInstance.ephemeral()
    result = materialize([batch_of_answers], resources={"llm": LLMResource(config_path=str(config_file))},
                         instance=instance)
    assert result.success and len(backend.calls) == n
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    batch = [m for m in messages if m.startswith("LLM test.batch")]
    assert batch == []                                   # before: 10 lines (4/40, 8/40, ... 40/40)
    step = [m for m in messages if m.startswith("progress ")]
    assert step and f"{n} requests" in step[-1] and step[-1].endswith(", done"), step  # the step's own line
