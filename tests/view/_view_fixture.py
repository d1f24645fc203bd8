"""A small warehouse for the viewer's tests: one judged WSE trajectory with a contradiction, one
failed WSE cell, one NCP episode ending in a conflict, one 100-Endings story with K = 2 at two
positions. Built with the real DDL (`sql/`), rows written by column name."""
from __future__ import annotations

import json
from pathlib import Path

from wse_platform.warehouse import Warehouse

HOSTILE = "<script>alert('x')</script>"


def _insert(con, table: str, **row) -> None:
    cols = ", ".join(f'"{c}"' for c in row)
    con.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def build_warehouse(path: Path) -> Path:
    wh = Warehouse(path)
    wh.ensure_schema()
    with wh.connect() as con:
        # WSE-bench: B2|gen, seed s1, 3 steps, the panel agrees on a contradiction at step 2
        for step, narrative in enumerate(["Ada opens the gate at dawn.", f"Ada, long dead, greets Bo. {HOSTILE}",
                                          "Bo leaves the town."], start=1):
            _insert(con, "wse_trajectory_steps", model="gen", arch="B2", seed_id="s1", world_id="w1",
                    source_family="dracor", step=step, player_option=f"option {step}", player_option_index=0,
                    intents_json=json.dumps([{"character_id": "bo", "intent": f"Bo wants to talk ({step})"}]),
                    narrative=narrative)
            for idx, verdict in enumerate(["consistent", "consistent"] if step != 2 else ["inconsistent", "inconsistent"]):
                _insert(con, "wse_consistency_verdicts", judge_config_id="wse.consistency_judge:j:v1:x2", model="gen",
                        arch="B2", seed_id="s1", step=step, judge_index=idx, judge_member=f"{idx}:j", judge_model="j",
                        verdict=verdict, category="world-fact" if verdict == "inconsistent" else None,
                        prior_fact="Ada died in the opening" if verdict == "inconsistent" else None,
                        prior_source="opening" if verdict == "inconsistent" else None,
                        conflicting_claim="Ada greets Bo" if verdict == "inconsistent" else None)
        _insert(con, "wse_trajectories", model="gen", arch="B2", seed_id="s1", world_id="w1", source_family="dracor",
                horizon=3, length=3)
        _insert(con, "wse_trajectory_consistency", judge_config_id="wse.consistency_judge:j:v1:x2", model="gen",
                arch="B2", seed_id="s1", length=3, first_contradiction=2)
        _insert(con, "wse_cell_metrics", model="gen", arch="B2", n=1, G=1.0, C_obs=0.5, C_adj=0.5, R=2.0)
        # a failed cell: the story agent's output stayed invalid at step 1
        failure = {"component": "story_agent", "step": 1, "error_kind": "invalid_json", "message": "not JSON",
                   "raw_text": "Once upon a {broken", "attempts": 3}
        _insert(con, "wse_trajectory_steps", model="gen", arch="B1", seed_id="s1", world_id="w1",
                source_family="dracor", step=1, player_option="option 1", player_option_index=0,
                failure_component="story_agent", failure_json=json.dumps(failure))
        _insert(con, "wse_trajectories", model="gen", arch="B1", seed_id="s1", world_id="w1", source_family="dracor",
                horizon=3, length=0, failure_component="story_agent", failure_step=1)
        # NCP-Bench: one episode, a confirmed fact conflict at turn 2
        _insert(con, "ncp_episodes", model="gen", arch="baseline+adversarial", spec_id="movie26", eval_order=0,
                auditor_id="ncp.auditor:j:v1:x1", turns=2, termination="CONFLICT", conflict_kinds=["fact"],
                nodes_completed=1, nodes_total=4, commitments_satisfied=0, commitments_total=2)
        for turn in (0, 1, 2):
            _insert(con, "ncp_turns", model="gen", arch="baseline+adversarial", spec_id="movie26",
                    auditor_id="ncp.auditor:j:v1:x1", turn=turn, node_before="s_1", node_after="s_1",
                    player_input=None if turn == 0 else f"I try move {turn}", narrator_text=f"The narrator, turn {turn}.",
                    conflict_report_json=json.dumps({"conflicts": [{"kind": "fact", "target_id": "f_3",
                                                                    "reason": "the ship sank", "confirmed": turn == 2}]}),
                    outcome="CONFLICT" if turn == 2 else None)
        _insert(con, "ncp_summary", model="gen", arch="baseline+adversarial", auditor_id="ncp.auditor:j:v1:x1",
                n_episodes=1, avg_turns=2.0, pct_conflict=100.0, pct_success=0.0)
        _insert(con, "ncp_failed_episodes", model="gen", arch="baseline+adversarial", spec_id="movie52", eval_order=1,
                auditor_id="ncp.auditor:j:v1:x1", turn=3, role="ncp.conflict_check", error_kind="transport",
                message="server answered 503 three times", retry_round=0)
        # 100-Endings: one human story, two positions, K = 2
        text = "Mrs. Mallard had heart trouble. She wept at once. Then she was free. The door opened. She died."
        _insert(con, "endings_stories", story_id="human:pd/hour", set_key="human:pd", corpus="pd", title="Hour",
                author="Chopin", n_words=18, text=text, included=True)
        for pos, (sentence_index, last) in enumerate([(2, "She wept at once."), (4, "The door opened.")]):
            _insert(con, "endings_positions", story_id="human:pd/hour", set_key="human:pd", position=pos,
                    sentence_index=sentence_index, revealed_share=0.3 + 0.4 * pos, last_sentence=last)
            for k in (0, 1):
                _insert(con, "endings_predictions", story_id="human:pd/hour", set_key="human:pd", position=pos,
                        sample_index=k, prediction=f"She lives happily (p{pos}k{k})")
                _insert(con, "endings_verdicts", story_id="human:pd/hour", set_key="human:pd", position=pos,
                        sample_index=k, judge_config_id="endings.judge:j:v1:x1", verdict="N", verdict_raw="N.")
            _insert(con, "endings_no_rate", story_id="human:pd/hour", set_key="human:pd",
                    judge_config_id="endings.judge:j:v1:x1", position=pos, revealed_share=0.3 + 0.4 * pos, no_rate=1.0)
    return path
