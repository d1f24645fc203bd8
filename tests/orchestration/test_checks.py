"""Asset checks (assets/checks.py): each passes on good rows and fails on bad rows written
straight into a temp warehouse; two run through Dagster to prove the wiring."""
from __future__ import annotations

import math

import polars as pl
import pytest
from dagster import AssetKey, AssetSelection, DagsterInstance, MaterializeResult, asset, materialize

import assets.checks as C
from assets.partitions import build_partitions, cell_key
from resources import SettingsResource, WarehouseResource
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse

CONS = "wse.consistency_judge:smollm2:v1:x3"   # JudgeConfig(smollm2, v1, 3).judge_id(...)
OLD = "wse.consistency_judge:smollm2:v0:x3"
CELL = {"model": "smollm2", "arch": "B1"}


@pytest.fixture
def settings(config_file):
    # the paper's three judges (the shipped demo config uses one)
    return load_settings(str(config_file), overrides={"wse": {"architectures": ["B1", "B2", "B3"],
        "consistency_judge": {"model": "smollm2", "prompt_version": "v1", "count": 3},
        "richness_judge": {"model": "smollm2", "prompt_version": "v1", "count": 3}}})


@pytest.fixture
def wh(settings):
    return Warehouse(settings.warehouse)


def meta(result, key):
    v = result.metadata[key]
    return v.value if hasattr(v, "value") else v


def examples(result) -> str:
    return meta(result, "examples")


# ---- no duplicates ---------------------------------------------------------------------------
def _steps(arch: str, steps: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"model": "smollm2", "arch": arch, "seed_id": "s1", "step": steps,
                         "narrative": [f"n{s}" for s in steps], "generation_version": "g1"})


def test_no_duplicates_passes_then_fails_with_the_duplicated_key(wh):
    wh.replace_partition("wse_trajectory_steps", _steps("B1", [1, 2, 3]), CELL)
    ok = C.evaluate_no_duplicates(wh, "wse_trajectory_steps", CELL)
    assert ok.passed and meta(ok, "n_checked") == 3 and meta(ok, "n_offending") == 0

    wh.replace_partition("wse_trajectory_steps", _steps("B1", [1, 2, 2, 2]), CELL)
    bad = C.evaluate_no_duplicates(wh, "wse_trajectory_steps", CELL)
    assert not bad.passed
    assert meta(bad, "n_offending") == 3        # three rows share (smollm2, B1, s1, 2)
    assert meta(bad, "n_extra_rows") == 2
    assert meta(bad, "n_duplicate_keys") == 1
    assert "| smollm2 | B1 | s1 | 2 | 3 |" in examples(bad)


def test_no_duplicates_is_scoped_to_the_partition(wh):
    wh.replace_partition("wse_trajectory_steps", _steps("B1", [1, 2]), CELL)
    wh.replace_partition("wse_trajectory_steps", _steps("B2", [1, 1]), {"model": "smollm2", "arch": "B2"})
    assert C.evaluate_no_duplicates(wh, "wse_trajectory_steps", CELL).passed
    assert not C.evaluate_no_duplicates(wh, "wse_trajectory_steps", {"model": "smollm2", "arch": "B2"}).passed
    assert not C.evaluate_no_duplicates(wh, "wse_trajectory_steps", {}).passed   # whole table


def test_one_check_step_reads_a_table_once_for_duplicates_and_usable_rows(wh, monkeypatch):
    """In one check step (`counts_shared`) a cell table's `no_duplicate_rows` and `produced_usable_rows`
    read it in one query (was: three); outside a step each evaluation reads it again. Same verdicts."""
    wh.replace_partition("wse_trajectory_steps", _steps("B1", [1, 2, 2]).with_columns(
        narrative=pl.Series([None, "n2", "n2"])), CELL)
    alone = (C.evaluate_no_duplicates(wh, "wse_trajectory_steps", CELL),
             C.evaluate_usable_rows(wh, "wse_trajectory_steps", CELL))
    asked: list[str] = []
    query = wh.query
    monkeypatch.setattr(wh, "query", lambda sql, params=None: (asked.append(sql), query(sql, params))[1])
    with C.counts_shared():
        shared = (C.evaluate_no_duplicates(wh, "wse_trajectory_steps", CELL),
                  C.evaluate_usable_rows(wh, "wse_trajectory_steps", CELL))
        assert len(asked) == 1
        C.evaluate_usable_rows(wh, "wse_trajectory_steps", {"model": "smollm2", "arch": "B2"})  # another scope
        assert len(asked) == 2
    assert [r.metadata for r in shared] == [r.metadata for r in alone]
    assert not shared[0].passed and meta(shared[0], "n_offending") == 2 and meta(shared[0], "n_checked") == 3
    assert shared[1].passed and meta(shared[1], "n_usable") == 2 and meta(shared[1], "n_rows") == 3
    asked.clear()
    C.evaluate_usable_rows(wh, "wse_trajectory_steps", CELL)          # outside a step: read again
    assert len(asked) == 1


