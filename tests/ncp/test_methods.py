"""Narrator methods as plug-ins (`ncp.narrator_methods`), tested with a toy method of our own."""
from __future__ import annotations

import pytest

from tests.ncp._ncp_helpers import Recorder, Script, diff, make_spec, text_of
from tests.ncp.toy_narrator import EchoNarrator
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp.episode import ROLE_CONFLICT_CHECK, EpisodeSetup, run_episodes
from wse_platform.ncp.methods import ROLE_METHOD

METHODS = {"toy": "tests.ncp.toy_narrator:EchoNarrator", "broken": "tests.ncp.toy_narrator:BrokenNarrator",
           "client": "tests.ncp.toy_narrator:ClientNarrator"}


def settings_for(tmp_path, arch="toy+adversarial"):
    return settings_from_dict({
        "cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb"),
        "models": {"m": {"backend": "litellm", "model_id": "openai/m"}},
        "ncp": {"narrators": ["m"], "architectures": [arch], "player_model": "m", "auditor": {"model": "m"},
                "t_max": 2, "narrator_methods": METHODS}})


def run(tmp_path, arch, script):
    s = settings_for(tmp_path, arch)
    backend = ScriptedBackend(script)
    client = Recorder(LLMClient(s, backends={"m": backend}, progress=False))
    setup = EpisodeSetup.from_settings(s, "m", arch)
    return run_episodes(client, [make_spec()], setup), client


def test_a_plugin_narrator_is_evaluated_like_the_built_in_architectures(tmp_path):
    script = Script(ncp__narrator_method=["You open your eyes in the hall.", "You find a lamp."],
                    ncp__fact_update=[diff(add=["A lamp burns in the hall."]), diff()])
    result, client = run(tmp_path, "toy+adversarial", script)
    (ep,) = result.episode_rows()
    assert (ep["arch"], ep["termination"], ep["turns"]) == ("toy+adversarial", "SURVIVAL", 2)
    opening, *turns = client.of(ROLE_METHOD)
    assert text_of(opening) == "TOY open at s_0 as Detective Lane" and opening.model == "m"
    # the request the method got: reference turn ids (from 0), the history with the opening, pending updates
    assert text_of(turns[0]).startswith("TOY turn 0 at s_0; history 1; pending ['A lamp burns in the hall.']")
    assert "TOY turn 1 at s_0; history 2; pending []" in text_of(turns[1])
    # its narration is audited like any other
    assert "You find a lamp." in text_of(client.of(ROLE_CONFLICT_CHECK, 1)[0])
    assert [r["narrator_text"] for r in result.turn_rows()][:2] == ["You open your eyes in the hall.",
                                                                    "You find a lamp."]
    assert "m0" in EchoNarrator.closed  # close_episode was called


def test_a_method_that_raises_leaves_its_episode_without_a_result(tmp_path):
    result, _ = run(tmp_path, "broken+adversarial", Script(ncp__narrator_method=["You wake."]))
    assert result.episode_rows() == []
    (f,) = result.failed_rows()
    assert (f["role"], f["error_kind"], f["turn"]) == (ROLE_METHOD, "method_error", 1)
    assert "the toy method broke" in f["message"]


def test_a_method_gets_a_client_object_as_the_reference_narrators_expect(tmp_path):
    """The reference's narrators (its baseline and HiAgent) call `client.complete(messages, stage=...)`."""
    result, client = run(tmp_path, "client+adversarial", Script(ncp__narrator_method=["You wake.", "You walk."]))
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL"
    assert [text_of(r) for r in client.of(ROLE_METHOD)] == ["TOY client open", "TOY client I try move number 1.",
                                                            "TOY client I try move number 2."]


def test_the_config_accepts_architectures_of_declared_methods_only(tmp_path):
    from wse_platform import versions
    s = settings_for(tmp_path)
    assert s.ncp.architectures == ["toy+adversarial"]
    with pytest.raises(Exception, match="unknown architecture"):
        settings_from_dict({"ncp": {"architectures": ["toy+adversarial"]}})
    assert versions.ncp_cell_version(s, "m", "toy+adversarial") != versions.ncp_cell_version(
        settings_for(tmp_path, "broken+adversarial"), "m", "broken+adversarial")
    bad = settings_from_dict({"ncp": {"narrator_methods": {"x": "no_such_pkg.mod:Cls"}, "architectures":
                                      ["x+adversarial"], "player_model": "p", "auditor": {"model": "p"},
                                      "t_max": 1}, "models": {"p": {"backend": "litellm", "model_id": "openai/p"}}})
    from wse_platform.ncp.methods import load_method
    with pytest.raises(ValueError, match="ncp.narrator_methods.x: cannot import 'no_such_pkg.mod'"):
        load_method("x", bad.ncp.narrator_methods["x"])


def test_a_transport_failure_inside_a_method_is_the_servers_not_the_methods(tmp_path):
    """Before: the method's `except Exception` turned an infrastructure error into a `method_error`
    episode (the run went on against a dead server); now it is a transport failure like any other."""
    from wse_platform.llm.errors import LLMTransportError

    def script(call):
        if call.role == ROLE_METHOD and "turn 0" in text_of(call):
            return RuntimeError("HTTP 502 from the gateway (after 2 retries)")
        return Script(ncp__narrator_method=["You wake."])(call)

    EchoNarrator.closed.clear()
    with pytest.raises(LLMTransportError, match="every episode that sent a request to the server failed"):
        run(tmp_path, "toy+adversarial", script)
    assert EchoNarrator.closed == ["m0"]  # its episode was closed all the same, as the reference's runner does
