"""Progress lines of `wse materialize` (wse_platform/progress.py): the line, the ETA and when a line
is written, against hand-computed values; the planned totals per run from `wse plan`."""
from __future__ import annotations

from dagster import AssetKey

from wse_platform import plan, progress
from wse_platform.config import settings_from_dict
from wse_platform.progress import Counts, Reporter, duration, eta_seconds, line
from wse_platform.runner import RunPlanStep


def test_line_with_a_planned_total():
    # 50 done, 10 of them from the cache: 40 answered by models in 20 s = 2.0/s; 150 left / 2.0 = 75 s
    c = Counts(done=50, cached=10, failed=2)
    assert eta_seconds(c, 200, 20.0) == 75.0
    assert line("progress", c, 200, 20.0) == ("progress: 50/≤200 requests (25 %; 10 from cache, 2 failed), "
                                              "2.0 req/s, elapsed 20s, ETA ≤ 1m15s")
    assert line("progress", Counts(200, 10, 2), 200, 95.0, final="done") == \
        "progress: 200/≤200 requests (100 %; 10 from cache, 2 failed), 2.0 req/s, elapsed 1m35s, done"


def test_eta_while_only_the_cache_answered_and_without_a_total():
    # nothing answered by a model yet: the pace of all requests (30 in 3 s = 10/s); 70 left = 7 s
    assert eta_seconds(Counts(30, 30, 0), 100, 3.0) == 7.0
    assert eta_seconds(Counts(0, 0, 0), 100, 3.0) is None
    assert eta_seconds(Counts(5, 0, 0), None, 3.0) is None
    assert line("p", Counts(12, 0, 1), None, 4.0) == \
        "p: 12 requests (0 from cache, 1 failed; no planned total), 3.0 req/s, elapsed 4s"
    # the plan is an upper bound; when a run asks more than it said, the line says so and has no ETA
    assert line("p", Counts(120, 0, 0), 100, 10.0) == \
        "p: 120 requests (0 from cache, 0 failed; more than the 100 planned), 12.0 req/s, elapsed 10s"


def test_durations():
    assert [duration(s) for s in (0.4, 59, 60, 61.6, 3599, 3725)] == ["0s", "59s", "1m00s", "1m02s", "59m59s",
                                                                     "1h02m"]


def test_a_line_every_10_s_or_every_5_percent_never_closer_than_2_s():
    now, counts, lines = [0.0], [Counts()], []
    r = Reporter("p", lambda: counts[0], 100, lines.append, clock=lambda: now[0])

    def at(t, done):
        now[0], counts[0] = t, Counts(done)
        r.poll()
        return len(lines)

    assert at(1.0, 10) == 0          # 10 % done, but within 2 s of the start
    assert at(2.5, 10) == 1          # >= 5 % since the last line
    assert at(3.0, 20) == 1          # 10 % more, but 0.5 s after the last line
    assert at(5.0, 23) == 2          # 13 % since the last line, 2.5 s later
    assert at(9.0, 25) == 2          # 2 % since the last line, 4 s
    assert at(15.0, 26) == 3         # 10 s since the last line
    assert at(30.0, 26) == 3         # nothing new: no line
    assert lines[-1] == "p: 26/≤100 requests (26 %; 0 from cache, 0 failed), 1.7 req/s, elapsed 15s, ETA ≤ 43s"
    now[0], counts[0] = 40.0, Counts(90)
    r.finish("stopped by an error")
    assert lines[-1].endswith("elapsed 40s, stopped by an error") and "90/≤100" in lines[-1]


def test_counts_are_taken_from_the_start_of_a_reporter_and_summed_over_shared_slots():
    tally, shared = progress.Tally(), progress.Shared(2)
    tally.add(False, False)
    tally.publish(shared.arr, 0)               # counts so far are published at once
    tally.add(True, False)
    tally.add(False, True)
    shared.arr[progress.FIELDS:progress.FIELDS + 3] = [5, 1, 0]   # a worker's slot (FIELDS per slot)
    assert shared.counts() == Counts(8, 2, 1)
    r = Reporter("p", shared.counts, None, lambda _: None)
    tally.add(True, False)
    assert r.counts() == Counts(1, 1, 0)


