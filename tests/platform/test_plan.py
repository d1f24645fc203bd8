"""`wse plan`: request counts per cell against hand-computed protocol counts, observed tokens and
latency from llm_calls, cost for priced models, wall time on the configured slots, the scale note."""
from __future__ import annotations

import duckdb
import pytest

from wse_platform import plan
from wse_platform.config import settings_from_dict

MODELS = {"gen": {"backend": "litellm", "model_id": "openai/gen", "api_base": ["http://a/v1", "http://b/v1"],
                  "endpoint_concurrency": 8, "price_in_per_token": 1e-6, "price_out_per_token": 2e-6},
          "judge": {"backend": "litellm", "model_id": "openai/judge"}}


def _settings(tmp_path, **sections):
    raw = {"profile": "paper", "models": MODELS, "warehouse_path": str(tmp_path / "wh.duckdb"), **sections}
    return settings_from_dict(raw)


def _cells(settings):
    return {(c.benchmark, c.cell): c for c in plan.build(settings).cells}


def test_wse_requests_per_cell_follow_the_architecture(tmp_path):
    s = _settings(tmp_path, wse={"models": ["gen"], "architectures": ["B1", "B2+WMOD", "B3+WMEM+WMOD"],
                                 "horizon": 3, "n_seeds": 2,
                                 "consistency_judge": {"model": "judge"}, "richness_judge": {"model": "judge"}})
    cells = _cells(s)
    # B1: story agent per step (2 seeds x 3 steps), a consistency verdict per step, richness per trajectory
    assert cells[("wse", "B1|gen")].requests == 6 + 6 + 2
    # B2+WMOD: + one centralized CA call and one World Model call per step
    assert cells[("wse", "B2+WMOD|gen")].requests == 6 * 3 + 6 + 2
    # B3: one CA call per NPC per step (no seeds in the warehouse: 4 NPCs each), + WMOD, story, WMEM
    assert cells[("wse", "B3+WMEM+WMOD|gen")].requests == 3 * (4 + 4) + 6 * 3 + 6 + 2
    roles = {x.role: x.requests for x in cells[("wse", "B3+WMEM+WMOD|gen")].loads}
    assert roles["wse.character_agent_distributed"] == 24 and roles["wse.richness_judge"] == 2


def test_wse_uses_the_seeds_npc_counts_from_the_warehouse(tmp_path):
    import json
    with duckdb.connect(str(tmp_path / "wh.duckdb")) as con:
        con.execute("CREATE TABLE wse_episode_seeds (seed_id VARCHAR, seed_order INTEGER, seed_json VARCHAR)")
        for i, n in enumerate((2, 5)):
            cast = [{"role": "player"}] + [{"role": "npc"}] * n
            con.execute("INSERT INTO wse_episode_seeds VALUES (?, ?, ?)", [f"s{i}", i, json.dumps({"cast": cast})])
    s = _settings(tmp_path, wse={"models": ["gen"], "architectures": ["B3"], "horizon": 2, "n_seeds": 2})
    loads = {x.role: x.requests for x in _cells(s)[("wse", "B3|gen")].loads}
    assert loads["wse.character_agent_distributed"] == 2 * (2 + 5)


def test_ncp_requests_per_cell(tmp_path):
    s = _settings(tmp_path, ncp={"narrators": ["gen"], "architectures": ["baseline+adversarial", "memory+adversarial"],
                                 "player_model": "judge", "auditor": {"model": "judge"}, "t_max": 2, "n_specs": 3,
                                 "reaudit_auditors": [{"model": "judge", "count": 2}]})
    cells = _cells(s)
    # opening per spec; per turn narrator, player, five audit stages; re-audit: four stages x count
    base = 3 + 6 + 6 + 5 * 6 + 4 * 6 * 2
    assert cells[("ncp", "baseline+adversarial|gen")].requests == base
    assert cells[("ncp", "memory+adversarial|gen")].requests == base + 6     # a subgoal summary per turn


