"""Paper Table 2 as run: live episodes of one cell with each auditor in the loop, one row per auditor."""
from __future__ import annotations

import pytest

from tests.ncp._ncp_helpers import DEFAULTS, Recorder, conflicts_json, make_spec, review, statuses
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.metrics.ncp import auditor_ablation_table
from wse_platform.ncp.ablation import ablation_auditors, run_auditor_ablation
from wse_platform.ncp.episode import Architecture, AuditorSetup, EpisodeSetup, episode_frame


def strict_auditor(call):
    """Flags and confirms a fact conflict on every turn."""
    out = {"ncp.conflict_check": conflicts_json(("fact", "f_0", "strict")),
           "ncp.conflict_double_check": review(("fact", "f_0", "stands"))}.get(call.role, DEFAULTS.get(call.role))
    return [out] * call.n


def lenient_auditor(call):
    """Never flags; satisfies every commitment at turn 2 (success)."""
    text = "\n".join(m["content"] for m in call.messages)
    if call.role == "ncp.commitment_status" and "Turn 2:" in text:
        return [statuses(satisfied=("c_0", "c_1"))] * call.n
    return [DEFAULTS[call.role]] * call.n


def generator(call):
    if call.role.startswith("ncp.player"):
        return ["I push the vault door."] * call.n
    return [DEFAULTS[call.role]] * call.n


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def test_each_auditor_runs_its_own_live_episodes_and_gets_its_own_row(settings):
    gen, strict, lenient = ScriptedBackend(generator), ScriptedBackend(strict_auditor), ScriptedBackend(lenient_auditor)
    client = Recorder(LLMClient(settings, backends={"narr": gen, "player": gen, "strict": strict,
                                                    "lenient": lenient}, progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"),
                         player_model="player", auditor=AuditorSetup("strict"), t_max=5)
    auditors = [AuditorSetup("strict"), AuditorSetup("lenient", count=3)]
    results = run_auditor_ablation(client, [make_spec("m0"), make_spec("m1")], setup, auditors)
    assert list(results) == ["ncp.auditor:strict:v1:x1", "ncp.auditor:lenient:v1:x3"]
    # the transcripts differ because the auditor is in the loop: the lenient one lets the story go on
    narrations = len(client.of("ncp.narrator"))
    assert narrations == 2 * 1 + 2 * 2  # strict: turn 1 only; lenient: turns 1-2 (then SUCCESS)
    rows = [r for res in results.values() for r in res.episode_rows()]
    table = {r["auditor_id"]: r for r in auditor_ablation_table(episode_frame(rows)).iter_rows(named=True)
             if r["row_type"] == "auditor"}
    s, le = table["ncp.auditor:strict:v1:x1"], table["ncp.auditor:lenient:v1:x3"]
    assert (s["n_episodes"], s["avg_turns"], s["pct_fact_conflict"], s["n_succ"]) == (2, 1.0, 100.0, 0)
    assert (le["n_episodes"], le["avg_turns"], le["pct_fact_conflict"], le["n_succ"], le["n_success"]) == \
        (2, 2.0, 0.0, 2, 2)
    assert le["satisfied_pct"] == 100.0 and s["model"] == "narr" and s["arch"] == "baseline+adversarial"


def test_ablation_uses_the_adversarial_player_and_reads_the_config():
    gen = ScriptedBackend(generator)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+natural"), player_model="p",
                         auditor=AuditorSetup("a"), t_max=1)
    with pytest.raises(ValueError, match="adversarial"):
        run_auditor_ablation(gen, [], setup, [AuditorSetup("a")])
    s = settings_from_dict({"models": {"a": {"backend": "litellm", "model_id": "x/a"},
                                       "b": {"backend": "litellm", "model_id": "x/b"}},
                            "ncp": {"ablation": {"narrator": "a", "auditors": [{"model": "a"}, {"model": "b"},
                                                                               {"model": "a"}]}}})
    assert [a.auditor_id for a in ablation_auditors(s)] == ["ncp.auditor:a:v1:x1", "ncp.auditor:b:v1:x1"]
    with pytest.raises(Exception, match="ncp.ablation.auditors"):
        settings_from_dict({"models": {"a": {"backend": "litellm", "model_id": "x/a"}},
                            "ncp": {"ablation": {"narrator": "a", "auditors": [{"model": "zz"}]}}})


def test_ablation_assets_exist_only_when_configured():
    from assets.ncp import episodes, tables
    from assets.partitions import build_partitions

    base = {"models": {"m": {"backend": "litellm", "model_id": "x/m"}},
            "ncp": {"narrators": ["m"], "player_model": "m", "auditor": {"model": "m"}}}

    def keys(cfg):
        s = settings_from_dict(cfg)
        parts = build_partitions(s)
        return {k.to_user_string() for o in episodes.build(s, parts) + tables.build(s, parts) for k in o.keys}

    plain = keys(base)
    with_ablation = keys({**base, "ncp": {**base["ncp"], "ablation": {"narrator": "m", "auditors": [{"model": "m"}]}}})
    added = {"ncp_ablation_episodes", "ncp_ablation_turns", "ncp_auditor_ablation"}
    assert not plain & added and with_ablation - plain == added
