"""Episodes without a result (issue 20): a transport failure ends only its own episode, unless the
server is down (issue 23's guarantee: then the run fails as an infrastructure failure)."""
from __future__ import annotations

import pytest

from tests.ncp._ncp_helpers import Script, make_spec, text_of
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.llm.errors import LLMTransportError
from wse_platform.ncp.episode import ROLE_NARRATOR, Architecture, AuditorSetup, EpisodeSetup, run_episodes
from wse_platform.ncp.spec import NarrativeSpec


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def other_spec(spec_id: str = "m1") -> NarrativeSpec:
    """The toy spec with another player (so its prompts differ from m0's)."""
    spec = make_spec(spec_id)
    return spec.model_copy(update={"meta": spec.meta.model_copy(update={"player_role": "Inspector Gray"})})


def failing_for(marker: str | None, role: str | None = ROLE_NARRATOR):
    """The default script, except that `role`'s calls whose prompt holds `marker` fail on transport
    (an HTTP 503 that outlasted the backend's retries); marker None: every such call; role None: every role."""
    script = Script()

    def answer(call):
        if (role is None or call.role == role) and (marker is None or marker in text_of(call)):
            return RuntimeError("HTTP 503 from http://127.0.0.1:9/v1: upstream unavailable (after 2 retries)")
        return script(call)
    return answer


def play(settings, answer, specs, t_max=2):
    backend = ScriptedBackend(answer, namespace="ncp-failures-test")  # one cache across the runs of a test
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"),
                         player_model="player", auditor=AuditorSetup("aud"), t_max=t_max)
    return run_episodes(client, specs, setup)


def test_a_transport_failure_ends_only_its_episode_which_is_listed_and_the_others_are_written(settings):
    """Before: the LLMTransportError of one episode's narrator call failed the whole cell."""
    result = play(settings, failing_for("Inspector Gray"), [make_spec("m0"), other_spec("m1")])
    assert [(e["spec_id"], e["termination"]) for e in result.episode_rows()] == [("m0", "SURVIVAL")]
    assert {r["spec_id"] for r in result.turn_rows()} == {"m0"} and len(result.turn_rows()) == 3
    (f,) = result.failed_rows()
    assert (f["spec_id"], f["role"], f["error_kind"], f["turn"]) == ("m1", ROLE_NARRATOR, "transport", 1)
    assert "HTTP 503" in f["message"]


def test_every_episode_failing_on_transport_fails_the_run_as_an_infrastructure_failure(settings):
    with pytest.raises(LLMTransportError, match="every episode that sent a request to the server failed"):
        play(settings, failing_for(None), [make_spec("m0"), other_spec("m1")])


def test_a_refused_connection_is_never_isolated_to_one_episode(settings):
    """Guard (passes on the old code too): no server listening is an infrastructure error, not a transport
    failure, so even when only one episode's call met it the run fails."""
    from wse_platform.llm.errors import LLMInfrastructureError

    def answer(call):
        if call.role == ROLE_NARRATOR and "Inspector Gray" in text_of(call):
            return LLMInfrastructureError("APIConnectionError: cannot connect to http://127.0.0.1:9/v1: refused")
        return Script()(call)
    with pytest.raises(LLMInfrastructureError, match="refused") as err:
        play(settings, answer, [make_spec("m0"), other_spec("m1")])
    assert not isinstance(err.value, LLMTransportError)


def test_episodes_answered_from_the_cache_do_not_hide_a_dead_server(settings):
    """m0 was played before (every answer cached); the server now fails every call: m1 is the only
    episode that reached the server and it failed on transport, so the run fails."""
    assert play(settings, Script(), [make_spec("m0")]).episode_rows()
    with pytest.raises(LLMTransportError, match=r"\(1 of 2 episodes"):
        play(settings, failing_for(None, role=None), [make_spec("m0"), other_spec("m1")])


