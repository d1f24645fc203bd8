"""The NCP asset path through Dagster on the scripted backend (fast twin of test_ncp_e2e.py):
episodes → re-audit (answered from the cache) → every NCP table, with the loop-2 columns."""
from __future__ import annotations

import json

from tests.ncp._ncp_helpers import ncp_asset_runner, scripted_cell as _scripted_cell


def test_ncp_assets_materialize_on_the_scripted_backend(tmp_path, monkeypatch):
    from wse_platform.warehouse import Warehouse

    run, cell, backend, _ = _scripted_cell(tmp_path, monkeypatch, "ncp-assets-test", "memory+adversarial", 2)
    run({"ncp_specs"})
    run({"ncp_episodes", "ncp_turns"}, cell)
    n_calls = backend.n_calls
    run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    assert backend.n_calls == n_calls  # the in-loop auditor's replay is answered from the cache
    run({"ncp_summary", "ncp_survival", "ncp_auditor_sensitivity", "ncp_genre"})

    wh = Warehouse(tmp_path / "wh.duckdb")
    (ep,) = wh.query("SELECT * FROM ncp_episodes").to_dicts()
    assert (ep["termination"], ep["turns"], ep["narrator_responses"], ep["player_inputs"]) == ("SURVIVAL", 2, 3, 2)
    turns = wh.query("SELECT * FROM ncp_turns ORDER BY turn").to_dicts()
    assert [t["narrator_words"] for t in turns] == [8, 5, 5] and turns[1]["player_words"] == 5
    assert json.loads(turns[0]["fact_diff_json"])["pending"] is True
    (replayed,) = wh.query("SELECT * FROM ncp_reaudit_episodes").to_dicts()
    assert (replayed["termination"], replayed["turns"]) == ("SURVIVAL", 2)
    (summary,) = wh.query("SELECT * FROM ncp_summary").to_dicts()
    assert (summary["n_survival"], summary["n_active_at_20"], summary["share_active_at_20"]) == (1, 0, 0.0)
    assert summary["narrator_words_mean"] == (8 + 5 + 5) / 3
    surv = wh.query("SELECT turn, n_active, raw_share_active FROM ncp_survival ORDER BY turn").to_dicts()
    assert [(r["turn"], r["n_active"]) for r in surv] == [(0, 1), (1, 1), (2, 1)]
    assert (tmp_path / "artifacts" / "ncp" / "survival.png").exists()


def test_an_episode_without_a_result_is_listed_apart_and_played_again_by_the_next_run(tmp_path, monkeypatch):
    """A call still failing after retries: the episode is in ncp_failed_episodes (role, reason), not in
    ncp_episodes; the next run of the cell plays it again, with fresh attempts past the cached failures."""
    from wse_platform.warehouse import Warehouse

    broken = {"narrator": True}

    def narrator_not_json(call):
        if call.role == "ncp.narrator" and broken["narrator"]:
            return ["The story goes on (not JSON)."] * call.n
        return None

    run, cell, _, _ = _scripted_cell(tmp_path, monkeypatch, "ncp-failed-test", "baseline+adversarial", 1,
                                     narrator_not_json)
    run({"ncp_specs"})
    run({"ncp_episodes", "ncp_turns"}, cell)
    wh = Warehouse(tmp_path / "wh.duckdb")
    assert wh.query("SELECT count(*) AS n FROM ncp_episodes")["n"][0] == 0
    (f,) = wh.query("SELECT * FROM ncp_failed_episodes").to_dicts()
    assert (f["role"], f["error_kind"], f["turn"], f["retry_round"]) == ("ncp.narrator", "invalid_json", 1, 0)
    assert "not JSON" in f["message"]

    broken["narrator"] = False  # the provider answers properly now; attempts 1-3 are cached failures
    run({"ncp_episodes", "ncp_turns"}, cell)
    (ep,) = wh.query("SELECT * FROM ncp_episodes").to_dicts()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 1
    assert wh.query("SELECT count(*) AS n FROM ncp_failed_episodes")["n"][0] == 0


def test_changing_the_in_loop_auditor_adds_cells_instead_of_overwriting_them(tmp_path, monkeypatch):
    """Table 1 (one auditor) and Tables 3-4 (another) coexist: the in-loop auditor is part of the cell's key."""
    from wse_platform.warehouse import Warehouse

    run, cell, _, cfg = _scripted_cell(tmp_path, monkeypatch, "ncp-auditor-key-test", "baseline+adversarial", 1)
    run({"ncp_specs"})
    run({"ncp_episodes", "ncp_turns"}, cell)
    cfg["ncp"]["auditor"] = {"model": "smollm2", "count": 3}  # another auditor configuration
    run = ncp_asset_runner(tmp_path, cfg)
    run({"ncp_episodes", "ncp_turns"}, cell)
    run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    wh = Warehouse(tmp_path / "wh.duckdb")
    eps = wh.query("SELECT auditor_id FROM ncp_episodes ORDER BY auditor_id")["auditor_id"].to_list()
    assert eps == ["ncp.auditor:smollm2:v1:x1", "ncp.auditor:smollm2:v1:x3"]
    turns = wh.query("SELECT auditor_id, count(*) AS n FROM ncp_turns GROUP BY 1 ORDER BY 1").to_dicts()
    assert [t["auditor_id"] for t in turns] == eps and turns[0]["n"] == turns[1]["n"] == 2
    # the re-audit replays only the transcript of today's in-loop auditor (one episode, not two)
    assert wh.query("SELECT count(*) AS n FROM ncp_reaudit_episodes")["n"][0] == 1
