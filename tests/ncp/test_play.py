"""`wse ncp play`: a human narrator / player driven by scripted stdin, written to the warehouse,
resumed after an interruption from the response cache."""
from __future__ import annotations

import io

import pytest

from tests.ncp._ncp_helpers import Script, make_spec
from wse_platform.config import settings_from_dict
from wse_platform.llm import ScriptedBackend
from wse_platform.ncp.episode import ROLE_NARRATOR, ROLE_OPENING
from wse_platform.ncp.play import play


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({
        "cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb"),
        "models": {"m": {"backend": "litellm", "model_id": "openai/none"}},
        "ncp": {"narrators": ["m"], "player_model": "m", "auditor": {"model": "m"}, "t_max": 3}})


def answers(*texts: str) -> io.StringIO:
    return io.StringIO("".join(f"{t}\n.\n" for t in texts))


def test_human_narrator_plays_is_written_and_resumes_after_interrupt(settings, tmp_path):
    from wse_platform.warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    spec = make_spec("movie52")
    out1 = io.StringIO()
    first = play(settings, spec, "narrator", answers("You wake in the manor hall.", "The butler glares at you."),
                 out1, backends={"m": ScriptedBackend(Script(), namespace="play-llm")}, warehouse=wh)
    assert first.result is None and first.human_answers == 2  # input ran out at turn 2: like Ctrl-C
    shown = out1.getvalue()
    assert f"===== {ROLE_OPENING} =====" in shown and f"===== {ROLE_NARRATOR} =====" in shown
    assert "Lane searches the manor hall." in shown  # the human narrator sees what a model narrator sees
    assert "I try move number 1." in shown and "run the same command again to resume" in shown
    assert wh.query("SELECT count(*) AS n FROM ncp_episodes")["n"][0] == 0

    llm = ScriptedBackend(Script(), namespace="play-llm")  # the same model answers as before
    out2 = io.StringIO()
    second = play(settings, spec, "narrator", answers("A clock strikes midnight.", "Dust falls from the rafters."),
                  out2, backends={"m": llm}, warehouse=wh)
    assert second.result is not None and second.human_answers == 2  # opening and turn 1 replayed from cache
    assert f"===== {ROLE_OPENING} =====" not in out2.getvalue()  # not asked again
    assert sum(c.role == "ncp.player_adversarial" for c in llm.calls) == 1  # turns 1-2 replayed; turn 3 new
    (ep,) = wh.query("SELECT * FROM ncp_episodes").to_dicts()
    assert (ep["model"], ep["arch"], ep["termination"], ep["turns"]) == ("human", "human+adversarial",
                                                                         "SURVIVAL", 3)
    texts = wh.query("SELECT narrator_text FROM ncp_turns ORDER BY turn")["narrator_text"].to_list()
    assert texts == ["You wake in the manor hall.", "The butler glares at you.", "A clock strikes midnight.",
                     "Dust falls from the rafters."]
    # another human's session on the same spec is kept beside this one (Table 5 lists both)
    other = play(settings, spec, "narrator", answers("Fog.", "Rain.", "Wind.", "Snow."), io.StringIO(),
                 backends={"m": ScriptedBackend(Script(), namespace="play-llm")}, warehouse=wh, session="second")
    assert other.result is not None
    assert sorted(wh.query("SELECT generation_version FROM ncp_episodes")["generation_version"].to_list()) == [
        "ncp-play:movie52-narrator", "ncp-play:second"]


def test_human_player_types_the_inputs(settings, tmp_path):
    from wse_platform.warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    llm = ScriptedBackend(Script())
    out = io.StringIO()
    res = play(settings, make_spec("movie52"), "player", answers("I open the door.", "I call the butler.",
                                                                "I sit down."), out, backends={"m": llm},
               warehouse=wh)
    assert res.result is not None
    rows = wh.query("SELECT model, arch, player_input FROM ncp_turns ORDER BY turn").to_dicts()
    assert {(r["model"], r["arch"]) for r in rows} == {("m", "human-player")}
    assert [r["player_input"] for r in rows] == [None, "I open the door.", "I call the butler.", "I sit down."]
    assert "You stand in the hall of the manor." in out.getvalue()  # the human player sees the story only
    assert "The vault door is locked." not in out.getvalue()


def test_cli_dispatches_wse_ncp_play(monkeypatch, tmp_path):
    from tests.conftest import write_config
    from wse_platform import cli
    from wse_platform.ncp import play as play_mod

    seen = {}

    def fake_main(settings, spec_id, as_, narrator_model=None, session=None):
        seen.update(spec=spec_id, as_=as_, narrator=narrator_model, session=session, t_max=settings.ncp.t_max)
        return 0

    monkeypatch.setattr(play_mod, "main", fake_main)
    cfg = write_config(tmp_path)
    assert cli.main(["--config", str(cfg), "ncp", "play", "--spec", "movie52", "--as", "narrator"]) == 0
    from wse_platform.config import load_settings
    assert seen == {"spec": "movie52", "as_": "narrator", "narrator": None, "session": None,
                    "t_max": load_settings(cfg).ncp.t_max}  # the configured settings reach play


def test_the_released_iron_man_spec_loads_for_play():
    from wse_platform.ncp.play import load_play_spec
    spec = load_play_spec("movie52")
    assert spec.meta.player_role and len(spec.trajectory) == 13  # the paper's Table 5: 13 nodes
    with pytest.raises(ValueError, match="movie999"):
        load_play_spec("movie999")


def test_every_play_session_of_a_spec_keeps_its_own_turns_and_table5_is_unchanged(settings, tmp_path):
    """Before: ncp_turns kept only the latest session's transcript of a spec (no session in its key)."""
    from wse_platform.metrics.ncp import human_baseline_table
    from wse_platform.view.pages import ncp_episode
    from wse_platform.warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    spec = make_spec("movie52")

    def session(name, *texts):
        res = play(settings, spec, "narrator", answers(*texts), io.StringIO(),
                   backends={"m": ScriptedBackend(Script(), namespace="play-llm")}, warehouse=wh, session=name)
        assert res.result is not None

    session("ann", "Fog.", "Rain.", "Wind.", "Snow.")
    session("bob", "Dawn.", "Noon.", "Dusk.", "Night.")
    session("ann", "unused")  # rerunning a finished session replays it from the cache: same rows, not twice
    turns = wh.query("SELECT session, narrator_text FROM ncp_turns ORDER BY session, turn").to_dicts()
    assert [(t["session"], t["narrator_text"]) for t in turns] == [
        ("ann", "Fog."), ("ann", "Rain."), ("ann", "Wind."), ("ann", "Snow."),
        ("bob", "Dawn."), ("bob", "Noon."), ("bob", "Dusk."), ("bob", "Night.")]
    table5 = human_baseline_table(wh.query("SELECT * FROM ncp_episodes")).to_dicts()
    assert [(r["model"], r["session"], r["turns"], r["status"]) for r in table5] == [
        ("human", "ann", 3, "SURVIVED"), ("human", "bob", 3, "SURVIVED")]
    import duckdb
    with duckdb.connect(str(tmp_path / "wh.duckdb"), read_only=True) as con:  # `wse view` shows one session
        html = ncp_episode(con, {"model": "human", "arch": "human+adversarial", "spec": "movie52", "session": "bob"})
    assert "Dusk." in html and "Wind." not in html
