"""The re-audit of a run takes the in-loop auditor's answers of that run's live episodes from memory
(`wse_platform/ncp/kept.py`) instead of replaying them as cache hits after the cell's last answer:
the same rows (only `llm_call_ids` name the live calls), no backend call, no `llm_calls` row of its own.
Another run, `--no-cache`, or a request the live episodes did not ask goes through the client as before."""
from __future__ import annotations

from tests.ncp._ncp_helpers import scripted_cell
from tests.ncp.test_reaudit import auditor_script, make_spec, settings  # noqa: F401 (fixture)
from wse_platform.kept_answers import EarlyAnswers
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.llm.types import Sampling
from wse_platform.ncp.episode import Architecture, AuditorSetup, EpisodeSetup, run_episodes
from wse_platform.ncp.kept import answered, keeping
from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows

SPECS = {f"m{i}": make_spec(f"m{i}") for i in range(3)}


def _live(call):
    """The narration of turn t is "Scene t." (its prompt shows the t earlier ones): answers depend on the
    request only."""
    seen = "\n".join(m["content"] for m in call.messages).count("Scene ")
    if call.role.startswith("ncp.player"):
        return [f"I search deck {seen}."] * call.n
    if call.role in ("ncp.narrator", "ncp.narrator_opening"):
        return ['{"text": "Scene %d."}' % seen] * call.n
    return auditor_script(conflict_at_turn=2)(call)


def _without_ids(rows):
    return [{k: v for k, v in r.items() if k != "llm_call_ids"} for r in rows]


def _replay(settings, transcripts, answers, run_id="run-1", use_cache=True, sampling=None):
    backend = ScriptedBackend(auditor_script(conflict_at_turn=2), namespace="kept-live")
    c = LLMClient(settings, run_id=run_id, use_cache=use_cache, backends={"aud": backend}, progress=False)
    res = reaudit(answered(c, "cell", answers), SPECS, transcripts, AuditorSetup("aud"), t_max=3, sampling=sampling)
    records = c.call_records()
    c.close()
    return res, backend.n_calls, records


def test_the_reaudit_of_the_same_run_takes_the_live_auditor_answers(settings):
    backend = ScriptedBackend(_live, namespace="kept-live")
    client = LLMClient(settings, run_id="run-1", backends={"narr": backend, "player": backend, "aud": backend},
                       progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"),
                         player_model="player", auditor=AuditorSetup("aud"), t_max=3)
    answers = EarlyAnswers()
    live = run_episodes(keeping(client, "cell", answers), list(SPECS.values()), setup)
    live_ids = {r["call_id"] for r in client.call_records()}
    client.close()
    transcripts = transcripts_from_rows(live.turn_rows())

    reference, calls, records = _replay(settings, transcripts, EarlyAnswers(), run_id="run-0")  # cache replay
    assert calls == 0 and records and all(r["cache_hit"] for r in records)
    assert answers.take("run-2", "cell") == {}                       # another run finds nothing kept

    kept = dict(answers._sets[("run-1", "cell")])
    assert {q[0] for q in kept} <= {"ncp.fact_update", "ncp.conflict_check", "ncp.conflict_double_check",
                                    "ncp.node_update", "ncp.commitment_status"}   # only the auditor's
    res, calls, records = _replay(settings, transcripts, answers)
    assert calls == 0 and records == []      # neither a backend call nor a cache-hit replay
    assert _without_ids(res.turn_rows()) == _without_ids(reference.turn_rows())
    assert res.episode_rows() == reference.episode_rows()
    ids = {i for r in res.turn_rows() for i in r["llm_call_ids"]}
    assert ids and ids <= live_ids                                   # the live calls' llm_calls rows
    assert answers.take("run-1", "cell") == {}                       # taken once

    no_cache = EarlyAnswers()
    no_cache._sets[("run-1", "cell")] = kept
    _, calls, _ = _replay(settings, transcripts, no_cache, use_cache=False)
    assert calls > 0                                                 # --no-cache: asked again, as before
    other = EarlyAnswers()
    other._sets[("run-1", "cell")] = dict(kept)
    _, calls, records = _replay(settings, transcripts, other, sampling=Sampling(temperature=0.9))
    assert calls > 0 and not any(r["cache_hit"] for r in records)    # not the live requests: asked