def test_old_judge_configuration_verdicts_are_not_duplicates(wh):
    rows = {"model": "smollm2", "arch": "B1", "seed_id": "s1", "step": 1, "judge_index": 0}
    wh.replace_partition("wse_consistency_verdicts", pl.DataFrame([{**rows, "judge_config_id": CONS}]),
                         {**CELL, "judge_config_id": CONS})
    wh.replace_partition("wse_consistency_verdicts", pl.DataFrame([{**rows, "judge_config_id": OLD}]),
                         {**CELL, "judge_config_id": OLD})
    assert C.evaluate_no_duplicates(wh, "wse_consistency_verdicts", CELL).passed


# ---- WSE consistency coverage ----------------------------------------------------------------
def _narrated(seed: str, n: int, version: str = "g1") -> list[dict]:
    return [{"model": "smollm2", "arch": "B1", "seed_id": seed, "step": s, "narrative": f"{seed}-{s}",
             "generation_version": version} for s in range(1, n + 1)]


def _votes(seed: str, step: int, verdicts: list[str | None], judge=CONS, version="g1", start=0) -> list[dict]:
    out = []
    for j, v in enumerate(verdicts, start=start):
        bad = v == "inconsistent"
        out.append({"judge_config_id": judge, "model": "smollm2", "arch": "B1", "seed_id": seed, "step": step,
                    "judge_index": j, "verdict": v, "category": "world-fact" if bad else None,
                    "prior_source": "opening" if bad else None, "prior_step": None,
                    "failure_json": '{"error_kind": "invalid_json"}' if v is None else None,
                    "generation_version": version})
    return out


C3 = ["consistent"] * 3


def _write_votes(wh, rows: list[dict]) -> None:
    for judge in {r["judge_config_id"] for r in rows}:
        wh.replace_partition("wse_consistency_verdicts", pl.DataFrame([r for r in rows if r["judge_config_id"] == judge]),
                             {**CELL, "judge_config_id": judge})


@pytest.fixture
def four_trajectories(wh):
    """A: contradiction at step 2 (step 3 rightly unjudged); B: step 2 unjudged (only an old judge
    config and another generation voted); C: no majority at step 1 (judging stops);
    D: only judges 0 and 1 voted on step 1."""
    steps = _narrated("A", 3) + _narrated("B", 2) + _narrated("C", 2) + _narrated("D", 1)
    wh.replace_partition("wse_trajectory_steps", pl.DataFrame(steps), CELL)
    votes = (_votes("A", 1, C3) + _votes("A", 2, ["inconsistent", "consistent", "inconsistent"])
             + _votes("B", 1, C3) + _votes("B", 2, C3, judge=OLD) + _votes("B", 2, C3, version="g0")
             + _votes("C", 1, [None, "consistent", "uncertain"])
             + _votes("D", 1, ["consistent", "consistent"]))
    _write_votes(wh, votes)
    return votes


def test_wse_consistency_coverage_finds_exactly_the_unjudged_steps(wh, settings, four_trajectories):
    res = C.evaluate_wse_consistency_coverage(wh, settings.wse.consistency_judge, CELL)
    assert not res.passed
    assert meta(res, "n_offending") == 2 and meta(res, "n_checked") == 4
    assert meta(res, "judge_config_id") == CONS
    md = examples(res)
    assert "| smollm2 | B1 | B | 2 |  | 3 |" in md       # no current-config vote of generation g1
    assert "| smollm2 | B1 | D | 1 | 0,1 | 3 |" in md
    assert "| A |" not in md and "| C |" not in md


def test_wse_consistency_coverage_passes_once_the_votes_exist(wh, settings, four_trajectories):
    _write_votes(wh, four_trajectories + _votes("B", 2, C3) + _votes("D", 1, ["consistent"], start=2))
    res = C.evaluate_wse_consistency_coverage(wh, settings.wse.consistency_judge, CELL)
    assert res.passed, examples(res)
    # B is all-consistent through L = 2 and D through L = 1: nothing further is expected.


