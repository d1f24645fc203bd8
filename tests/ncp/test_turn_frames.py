"""An NCP cell's turn frame made episode by episode as they end (`ncp/turn_frames.py`, issue 24): the same frame
the rows give at the end, made before the last episode has ended."""
from __future__ import annotations

from tests.gated_backend import GatedBackend
from tests.ncp._ncp_helpers import Script, make_spec
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient
from wse_platform.ncp.episode import Architecture, AuditorSetup, EpisodeSetup, run_episodes, turn_frame
from wse_platform.ncp.turn_frames import TurnFrames


def _cell(tmp_path, on_episode):
    settings = settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})
    backend = GatedBackend(Script(), lambda call: None)
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+natural"), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=2)
    return run_episodes(client, [make_spec("m0"), make_spec("m1"), make_spec("m2")], setup, on_episode=on_episode)


def test_the_frame_is_made_as_episodes_end_and_equals_the_rows_frame(tmp_path, monkeypatch):
    import wse_platform.ncp.turn_frames as tf
    frames, made_at_end = TurnFrames(), []
    result = _cell(tmp_path, frames.add)
    assert len(frames._made) == 3   # one frame per episode, made when it ended
    monkeypatch.setattr(tf, "turn_frame", lambda rows: made_at_end.append(len(rows)) or turn_frame(rows))
    got = frames.frame(result)
    assert made_at_end == []   # nothing left to make after the last answer
    assert got.equals(turn_frame(result.turn_rows()))
    assert got["spec_id"].unique(maintain_order=True).to_list() == ["m0", "m1", "m2"]


def test_an_episode_whose_rows_changed_after_it_ended_is_made_again(tmp_path):
    frames = TurnFrames()
    result = _cell(tmp_path, frames.add)
    run = result.runs[1]
    run.turn_rows.append(dict(run.turn_rows[-1]))
    assert frames.frame(result).equals(turn_frame(result.turn_rows()))
    other = TurnFrames()   # never told: every episode made at the end
    assert other.frame(result).equals(turn_frame(result.turn_rows()))