def test_planned_totals_per_run_from_the_plan(tmp_path):
    s = settings_from_dict({
        "profile": "paper", "warehouse_path": str(tmp_path / "wh.duckdb"),
        "models": {"gen": {"backend": "litellm", "model_id": "openai/gen"},
                   "judge": {"backend": "litellm", "model_id": "openai/judge"}},
        "wse": {"models": ["gen"], "architectures": ["B1"], "horizon": 3, "n_seeds": 2,
                "consistency_judge": {"model": "judge"}},
        "ncp": {"narrators": ["gen"], "architectures": ["baseline+adversarial"], "player_model": "judge",
                "auditor": {"model": "judge"}, "t_max": 2, "n_specs": 3,
                "reaudit_auditors": [{"model": "gen", "count": 1}]}})
    steps = [RunPlanStep([AssetKey("wse_trajectory_steps"), AssetKey("wse_trajectories"),
                          AssetKey("wse_consistency_verdicts")], "B1|gen"),
             RunPlanStep([AssetKey("ncp_reaudit_episodes"), AssetKey("ncp_reaudit_turns")],
                         "baseline+adversarial|gen"),
             RunPlanStep([AssetKey("wse_summary")], None)]
    totals = progress.step_totals(s, steps)
    # WSE B1: the story agent per step (2 seeds x 3 steps); a consistency verdict per step
    assert totals[0] == {"wse_trajectory_steps": 6, "wse_consistency_verdicts": 6}
    # re-audit: the re-audit auditor's four stages per turn (3 specs x 2 turns), and the in-loop auditor's
    # five stages replayed from the cache (not requests to the servers: `wse plan` leaves them out)
    assert totals[1] == {"ncp_reaudit_episodes": 4 * 6 + 5 * 6}
    assert totals[2] == {}
    assert progress.total_of(totals[0], ["wse_trajectory_steps", "wse_trajectories"]) == 6
    assert progress.total_of(totals[2], ["wse_summary"]) is None
    cell = {c.cell: c for c in plan.build(s).cells}["baseline+adversarial|gen"]
    assert cell.requests == 3 + 6 + 6 + 5 * 6 + 4 * 6
    assert progress.decode_tag(progress.encode_tag(totals[0])) == totals[0]


def test_llm_assets_the_plan_does_not_count_are_named():
    from dagster import Definitions, MaterializeResult, asset, multi_asset, AssetSpec

    @multi_asset(specs=[AssetSpec("ncp_episodes", kinds={"llm"}), AssetSpec("ncp_turns", kinds={"llm"})])
    def episodes():
        yield MaterializeResult(asset_key="ncp_episodes")
        yield MaterializeResult(asset_key="ncp_turns")

    @asset(kinds={"llm"})
    def endings_rubric_scores():
        return None

    @asset(kinds={"duckdb"})
    def table():
        return None

    defs = Definitions(assets=[episodes, endings_rubric_scores, table])
    steps = [RunPlanStep([AssetKey("ncp_episodes"), AssetKey("ncp_turns")], "c"),
             RunPlanStep([AssetKey("endings_rubric_scores"), AssetKey("table")], "c")]
    assert progress.unplanned(defs, steps, [{"ncp_episodes": 3}, {}]) == ["endings_rubric_scores"]
    assert progress.unplanned(defs, steps, [{}, {}]) == ["endings_rubric_scores", "ncp_episodes", "ncp_turns"]


def test_a_step_without_the_tag_plans_itself_once_per_config(tmp_path, monkeypatch):
    s = settings_from_dict({"profile": "paper", "warehouse_path": str(tmp_path / "wh.duckdb"),
                            "models": {"gen": {"backend": "litellm", "model_id": "openai/gen"}},
                            "wse": {"models": ["gen"], "architectures": ["B3"], "horizon": 2, "n_seeds": 1}})
    builds = []
    real = plan.build
    monkeypatch.setattr(plan, "build", lambda *a, **k: builds.append(1) or real(*a, **k))
    seeds = [("s0", '{"cast": [{"role": "player"}, {"role": "npc"}, {"role": "npc"}]}')]
    # B3, 2 steps: the story agent per step and a CA call per NPC (2, from the warehouse's seed) per step
    assert progress.planned_in_step(s, ["wse_trajectory_steps", "wse_trajectories"], "B3|gen", seeds) == 2 + 4
    assert progress.planned_in_step(s, ["wse_trajectory_steps"], "B3|gen", seeds) == 6
    assert progress.planned_in_step(s, ["wse_summary"], None, seeds) is None
    assert len(builds) == 1