def test_wse_consistency_coverage_continues_after_consistent_majority(wh, settings):
    """A 2-of-3 consistent majority (one inconsistent vote) means step 2 must be judged too."""
    wh.replace_partition("wse_trajectory_steps", pl.DataFrame(_narrated("E", 2)), CELL)
    _write_votes(wh, _votes("E", 1, ["consistent", "inconsistent", "consistent"]))
    res = C.evaluate_wse_consistency_coverage(wh, settings.wse.consistency_judge, CELL)
    assert not res.passed and "| E | 2 |" in examples(res)


# ---- WSE richness coverage -------------------------------------------------------------------
def test_wse_richness_coverage(wh, settings):
    rich = "wse.richness_judge:smollm2:v1:x3"
    trajs = pl.DataFrame({"model": "smollm2", "arch": "B1", "seed_id": ["R0", "R1", "R2"], "length": [0, 2, 1],
                          "generation_version": "g1"})
    wh.replace_partition("wse_trajectories", trajs, CELL)
    verdicts = pl.DataFrame({"judge_config_id": rich, "model": "smollm2", "arch": "B1",
                             "seed_id": ["R1", "R1", "R1", "R2", "R2"], "judge_index": [0, 1, 2, 0, 1],
                             "generation_version": "g1"})
    wh.replace_partition("wse_richness_verdicts", verdicts, {**CELL, "judge_config_id": rich})
    res = C.evaluate_wse_richness_coverage(wh, settings.wse.richness_judge, CELL)
    assert not res.passed and meta(res, "n_offending") == 1 and meta(res, "n_checked") == 2
    assert "| smollm2 | B1 | R2 | 1 | 2 | 3 |" in examples(res)        # R0 (L = 0) needs none

    more = pl.concat([verdicts, verdicts.head(1).with_columns(seed_id=pl.lit("R2"), judge_index=pl.lit(2, dtype=pl.Int64))])
    wh.replace_partition("wse_richness_verdicts", more, {**CELL, "judge_config_id": rich})
    assert C.evaluate_wse_richness_coverage(wh, settings.wse.richness_judge, CELL).passed


# ---- NCP ---------------------------------------------------------------------------------------
NCP_CELL = {"model": "smollm2", "arch": "baseline+natural"}


