"""Progress lines while `wse materialize` runs: an NCP cell on the scripted backend through the CLI
(the terminal's overall line and the run's own lines in the Dagster event log, done / planned total
at the end), and `--parallel` worker processes counted by the command."""
from __future__ import annotations

import re

import yaml

from resources import LLMResource
from tests.ncp._ncp_helpers import Script, statuses, text_of

FINAL = re.compile(r"(\d+)/≤(\d+) requests \(\d+ %; (\d+) from cache, (\d+) failed\).*, done$")


def _ncp_answer():
    script = Script()

    def answer(call):
        if call.role == "ncp.commitment_status":
            ids = re.findall(r"^- (c_[0-9]+) \[", text_of(call), flags=re.MULTILINE)
            return [statuses(ids=tuple(ids))] * call.n
        return script(call)
    return answer


def _calls(tmp_path, run_id: str) -> tuple[int, int, int]:
    """(requests, from cache, failed) of one run in llm_calls (every answer valid at its first attempt:
    one record per request)."""
    from wse_platform.warehouse import Warehouse
    row = Warehouse(tmp_path / "wh.duckdb").query(
        "SELECT count(*) AS n, count(*) FILTER (cache_hit) AS hits, count(*) FILTER (NOT valid) AS bad, "
        "max(attempt) AS attempts FROM llm_calls WHERE run_id = ?", [run_id]).to_dicts()[0]
    assert row["attempts"] == 1
    return row["n"], row["hits"], row["bad"]


def _last_progress(instance, run_id: str) -> str:
    messages = [e.user_message for e in instance.all_logs(run_id) if e.user_message.startswith("progress ")]
    assert messages, "no progress line in the run's event log"
    return messages[-1]


def test_progress_in_the_run_log_and_the_terminal_of_wse_materialize(tmp_path, monkeypatch, capsys):
    """A run without the plan's tag (as the UI launches it) plans its step itself; then `wse materialize`
    runs the cell again, every answer from the cache, and says so in its terminal line and the run log."""
    from tests.conftest import route_llm_clients
    from dagster import AssetKey, RunsFilter

    from wse_platform import cli
    from wse_platform.definitions import build_definitions
    from wse_platform.llm import ScriptedBackend
    from wse_platform.runner import RunPlanStep, get_instance, run_in_location
    from wse_platform.config import load_settings

    backend = ScriptedBackend(_ncp_answer(), namespace="progress-test")
    route_llm_clients(monkeypatch, {"smollm2": backend})
    cfg = {"profile": "demo", "warehouse_path": str(tmp_path / "wh.duckdb"), "cache_dir": str(tmp_path / "cache"),
           "artifacts_dir": str(tmp_path / "artifacts"),
           "models": {"smollm2": {"backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf"}},
           "wse": {"models": []}, "endings": {"forecaster": None, "generators": [], "corpora": []},
           "ncp": {"narrators": ["smollm2"], "architectures": ["memory+adversarial"], "player_model": "smollm2",
                   "auditor": {"model": "smollm2"}, "t_max": 2, "n_specs": 1, "extraction_models": [],
                   "reaudit_auditors": []}}
    path = tmp_path / "wse.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("WSE_CONFIG", str(path))
    # plan: the opening, per turn (2) the narrator, its subgoal summary, the player and five audit stages
    planned = 1 + 2 * (1 + 1 + 1 + 5)
    cell = "memory+adversarial|smollm2"

    defs, instance = build_definitions(str(path)), get_instance(load_settings(path))
    for keys, pk in ((["ncp_specs"], None), (["ncp_episodes", "ncp_turns"], cell)):
        result = run_in_location(defs, RunPlanStep([AssetKey(k) for k in keys], pk), instance, {})
        assert result.success
    n, hits, bad = _calls(tmp_path, result.run_id)
    # a fresh cache: every request went to the model, but for one asked twice in a batch (served as a hit)
    assert n - hits == len(backend.calls) and 0 < n <= planned and bad == 0
    last = _last_progress(instance, result.run_id)
    assert last.startswith(f"progress ncp_episodes [{cell}]: "), last
    assert FINAL.search(last).groups() == (str(n), str(planned), str(hits), "0"), last

    rc = cli.main(["--config", str(path), "materialize", "--select", "ncp_episodes", "ncp_turns"])
    out = capsys.readouterr().out
    assert rc == 0, out
    (run,) = [r for r in instance.get_runs(RunsFilter()) if r.tags.get("wse/planned_requests")]
    assert run.tags["wse/planned_requests"] == f"ncp_episodes={planned}"
    assert _calls(tmp_path, run.run_id) == (n, n, 0)      # the same requests, all from the cache
    expect = (str(n), str(planned), str(n), "0")
    (overall,) = [ln for ln in out.splitlines() if ln.startswith("progress: ") and ln.endswith(", done")]
    assert FINAL.search(overall).groups() == expect, overall
    assert FINAL.search(_last_progress(instance, run.run_id)).groups() == expect