def test_endings_positions_follow_k_stride_and_cap(tmp_path):
    import json
    corpus = tmp_path / "stories.jsonl"
    sentence = "The quiet house waited for the storm to come over the hill at last tonight. "
    corpus.write_text(json.dumps({"id": "a", "text": sentence * 600}) + "\n", encoding="utf-8")  # 600 sentences
    s = _settings(tmp_path, endings={"forecaster": "gen", "judge": "judge", "k": 10, "position_stride": 2,
                                     "max_words": 20000, "corpora": [{"name": "c", "path": str(corpus)}]})
    cell = _cells(s)[("endings", "human:c")]
    loads = {x.role: x for x in cell.loads}
    positions = int(600 * 0.89 / 2)
    assert loads["endings.forecast"].requests == positions and loads["endings.forecast"].samples == 10
    assert loads["endings.judge"].requests == positions * 10


def test_observed_tokens_latency_cost_and_wall_time(tmp_path):
    with duckdb.connect(str(tmp_path / "wh.duckdb")) as con:
        con.execute("CREATE TABLE llm_calls (role VARCHAR, model VARCHAR, tokens_in BIGINT, tokens_out BIGINT, "
                    "n_samples INTEGER, latency_s DOUBLE, cache_hit BOOLEAN, valid BOOLEAN)")
        con.execute("INSERT INTO llm_calls VALUES ('wse.story_agent', 'gen', 1000, 200, 1, 0.5, false, true), "
                    "('wse.story_agent', 'gen', 3000, 400, 1, 1.5, false, true), "
                    "('wse.story_agent', 'gen', 9999, 9999, 1, 0.0, true, true)")   # a cache hit is not a call
    s = _settings(tmp_path, wse={"models": ["gen"], "architectures": ["B1"], "horizon": 4, "n_seeds": 40})
    the_plan = plan.build(s)
    cells, observed = the_plan.cells, the_plan.observed
    (load,) = cells[0].loads
    assert (load.requests, load.prompt_tokens, load.out_tokens) == (160, 2000, 300)
    assert load.basis == "observed (2 calls)"
    assert plan.cost(s, load) == pytest.approx(160 * (2000 * 1e-6 + 300 * 2e-6))
    wall, per_model = plan.wall_seconds(s, cells, observed, None)
    # 160 requests x 1.0 s mean latency over 2 endpoints x 8 slots = 10 s; the chain is 4 steps x 2 = 8 s
    assert per_model == {"gen": pytest.approx(10.0)} and wall == pytest.approx(10.0)
    text = plan.render(s, the_plan)
    assert "B1|gen" in text and "observed" in text and "wall time: ~10 s" in text


def test_the_plan_names_keys_below_the_profile_scale(tmp_path):
    s = _settings(tmp_path, wse={"models": ["gen"], "architectures": ["B1"], "horizon": 2})
    text = plan.render(s, plan.build(s))
    assert "below paper scale" in text and "wse.horizon = 2 (paper: 20)" in text
    assert "wall time: unknown" in text     # no calls observed, no --latency


def test_an_unreadable_input_is_named_not_silently_dropped(tmp_path):
    s = _settings(tmp_path, endings={"forecaster": "gen", "judge": "judge",
                                     "corpora": [{"name": "gone", "path": str(tmp_path / "missing")}]})
    text = plan.render(s, plan.build(s))
    assert "warning: endings corpus 'gone' left out of the plan" in text


def test_unpriced_litellm_models_take_litellms_cost_map(tmp_path):
    s = settings_from_dict({"models": {"mini": {"backend": "litellm", "model_id": "openai/gpt-4o-mini"},
                                       "local": {"backend": "litellm", "model_id": "hosted_vllm/x",
                                                 "api_base": "http://127.0.0.1:8000/v1"}}})
    mini = plan.prices(s, "mini")          # imports litellm without fetching its cost map
    import litellm
    entry = litellm.model_cost["gpt-4o-mini"]
    assert mini == (entry["input_cost_per_token"], entry["output_cost_per_token"])
    assert plan.prices(s, "local") is None
