"""Reference result files (runs/<spec>.json layout): export of our episodes, import of theirs."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.ncp._ncp_helpers import Script, conflicts_json, make_spec, review, statuses
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp.episode import Architecture, AuditorSetup, EpisodeSetup, run_episodes
from wse_platform.ncp.results import (ResultFileError, episode_result, episode_row_from_result, import_runs,
                                      read_results, write_results)

METRICS = ("spec_id", "turns", "termination", "conflict_kinds", "nodes_completed", "nodes_total",
           "trajectory_progress", "commitments_satisfied", "commitments_total", "commitments_satisfied_share")


def play(tmp_path, script, t_max=3):
    s = settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})
    backend = ScriptedBackend(script)
    client = LLMClient(s, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"),
                         player_model="player", auditor=AuditorSetup("aud"), t_max=t_max)
    return run_episodes(client, [make_spec()], setup)


@pytest.mark.parametrize("script, ending", [
    (Script(ncp__node_update=['{"trigger": {"occurred": true, "reason": "t"}, '
                              '"delta": {"occurred": true, "reason": "d"}}'],
            ncp__commitment_status=[statuses(), statuses(satisfied=("c_0",))]), "all_resolved"),
    (Script(ncp__conflict_check=[conflicts_json(), conflicts_json(("fact", "f_0", "the vault is open"))],
            ncp__conflict_double_check=[review(("fact", "f_0", "the vault is open"), reason="stands")]), "conflict"),
    (Script(), "max_turns"),
])
def test_an_exported_episode_has_the_reference_layout_and_reads_back_to_the_same_metrics(tmp_path, script, ending):
    result = play(tmp_path, script)
    (row,) = result.episode_rows()
    res = episode_result(make_spec(), row, result.turn_rows())
    assert set(res) == {"episode", "termination", "turns", "final_state"} and res["termination"] == ending
    assert set(res["final_state"]) == {"facts", "commitments", "trajectory", "history"}
    assert [t["turn_id"] for t in res["turns"]] == list(range(row["turns"]))  # the reference numbers from 0
    assert res["final_state"]["history"][0]["turn_id"] == -1  # the opening
    turn = res["turns"][-1]
    assert set(turn) == {"turn_id", "player_input", "narrator_response", "evaluation", "trajectory_assessments",
                         "commitment_assessments", "newly_occurred_node_ids", "new_satisfaction_ids"}
    assert set(turn["evaluation"]["conflict"]) == {"has_conflict", "fact_count", "commitment_count",
                                                   "player_input_count", "total_count", "conflicts",
                                                   "double_checked", "review_reason"}
    if ending == "conflict":  # the conflict turn is reported, the state is the one before it
        assert turn["evaluation"]["conflict"]["has_conflict"] and turn["evaluation"]["conflict"]["fact_count"] == 1
        assert len(res["final_state"]["history"]) == row["turns"]  # opening + the turns before the conflict
    (path,) = write_results(tmp_path / "runs", [res])
    assert path.name == "m0.json"
    (file, loaded), = read_results(tmp_path / "runs")
    back = episode_row_from_result(loaded, file, row["model"], row["arch"], row["auditor_id"])
    assert {k: back[k] for k in METRICS} == {k: row[k] for k in METRICS}


SUCCESS = Script(ncp__node_update=['{"trigger": {"occurred": true, "reason": "t"}, '
                                   '"delta": {"occurred": true, "reason": "d"}}'],
                 ncp__commitment_status=[statuses(), statuses(satisfied=("c_0",))])
CONFLICT = Script(ncp__fact_update=['{"add_facts": ["Lane lights a lamp."], "negate_facts": [], "reason": "r"}'],
                  ncp__conflict_check=[conflicts_json(), conflicts_json(("fact", "f_0", "the vault is open"))],
                  ncp__conflict_double_check=[review(("fact", "f_0", "the vault is open"), reason="stands")])
SAME = ("turn", "player_input", "narrator_text", "node_before", "node_after", "outcome", "player_words",
        "narrator_words", "auditor_id", "session")


@pytest.mark.parametrize("script", [SUCCESS, CONFLICT], ids=["success", "conflict"])
def test_import_runs_loads_the_turns_the_reference_file_holds_into_ncp_turns(tmp_path, script):
    """Before: import-runs wrote no ncp_turns rows. Our episode, exported and imported again, has the
    same per-turn content in ncp_turns as far as the file holds it (texts, nodes, decisions, statuses)."""
    from wse_platform.ncp.reaudit import transcripts_from_rows
    from wse_platform.warehouse import Warehouse

    result = play(tmp_path, script)
    (row,) = result.episode_rows()
    write_results(tmp_path / "runs", [episode_result(make_spec(), row, result.turn_rows())])
    wh = Warehouse(tmp_path / "wh.duckdb")
    assert import_runs(wh, tmp_path / "runs", row["model"], row["arch"], row["auditor_id"]) == 1
    got = wh.query("SELECT * FROM ncp_turns ORDER BY turn").to_dicts()
    ours = result.turn_rows()
    assert [{k: r.get(k) for k in SAME} for r in got] == [{k: r.get(k) for k in SAME} for r in ours]
    for mine, back in zip(ours[1:], got[1:]):
        kept = lambda r: [c["kind"] for c in json.loads(r["conflict_report_json"])["kept"]]  # noqa: E731
        assert kept(back) == kept(mine)
        assert json.loads(back["fact_diff_json"])["proposed"] == json.loads(mine["fact_diff_json"])["proposed"]
        if mine["commitment_status_json"] is not None:
            status = lambda r: {c: v["status"]  # noqa: E731
                                for c, v in json.loads(r["commitment_status_json"])["statuses"].items()}
            assert status(back) == status(mine)
        if mine["node_assessment_json"] is not None:
            node = lambda r: {k: json.loads(r["node_assessment_json"])[k] for k in ("node_id", "advanced")}  # noqa: E731
            assert node(back) == node(mine)
    # the facts after the last committed turn are in the file; NULL where it does not hold them
    last = got[-2] if row["termination"] == "CONFLICT" else got[-1]
    assert json.loads(last["ledger_snapshot_json"]) and got[0]["fact_diff_json"] is None
    assert all(r["memory_json"] is None and r["llm_call_ids"] == [] for r in got)
    (ep,) = wh.query("SELECT * FROM ncp_episodes").to_dicts()
    assert (ep["narrator_responses"], ep["player_inputs"]) == (row["narrator_responses"], row["player_inputs"])
    # the re-audit reads the imported transcript as it reads ours
    assert transcripts_from_rows(got) == transcripts_from_rows(ours)
    # and it exports back to the same file
    assert episode_result(make_spec(), ep, got) == episode_result(make_spec(), row, ours)


def reference_file() -> dict:
    """A result file as the reference runner writes one (our own content)."""
    node = {"description": "d", "trigger_event": "t", "key_delta": "k"}
    return {"episode": {"id": "movie7", "player_role": "Mara"}, "termination": "conflict",
            "turns": [{"turn_id": 0, "player_input": "I wait.", "narrator_response": "Rain falls.",
                       "evaluation": {"fact_update": {"add_facts": [], "negate_fact_ids": [], "reason": "none"},
                                      "conflict": {"has_conflict": False, "fact_count": 0, "commitment_count": 0,
                                                   "player_input_count": 0, "total_count": 0, "conflicts": [],
                                                   "double_checked": False, "review_reason": None}}},
                      {"turn_id": 1, "player_input": "I fly.", "narrator_response": "You fly away.",
                       "evaluation": {"conflict": {"has_conflict": True, "fact_count": 0, "commitment_count": 1,
                                                   "player_input_count": 1, "total_count": 2}}}],
            "final_state": {"facts": [], "history": [],
                            "commitments": [{"id": "c_0", "status": "satisfied"}, {"id": "c_1", "status": "pending"}],
                            "trajectory": [{"id": "s_0", "occurred": True, **node},
                                           {"id": "s_1", "occurred": False, **node}]}}


def test_import_runs_loads_reference_result_files_into_ncp_episodes(tmp_path, capsys):
    from wse_platform.cli import main
    from wse_platform.metrics.ncp import summary_table
    from wse_platform.warehouse import Warehouse

    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "movie7.json").write_text(json.dumps(reference_file()), encoding="utf-8")
    (runs / "movie8.checkpoint.json").write_text("{}", encoding="utf-8")  # a checkpoint is not a result
    cfg = tmp_path / "wse.yaml"
    cfg.write_text(yaml.safe_dump({"warehouse_path": str(tmp_path / "wh.duckdb"),
                                   "cache_dir": str(tmp_path / "cache")}), encoding="utf-8")
    assert main(["--config", str(cfg), "ncp", "import-runs", str(runs), "--model", "gpt-x",
                 "--arch", "baseline+adversarial", "--auditor", "ref-auditor"]) == 0
    (ep,) = Warehouse(tmp_path / "wh.duckdb").query("SELECT * FROM ncp_episodes").to_dicts()
    assert (ep["model"], ep["spec_id"], ep["auditor_id"], ep["turns"], ep["termination"]) == (
        "gpt-x", "movie7", "ref-auditor", 2, "CONFLICT")
    assert ep["conflict_kinds"] == ["commitment", "player_input"]
    assert (ep["trajectory_progress"], ep["commitments_satisfied_share"]) == (0.5, 0.5)
    turns = Warehouse(tmp_path / "wh.duckdb").query("SELECT * FROM ncp_turns ORDER BY turn").to_dicts()
    assert [(t["turn"], t["player_input"], t["outcome"]) for t in turns] == [(1, "I wait.", None),
                                                                            (2, "I fly.", "CONFLICT")]
    assert turns[1]["fact_diff_json"] is None  # not in the file: NULL
    (row,) = summary_table(Warehouse(tmp_path / "wh.duckdb").query("SELECT * FROM ncp_episodes")).to_dicts()
    assert row["pct_conflict"] == 100.0 and row["avg_turns"] == 2.0

    bad = reference_file()
    bad["termination"] = "crashed"
    with pytest.raises(ResultFileError, match="termination 'crashed'"):
        episode_row_from_result(bad, "x.json", "m", "a", "aud")