def _turns(reports: list[str | None], invalid: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame({**NCP_CELL, "spec_id": "movie01", "turn": list(range(len(reports))),
                         "conflict_report_json": reports, "invalid_role": invalid})


def test_ncp_every_valid_turn_has_a_conflict_report(wh):
    report = '{"counts": {}, "conflicts": []}'
    good = _turns([None, report, None], [None, None, "ncp.narrator"])   # turn 0 and an invalid turn need none
    wh.replace_partition("ncp_turns", good, NCP_CELL)
    ok = C.evaluate_ncp_conflict_reports(wh, NCP_CELL)
    assert ok.passed and meta(ok, "n_checked") == 1

    wh.replace_partition("ncp_turns", _turns([None, report, None, "not json"], [None, None, None, None]), NCP_CELL)
    bad = C.evaluate_ncp_conflict_reports(wh, NCP_CELL)
    assert not bad.passed and meta(bad, "n_offending") == 2
    assert "| movie01 | 2 |" in examples(bad) and "| movie01 | 3 |" in examples(bad)


def test_a_check_that_examined_nothing_warns_instead_of_passing(wh):
    """Issue 21: `every_turn_audited` on `ncp_turns` "Passed" with `n_checked: 0` (every turn of the cell
    had ended in an invalid output). A check with nothing to examine says so, as a warning."""
    from dagster import AssetCheckSeverity

    only_invalid = _turns([None, None, None], [None, "ncp.narrator", "ncp.player"])  # turn 0 needs no report
    wh.replace_partition("ncp_turns", only_invalid, NCP_CELL)
    res = C.evaluate_ncp_conflict_reports(wh, NCP_CELL)
    assert not res.passed and res.severity == AssetCheckSeverity.WARN and meta(res, "n_checked") == 0
    assert res.description.startswith("examined nothing: no valid turns >= 1")
    assert "model=smollm2" in res.description  # the scope it looked at
    # the same for a table-driven check on an empty scope, and an offending row still is an error
    empty = C.evaluate_no_duplicates(wh, "ncp_episodes", NCP_CELL)
    assert not empty.passed and empty.severity == AssetCheckSeverity.WARN and "examined nothing" in empty.description
    wh.replace_partition("ncp_turns", _turns([None, None], [None, None]), NCP_CELL)
    bad = C.evaluate_ncp_conflict_reports(wh, NCP_CELL)
    assert not bad.passed and bad.severity == AssetCheckSeverity.ERROR and meta(bad, "n_offending") == 1


def test_ncp_every_episode_reaudited_by_every_auditor(wh):
    wh.replace_partition("ncp_episodes", pl.DataFrame({**NCP_CELL, "spec_id": ["m1", "m2"]}), NCP_CELL)
    wh.replace_partition("ncp_reaudit_episodes", pl.DataFrame({**NCP_CELL, "spec_id": ["m1", "m2"],
                                                               "auditor_id": "aud:a"}), {**NCP_CELL, "auditor_id": "aud:a"})
    wh.replace_partition("ncp_reaudit_episodes", pl.DataFrame({**NCP_CELL, "spec_id": ["m1"], "auditor_id": "aud:b"}),
                         {**NCP_CELL, "auditor_id": "aud:b"})
    assert C.evaluate_ncp_reaudit_coverage(wh, ["aud:a"], NCP_CELL).passed
    res = C.evaluate_ncp_reaudit_coverage(wh, ["aud:a", "aud:b"], NCP_CELL)
    assert not res.passed and meta(res, "n_offending") == 1 and meta(res, "n_checked") == 4
    assert "| m2 | aud:b |" in examples(res)


# ---- 100-Endings -------------------------------------------------------------------------------
def test_endings_every_valid_prediction_has_a_current_verdict(wh):
    key = "human:public_domain"
    preds = pl.DataFrame({"story_id": "st", "set_key": key, "position": [0, 0, 1],
                          "sample_index": [0, 1, 0], "prediction": ["an ending", None, "another"],
                          "failure_json": [None, '{"error_kind": "timeout"}', None]})
    wh.replace_partition("endings_predictions", preds, {"set_key": key})
    verdict = {"story_id": "st", "set_key": key, "verdict": "Y"}
    wh.replace_partition("endings_verdicts", pl.DataFrame([{**verdict, "position": 0, "sample_index": 0,
                                                           "judge_config_id": "J2"}]),
                         {"set_key": key, "judge_config_id": "J2"})
    wh.replace_partition("endings_verdicts", pl.DataFrame([{**verdict, "position": 1, "sample_index": 0,
                                                           "judge_config_id": "J1"}]),
                         {"set_key": key, "judge_config_id": "J1"})
    res = C.evaluate_endings_verdict_coverage(wh, "J2", {"set_key": key})
    assert not res.passed and meta(res, "n_offending") == 1 and meta(res, "n_checked") == 2   # failed one excluded
    assert "| human:public_domain | st | 1 | 0 |" in examples(res)   # judged only by the old config J1
    assert C.evaluate_endings_verdict_coverage(wh, "J1", {"set_key": key}).passed is False
    wh.replace_partition("endings_verdicts", pl.DataFrame([{**verdict, "position": p, "sample_index": 0,
                                                           "judge_config_id": "J2"} for p in (0, 1)]),
                         {"set_key": key, "judge_config_id": "J2"})
    assert C.evaluate_endings_verdict_coverage(wh, "J2", {"set_key": key}).passed


# ---- bounds --------------------------------------------------------------------------------------
def _summary(**values) -> pl.DataFrame:
    base = {"model": "smollm2", "arch": "baseline+natural", "auditor_id": "a", "trajectory_pct": 50.0,
            "pct_conflict": 100.0, "survival_at_20": 0.0}
    return pl.DataFrame([{**base, **values}])


@pytest.mark.parametrize("values, offending", [
    ({}, 0),
    ({"trajectory_pct": None, "survival_at_20": 1.0}, 0),          # NULL = undefined; edges are in
    ({"pct_conflict": 100.5}, 1),
    ({"trajectory_pct": -0.1, "survival_at_20": 1.2}, 2),
    ({"trajectory_pct": math.nan}, 1),
])
def test_ncp_summary_bounds(wh, values, offending):
    wh.replace_table("ncp_summary", _summary(**values))
    res = C.evaluate_bounds(wh, "ncp_summary")
    assert res.passed is (offending == 0) and meta(res, "n_offending") == offending


def test_bounds_name_the_column_and_value(wh):
    wh.replace_table("wse_cell_metrics", pl.DataFrame({"model": ["m1", "m2"], "arch": "B1", "G": [100.0, 40.0],
                                                       "C_obs": [80.0, 120.0], "R": [3.0, 7.5]}))
    res = C.evaluate_bounds(wh, "wse_cell_metrics")
    assert not res.passed and meta(res, "n_offending") == 1
    assert "| C_obs | 120 | 0 | 100 | m2 | B1 |" in examples(res)


def test_source_family_contrast_rows_may_be_negative(wh):
    rows = pl.DataFrame({"row_kind": ["family", "contrast"], "C_obs": [40.0, -12.0], "C_adj": [30.0, -5.0]})
    wh.replace_table("wse_source_family", rows)
    assert C.evaluate_bounds(wh, "wse_source_family").passed
    wh.replace_table("wse_source_family", rows.with_columns(row_kind=pl.lit("family")))
    res = C.evaluate_bounds(wh, "wse_source_family")
    assert not res.passed and meta(res, "n_offending") == 2


def test_endings_rates_are_shares(wh):
    tension = pl.DataFrame({"story_id": ["a", "b"], "set_key": "k", "mean_no_rate": [0.2, 0.9], "ir30": [0.0, 1.0],
                            "retention": [1.7, 0.3], "convergence": [-20.0, 150.0]})   # not bounded
    wh.replace_table("endings_story_tension", tension)
    assert C.evaluate_bounds(wh, "endings_story_tension").passed
    wh.replace_table("endings_story_tension", tension.with_columns(ir30=pl.Series([0.5, 30.0])))
    assert not C.evaluate_bounds(wh, "endings_story_tension").passed


def test_every_bounded_and_keyed_column_exists_in_the_ddl(wh):
    cols = wh.query("SELECT table_name, column_name FROM information_schema.columns")
    have = {(t, c) for t, c in cols.iter_rows()}
    want = ({(t, b.column) for t, bs in C.BOUNDS.items() for b in bs}
            | {(t, c) for t, key in C.NATURAL_KEYS.items() for c in key})
    assert want - have == set()


# ---- NCP Table 6 -----------------------------------------------------------------------------
def test_table6_check_on_the_released_specs(wh):
    from wse_platform.ncp.spec import NCP_DATASET_DIR, load_specs
    from wse_platform.ncp.stats import spec_stats

    specs, _ = load_specs(NCP_DATASET_DIR)
    stats = spec_stats(specs)
    wh.replace_table("ncp_spec_stats", stats)
    assert C.evaluate_table6(wh).passed

    wh.replace_table("ncp_spec_stats", spec_stats(specs, ddof=0))       # population std: 4.85 / 3.32 / 4.84
    res = C.evaluate_table6(wh)
    assert not res.passed and meta(res, "n_offending") == 3

    wh.replace_table("ncp_spec_stats", spec_stats(specs[:99]))
    res = C.evaluate_table6(wh)
    assert not res.passed and "| facts | 99 |" in examples(res)


# ---- through Dagster ---------------------------------------------------------------------------
def test_checks_cover_every_partitioned_table_asset(config_file):
    from dagster import AssetsDefinition

    from wse_platform.definitions import build_definitions

    defs = build_definitions(str(config_file))
    partitioned = {k.to_user_string() for a in defs.assets if isinstance(a, AssetsDefinition)
                   and a.is_materializable and a.partitions_def is not None for k in a.keys}
    assert partitioned == set(C.NATURAL_KEYS)
    checks = {(k.asset_key.to_user_string(), k.name) for c in defs.asset_checks for k in c.check_keys}
    assert {(t, "no_duplicate_rows") for t in C.NATURAL_KEYS} <= checks
    assert {(t, "metric_bounds") for t in C.BOUNDS} <= checks
    assert {("wse_consistency_verdicts", "every_step_judged"), ("wse_richness_verdicts", "every_trajectory_rated"),
            ("ncp_turns", "every_turn_audited"), ("ncp_reaudit_episodes", "every_episode_reaudited"),
            ("endings_verdicts", "every_prediction_judged"), ("ncp_spec_stats", "equals_paper_table6")} <= checks
    assert not any(spec.blocking for c in defs.asset_checks for spec in c.check_specs)


def test_partitioned_checks_run_in_a_cell_run(config_file, settings, wh):
    """A partition run of an asset runs its partitioned checks for that cell only."""
    parts = build_partitions(settings)
    checks = C.build(settings, parts)
    wh.replace_partition("wse_trajectory_steps", _steps("B1", [1, 1]), CELL)            # duplicate in B1
    wh.replace_partition("wse_trajectory_steps", _steps("B2", [1, 2]), {"model": "smollm2", "arch": "B2"})
    wh.replace_table("wse_cell_metrics", pl.DataFrame({"model": ["smollm2"], "arch": ["B1"], "G": [101.0]}))

    @asset(name="wse_trajectory_steps", partitions_def=parts.wse)
    def steps_written_elsewhere():                      # stands in for the generation asset
        return MaterializeResult()

    @asset(name="wse_cell_metrics")
    def metrics_written_elsewhere():
        return MaterializeResult()

    resources = {"warehouse": WarehouseResource(config_path=str(config_file)),
                 "settings": SettingsResource(config_path=str(config_file))}
    instance = DagsterInstance.ephemeral()
    results = {}
    for arch in ("B1", "B2"):
        run = materialize([steps_written_elsewhere, *checks], instance=instance, resources=resources,
                          partition_key=cell_key("smollm2", arch), selection=AssetSelection.assets("wse_trajectory_steps"))
        assert run.success
        [ev] = run.get_asset_check_evaluations()
        results[arch] = ev
    assert not results["B1"].passed and results["B2"].passed
    assert results["B1"].metadata["n_offending"].value == 2
    assert results["B1"].metadata["scope"].value == "model=smollm2, arch=B1"
    assert str(results["B1"].partition) == "B1|smollm2"

    run = materialize([metrics_written_elsewhere, *checks], instance=instance, resources=resources,
                      selection=AssetSelection.assets("wse_cell_metrics"))
    [ev] = run.get_asset_check_evaluations()
    assert run.success and not ev.passed and ev.metadata["n_offending"].value == 1   # non-blocking: run still succeeds


def test_a_check_step_looks_up_each_assets_checked_materialization_once(config_file, settings, wh, monkeypatch):
    """Dagster looks up the materialization a partitioned check result describes once per result, and
    `llm_failures_below_threshold` looks up the same one for its run; in the data checks' step
    (`check_targets_shared`) that is one read per asset and partition: the three checks of
    `wse_trajectory_steps` in a cell run read it once (was: four times), and all describe the run's
    materialization of that cell."""
    parts = build_partitions(settings)
    checks = C.build(settings, parts, known={"wse_trajectory_steps": True})
    wh.replace_partition("wse_trajectory_steps", _steps("B1", [1, 2]), CELL)

    @asset(name="wse_trajectory_steps", partitions_def=parts.wse)
    def steps_written_elsewhere():
        return MaterializeResult()

    resources = {"warehouse": WarehouseResource(config_path=str(config_file)),
                 "settings": SettingsResource(config_path=str(config_file))}
    instance = DagsterInstance.ephemeral()
    looked_up = []
    fetch = instance.fetch_materializations

    def counting(records_filter, *args, **kwargs):
        if getattr(records_filter, "asset_partitions", None):
            looked_up.append((records_filter.asset_key, tuple(records_filter.asset_partitions)))
        return fetch(records_filter, *args, **kwargs)

    monkeypatch.setattr(instance, "fetch_materializations", counting)
    run = materialize([steps_written_elsewhere, *checks], instance=instance, resources=resources,
                      partition_key=cell_key("smollm2", "B1"), selection=AssetSelection.assets("wse_trajectory_steps"))
    assert run.success
    evs = run.get_asset_check_evaluations()
    assert sorted(e.check_name for e in evs) == ["llm_failures_below_threshold", "no_duplicate_rows",
                                                  "produced_usable_rows"]
    [mat] = fetch(AssetKey("wse_trajectory_steps"), limit=1).records
    assert {(e.target_materialization_data.storage_id, e.target_materialization_data.run_id) for e in evs} == \
        {(mat.storage_id, run.run_id)}
    llm = next(e for e in evs if e.check_name == "llm_failures_below_threshold")
    assert llm.metadata["run_id"].value == run.run_id  # the run it read is the one that built the cell
    assert looked_up == [(AssetKey("wse_trajectory_steps"), (cell_key("smollm2", "B1"),))]
