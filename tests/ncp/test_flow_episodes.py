"""Continuous flow in an NCP cell: an episode's next request does not wait for the other episodes.

Episode m0's opening is held until episode m1 asks its turn-1 narrator (or 5 s pass); the old
lock-step loop sent both openings in one batch, so m1 could not get there first.
"""
from __future__ import annotations

import threading

from tests.gated_backend import GatedBackend
from tests.ncp._ncp_helpers import Script, make_spec, text_of
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient
from wse_platform.ncp.episode import ROLE_NARRATOR, ROLE_OPENING, Architecture, AuditorSetup, EpisodeSetup, run_episodes

OTHER = "Keeper Ames"


def _other(spec):
    return spec.model_copy(update={"meta": spec.meta.model_copy(update={"player_role": OTHER})})


def test_an_episode_does_not_wait_for_the_other_episodes(tmp_path):
    settings = settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})
    b_narrates, seen = threading.Event(), []

    def before(call):
        text = text_of(call)
        if call.role == ROLE_NARRATOR and OTHER in text:
            b_narrates.set()
        if call.role == ROLE_OPENING and OTHER not in text:
            seen.append(b_narrates.wait(5.0))   # episode m0's opening is slow

    backend = GatedBackend(Script(), before)
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+natural"), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=2)
    specs = [make_spec("m0"), _other(make_spec("m1"))]
    result = run_episodes(client, specs, setup)
    assert seen == [True], "episode m1 did not reach its turn-1 narrator while m0's opening was outstanding"
    assert [e["termination"] for e in result.episode_rows()] == ["SURVIVAL"] * 2
    assert [e["spec_id"] for e in result.episode_rows()] == ["m0", "m1"]   # rows in spec order, whatever the timing