# ---- --parallel: the runs' requests are made in worker processes -------------------------------------

N_ASKS = 5


def _toy_asset():
    from dagster import MaterializeResult, StaticPartitionsDefinition, asset

    @asset(partitions_def=StaticPartitionsDefinition(["a", "b"]))
    def asks(context, llm: LLMResource):
        from wse_platform.llm import LLMRequest
        with llm.session(context) as client:
            client.complete_many([LLMRequest(role="test.echo", model="m", messages=[
                {"role": "user", "content": f"cell {context.partition_key} question {i}"}]) for i in range(N_ASKS)])
        return MaterializeResult()
    return asks


def toy_definitions(*_args):
    """The definitions a worker process loads: model `m` answered by a scripted backend."""
    import os

    from dagster import Definitions

    import wse_platform.llm as llm_mod
    from wse_platform.llm import ScriptedBackend

    base = llm_mod.LLMClient
    if not getattr(base, "_progress_test", False):
        class ScriptedClient(base):
            _progress_test = True

            def __init__(self, settings, *args, **kwargs):
                kwargs["backends"] = {"m": ScriptedBackend(lambda call: "fine")}
                super().__init__(settings, *args, **kwargs)
        llm_mod.LLMClient = ScriptedClient
    return Definitions(assets=[_toy_asset()], resources={"llm": LLMResource(config_path=os.environ["WSE_CONFIG"])})


def test_parallel_workers_requests_are_counted_by_the_command(config_file, monkeypatch, capsys):
    from dagster import DagsterInstance, RunsFilter

    from wse_platform import cli, progress

    import wse_platform.llm as llm_mod
    # toy_definitions swaps the LLM client class (meant for the worker processes); put it back after the test
    monkeypatch.setattr(llm_mod, "LLMClient", llm_mod.LLMClient)
    monkeypatch.setattr(cli, "_defs", lambda args: toy_definitions())
    monkeypatch.setattr(cli, "_defs_loader", lambda args: (f"{__name__}:toy_definitions", ()))
    # the toy asset is not in `wse plan`: each run plans N_ASKS requests
    monkeypatch.setattr(progress, "step_totals", lambda settings, steps: [{"asks": N_ASKS} for _ in steps])
    rc = cli.main(["--config", str(config_file), "materialize", "--parallel", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    (overall,) = [ln for ln in out.splitlines() if ln.startswith("progress: ") and ln.endswith(", done")]
    assert FINAL.search(overall).groups() == (str(2 * N_ASKS), str(2 * N_ASKS), "0", "0"), overall
    instance = DagsterInstance.get()
    runs = instance.get_runs(RunsFilter())
    assert len(runs) == 2 and {r.tags.get("wse/planned_requests") for r in runs} == {f"asks={N_ASKS}"}
    for r in runs:
        last = [e.user_message for e in instance.all_logs(r.run_id) if e.user_message.startswith("progress ")][-1]
        assert FINAL.search(last).groups() == (str(N_ASKS), str(N_ASKS), "0", "0"), last
