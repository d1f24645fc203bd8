"""End to end on the embedded model through Dagster: episodes, re-audit and every NCP table."""
from __future__ import annotations

import pytest


@pytest.mark.slow
def test_end_to_end_on_the_embedded_model_through_dagster(tmp_path):
    """1 spec, 1 turn on SmolLM2-135M: episodes, re-audit (in-loop auditor, answered from the
    cache) and every NCP table materialize. Outcomes of a 135M model are poor; we check shape
    and the replay invariants, not quality. On the shortest spec (movie26) the adversarial player
    rambles past its 256 tokens (kept, cut, as the reference keeps it); a call that still fails
    after retries leaves the episode without a result (ncp_failed_episodes), as in the reference.
    The audit order and inputs are pinned on the scripted backend (test_episode.py).

    Which branch runs depends on the model's answers: on the AMD EPYC machine of 2026-12-03
    (llama-cpp-python 0.3.36) SmolLM2 fails turn 1's fact update after its retries, so the episode
    is listed in ncp_failed_episodes and the checks after the `if failed:` branch do not run there;
    the same tables with an episode that has a result are pinned through Dagster on the scripted
    backend (test_ncp_assets.py)."""
    pytest.importorskip("llama_cpp")
    import yaml

    from assets.partitions import cell_key
    from tests.ncp._ncp_helpers import ncp_asset_runner
    from wse_platform.config import REPO_ROOT
    from wse_platform.warehouse import Warehouse

    shipped = yaml.safe_load((REPO_ROOT / "wse.yaml").read_text(encoding="utf-8"))
    cfg = {"profile": "demo", "warehouse_path": str(tmp_path / "wh.duckdb"), "cache_dir": str(tmp_path / "cache"),
           "artifacts_dir": str(tmp_path / "artifacts"), "models": {"smollm2": shipped["models"]["smollm2"]},
           "ncp": {"narrators": ["smollm2"], "architectures": ["baseline+adversarial"], "player_model": "smollm2",
                   "auditor": {"model": "smollm2", "prompt_version": "v1"}, "t_max": 1, "n_specs": 1,
                   "spec_ids": ["movie26"],  # the shortest spec: the suite's time budget
                   "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 256}}}
    run = ncp_asset_runner(tmp_path, cfg)

    cell = str(cell_key("smollm2", "baseline+adversarial"))
    run({"ncp_specs"})
    run({"ncp_episodes", "ncp_turns"}, cell)
    replay = run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    run({"ncp_summary", "ncp_survival", "ncp_auditor_sensitivity", "ncp_genre"})

    wh = Warehouse(tmp_path / "wh.duckdb")
    eps = wh.query("SELECT * FROM ncp_episodes").to_dicts()
    failed = wh.query("SELECT * FROM ncp_failed_episodes").to_dicts()
    assert len(eps) + len(failed) == 1  # a result, or listed without one (never both)
    fresh = wh.query("SELECT count(*) AS n FROM llm_calls WHERE run_id = ? AND NOT cache_hit", [replay.run_id])
    assert fresh["n"][0] == 0  # the replay was answered entirely from the cache
    if failed:
        (f,) = failed
        assert f["role"] and f["error_kind"] and f["message"]
        assert wh.query("SELECT count(*) AS n FROM ncp_turns")["n"][0] == 0
        return
    (ep,) = eps
    assert ep["termination"] in ("CONFLICT", "SUCCESS", "SURVIVAL") and 0 <= ep["turns"] <= 1
    turns = wh.query("SELECT * FROM ncp_turns ORDER BY turn").to_dicts()
    assert turns[0]["turn"] == 0 and all(t["llm_call_ids"] for t in turns)
    (re,) = wh.query("SELECT * FROM ncp_reaudit_episodes").to_dicts()
    assert (re["turns"], re["termination"]) == (ep["turns"], ep["termination"])  # same auditor, same transcript
    assert wh.query("SELECT count(*) AS n FROM ncp_summary")["n"][0] == 1
    assert wh.query("SELECT turn FROM ncp_survival ORDER BY turn")["turn"].to_list() == [0, 1]
    assert wh.query("SELECT count(*) AS n FROM ncp_genre")["n"][0] == 1
    assert wh.query("SELECT row_type FROM ncp_auditor_sensitivity")["row_type"].to_list() == ["auditor"]
    assert (tmp_path / "artifacts" / "ncp" / "survival.png").exists()