def test_cells_reaudit_and_ablation_list_their_failed_episodes_apart_and_retry_them(tmp_path, monkeypatch):
    """Through Dagster: an isolated transport failure is listed (analysis ncp_episodes) and the cell is
    written; the re-audit's and the ablation's failed episodes are listed under their own analysis
    (before: never listed) and the next run plays them again; a dead server fails the cell's run."""
    from tests.ncp._ncp_helpers import ncp_asset_runner, scripted_cell
    from wse_platform.run_guard import failure_errors, infrastructure_error
    from wse_platform.warehouse import Warehouse

    broken = {"transport": "Ethan Hunt", "aud2": True}  # movie01's player is Ethan Hunt, movie00's Jason Bourne

    def override(call):
        if call.role == ROLE_NARRATOR and broken["transport"] is not None and broken["transport"] in text_of(call):
            return RuntimeError("HTTP 503 from http://127.0.0.1:9/v1: upstream unavailable (after 2 retries)")
        if call.model_id == "aud2.gguf" and call.role == "ncp.conflict_check" and broken["aud2"]:
            return ["no verdict today"] * call.n
        return None

    run, cell, _, cfg = scripted_cell(tmp_path, monkeypatch, "ncp-failures-assets", "baseline+adversarial", 1,
                                      override, more_models=("aud2",))
    cfg["ncp"].update(spec_ids=["movie00", "movie01"], reaudit_auditors=[{"model": "aud2"}],
                      ablation={"narrator": "smollm2", "arch": "baseline+adversarial",
                                "auditors": [{"model": "smollm2"}, {"model": "aud2"}]})
    run = ncp_asset_runner(tmp_path, cfg)
    wh = Warehouse(tmp_path / "wh.duckdb")

    def listed():
        return sorted((r["analysis"], r["spec_id"], r["auditor_id"].split(":")[1], r["error_kind"], r["retry_round"])
                      for r in wh.query("SELECT * FROM ncp_failed_episodes").to_dicts())

    run({"ncp_specs"})
    run({"ncp_episodes", "ncp_turns"}, cell)
    assert wh.query("SELECT spec_id FROM ncp_episodes")["spec_id"].to_list() == ["movie00"]
    run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    broken["transport"] = None
    run({"ncp_ablation_episodes", "ncp_ablation_turns"})
    assert listed() == [("ncp_ablation_episodes", "movie00", "aud2", "invalid_json", 0),
                        ("ncp_ablation_episodes", "movie01", "aud2", "invalid_json", 0),
                        ("ncp_episodes", "movie01", "smollm2", "transport", 0),
                        ("ncp_reaudit_episodes", "movie00", "aud2", "invalid_json", 0)]

    broken["aud2"] = False  # the next runs play them again, with fresh attempts past the cached failures
    run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    run({"ncp_ablation_episodes", "ncp_ablation_turns"})
    assert listed() == [("ncp_episodes", "movie01", "smollm2", "transport", 0)]
    assert wh.query("SELECT count(*) AS n FROM ncp_reaudit_episodes WHERE auditor_id LIKE '%aud2%'")["n"][0] == 1
    assert wh.query("SELECT count(*) AS n FROM ncp_ablation_episodes WHERE auditor_id LIKE '%aud2%'")["n"][0] == 2

    # the server goes down: every narrator call fails; turn 2 (t_max 2) is not in the cache, so both episodes
    # reach the server and fail on transport: the run fails as an infrastructure failure (issue 23)
    broken["transport"] = ""
    cfg["ncp"]["t_max"] = 2
    result = ncp_asset_runner(tmp_path, cfg)({"ncp_episodes", "ncp_turns"}, cell, fails=True)
    ((_, error),) = failure_errors(result)
    assert "every episode that sent a request to the server failed on transport" in infrastructure_error(error)
    assert wh.query("SELECT spec_id FROM ncp_episodes")["spec_id"].to_list() == ["movie00"]  # kept as it was


def test_a_transport_failure_in_the_reaudit_ends_only_that_replay(settings):
    """Before: the re-audit sent each stage of every transcript in one batch, so one request's transport
    failure failed the replay of every transcript."""
    from tests.ncp.test_reaudit import auditor_script, make_spec as harbour_spec, stored_rows
    from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows

    replay = auditor_script()

    def answer(call):
        if call.role == "ncp.conflict_check" and "Aurora-m1" in text_of(call):
            return RuntimeError("Timeout: no complete answer within timeout_s=60 s (after 2 retries)")
        return replay(call)

    client = LLMClient(settings, backends={"aud2": ScriptedBackend(answer)}, progress=False)
    res = reaudit(client, {s: harbour_spec(s) for s in ("m0", "m1")},
                  transcripts_from_rows(stored_rows(["m0", "m1"], {"m0": 2, "m1": 2})), AuditorSetup("aud2"), t_max=2)
    assert [(e["spec_id"], e["termination"]) for e in res.episode_rows()] == [("m0", "SURVIVAL")]
    assert [(f["spec_id"], f["role"], f["error_kind"], f["turn"]) for f in res.failed_rows()] == [
        ("m1", "ncp.conflict_check", "transport", 1)]