def test_the_reaudit_step_of_the_cell_run_makes_no_llm_call_of_its_own(tmp_path, monkeypatch):
    """Through Dagster: `ncp_episodes` and `ncp_reaudit_episodes` of a cell in one run (in process) — the
    re-audit writes no `llm_calls` row (it replayed every in-loop auditor request as a cache hit before: a
    row each, with ids of their own)
    and its rows are the ones a re-audit in another run (answered from the cache) writes."""
    from wse_platform.warehouse import Warehouse

    import assets.ncp.episodes as episode_assets
    run, cell, backend, _ = scripted_cell(tmp_path, monkeypatch, "ncp-kept-test", "baseline+adversarial", 3)
    run({"ncp_specs"})
    seen = []   # per re-audit: (transcripts, of them replayed while the live episodes ran)
    real = episode_assets.reaudit

    def counting(client, specs, transcripts, auditor, **kw):
        early = kw.get("early") or {}
        seen.append((len(transcripts), sum(early.get(tr.key, (None,))[0] == tr for tr in transcripts)))
        return real(client, specs, transcripts, auditor, **kw)
    monkeypatch.setattr(episode_assets, "reaudit", counting)
    one = run({"ncp_episodes", "ncp_turns", "ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    assert seen and seen[0][0] > 0 and seen[0][1] == seen[0][0], seen   # every transcript replayed early
    wh = Warehouse(tmp_path / "wh.duckdb")
    calls = wh.query("SELECT call_id FROM llm_calls WHERE run_id = ?", [one.run_id])["call_id"].to_list()
    live = set(wh.query("SELECT DISTINCT unnest(llm_call_ids) AS i FROM ncp_turns")["i"].to_list())
    assert live and set(calls) == live, \
        f"{len(set(calls) - live)} llm_calls row(s) of the cell's run beyond the live episodes': " \
        "the re-audit replayed them"
    turns = wh.query("SELECT * EXCLUDE (llm_call_ids) FROM ncp_reaudit_turns ORDER BY spec_id, turn").to_dicts()
    eps = wh.query("SELECT * FROM ncp_reaudit_episodes ORDER BY spec_id").to_dicts()
    ids = wh.query("SELECT DISTINCT unnest(llm_call_ids) AS i FROM ncp_reaudit_turns")["i"].to_list()
    assert ids and set(ids) <= live                                  # the live calls' llm_calls rows

    n = backend.n_calls
    two = run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)       # another run: the cache answers
    assert backend.n_calls == n and seen[-1][1] == 0                     # nothing replayed early for it
    again = wh.query("SELECT cache_hit FROM llm_calls WHERE run_id = ?", [two.run_id])["cache_hit"].to_list()
    assert again and all(again)
    assert wh.query("SELECT * EXCLUDE (llm_call_ids) FROM ncp_reaudit_turns ORDER BY spec_id, turn").to_dicts() == turns
    assert wh.query("SELECT * FROM ncp_reaudit_episodes ORDER BY spec_id").to_dicts() == eps


class _NoCalls:
    """A client the re-audit must not use: every replay came from the early ones."""

    def complete_many(self, reqs):
        raise AssertionError(f"replayed after the live episodes: {sorted({q.role for q in reqs})}")


def test_each_episode_is_replayed_for_the_reaudit_as_soon_as_it_has_ended(settings):
    """`replaying` (run_episodes' on_episode) replays each live episode under the in-loop auditor from its kept
    answers while the others still run; the re-audit then takes those replays (`early`) and calls nothing:
    the same rows as a re-audit replaying everything from the cache. A transcript that differs from the one
    replayed early (or another auditor, spec or parameter) is replayed as before."""
    from dataclasses import replace

    from wse_platform.kept_answers import KeptSets
    from wse_platform.ncp.kept import early_replays, replaying

    backend = ScriptedBackend(_live, namespace="kept-live")
    client = LLMClient(settings, run_id="run-1", backends={"narr": backend, "player": backend, "aud": backend},
                       progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"),
                         player_model="player", auditor=AuditorSetup("aud"), t_max=3)
    answers, replays = EarlyAnswers(), KeptSets()
    on_episode = replaying(client, "cell", SPECS, AuditorSetup("aud"), t_max=3, prompts_dir=None, sampling=None,
                           answers=answers, replays=replays)
    live = run_episodes(keeping(client, "cell", answers), list(SPECS.values()), setup, on_episode=on_episode)
    client.close()
    transcripts = transcripts_from_rows(live.turn_rows())
    reference, _, _ = _replay(settings, transcripts, EarlyAnswers(), run_id="run-0")  # everything from the cache

    class _Run1:
        run_id, use_cache = "run-1", True
    early = early_replays(_Run1(), "cell", replays)
    assert set(early) == {tr.key for tr in transcripts}                  # every episode, replayed early
    res = reaudit(_NoCalls(), SPECS, transcripts, AuditorSetup("aud"), t_max=3, early=early)
    assert _without_ids(res.turn_rows()) == _without_ids(reference.turn_rows())
    assert res.episode_rows() == reference.episode_rows()
    assert early_replays(_Run1(), "cell", replays) == {}                  # taken once

    # a stored transcript that is not the one replayed early, or another auditor: replayed here
    changed = [replace(transcripts[0], turns=[replace(t, narrator_text=(t.narrator_text or "") + " Changed.")
                                              if t.turn == 1 else t for t in transcripts[0].turns])]
    try:
        reaudit(_NoCalls(), SPECS, changed, AuditorSetup("aud"), t_max=3, early=early)
    except AssertionError as err:
        assert "replayed after the live episodes" in str(err)
    else:
        raise AssertionError("a changed transcript took the early replay")
    for other in ({"auditor": AuditorSetup("aud", count=3)}, {"t_max": 2}):
        args = {"auditor": AuditorSetup("aud"), "t_max": 3, **other}
        try:
            reaudit(_NoCalls(), SPECS, transcripts[:1], args["auditor"], t_max=args["t_max"], early=early)
        except AssertionError as err:
            assert "replayed after the live episodes" in str(err)
        else:
            raise AssertionError(f"{other}: took the early replay")
