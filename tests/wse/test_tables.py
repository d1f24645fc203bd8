"""Final-table builders on a small hand-made dataset (values computed by hand in the comments),
the SQL DDL matching the builders' columns, and the Dagster assets writing a temp warehouse."""
import math
import re
from pathlib import Path

import polars as pl
import pytest

from wse_platform.wse import tables as T

H = 3
CJ = "wse.consistency_judge:m1:v1:x3"
RJ = "wse.richness_judge:m1:v1:x3"
R70 = 100 * math.sqrt(0.5)   # one judge rating 3,3,3 with dense units

# seed -> (world, family): DraCor has two plays so leave-one-play-out has something to drop
SEEDS = {"s1": ("w1", "dracor"), "s2": ("w1b", "dracor"), "s3": ("w2", "itp"), "s4": ("w3", "smallville")}
# (arch, seed): length, first_contradiction, censored_at, failure (component, step), end (kind, step), lost
TRAJ = {
    ("B1", "s1"): (3, None, None, None, None, 0),
    ("B1", "s2"): (3, 2, None, None, None, 0),
    ("B1", "s3"): (1, None, None, ("story_agent", 2), None, 0),
    ("B1", "s4"): (1, None, None, ("story_agent", 2), None, 0),
    ("B2", "s1"): (3, None, None, None, None, 0),
    ("B2", "s2"): (2, None, 1, ("centralized_ca", 3), None, 0),
    ("B2", "s3"): (3, 3, None, None, None, 0),
    ("B2", "s4"): (3, None, None, None, ("closed_story", 3), 0),
    ("B1+WMEM", "s1"): (2, None, None, ("world_memory_agent", 2), None, 1),
    ("B1+WMEM", "s2"): (3, 1, None, None, None, 0),
    ("B1+WMEM", "s3"): (3, None, None, None, None, 0),
    ("B1+WMEM", "s4"): (3, None, None, None, None, 0),
}
# richness judge ratings per trajectory (units = 4 per step -> density above d95 -> Q = 1); None = failed judge
RATINGS = {("B1", "s1"): [5, 5, 1], ("B1", "s2"): [3, 3, 3], ("B1", "s3"): [1, 1, None]}
# step rows at first contradictions: category_majority, prior_source_majority
FIRST_STEPS = {("B1", "s2", 2): ("temporal", "opening"), ("B2", "s3", 3): ("temporal", None),
               ("B1+WMEM", "s2", 1): (None, "initial_world")}


def upstream(model="m1"):
    traj, tc, rv = [], [], []
    for (arch, seed), (length, first, cens, fail, end, lost) in TRAJ.items():
        world, fam = SEEDS[seed]
        traj.append({"model": model, "arch": arch, "seed_id": seed, "world_id": world, "source_family": fam,
                     "horizon": H, "length": length, "failure_component": fail[0] if fail else None,
                     "failure_step": fail[1] if fail else None, "end_kind": end[0] if end else None,
                     "end_step": end[1] if end else None, "day_advances": 1 if seed == "s1" else 0,
                     "lost_steps_wmem": lost, "generation_version": "t"})
        tc.append({"judge_config_id": CJ, "model": model, "arch": arch, "seed_id": seed, "length": length,
                   "first_contradiction": first, "censored_at": cens,
                   "censor_reason": "no_majority" if cens is not None else None})
        for j, r in enumerate(RATINGS.get((arch, seed), [5, 5, 5])):
            rv.append({"judge_config_id": RJ, "model": model, "arch": arch, "seed_id": seed, "judge_index": j,
                       "units_json": "[]", "n_units_non_repetitive": None if r is None else 4 * length,
                       "observed_steps": length, "rating_event_diversity": r, "rating_character_change": r,
                       "rating_world_expansion": r, "failure_json": '{"error_kind": "invalid"}' if r is None else None})
    steps = [{"judge_config_id": CJ, "model": model, "arch": a, "seed_id": s, "step": k, "n_valid_votes": 3,
              "n_consistent": 1, "n_inconsistent": 2, "n_uncertain": 0, "majority": "inconsistent",
              "category_majority": c, "prior_source_majority": p} for (a, s, k), (c, p) in FIRST_STEPS.items()]
    return {"wse_trajectories": pl.DataFrame(traj), "wse_trajectory_consistency": pl.DataFrame(tc),
            "wse_consistency_steps": pl.DataFrame(steps), "wse_richness_verdicts": pl.DataFrame(rv)}


PARAMS = T.TableParams(bootstrap_draws=200, bootstrap_seed=3, consistency_judge_id=CJ, richness_judge_id=RJ)


@pytest.fixture(scope="module")
def built():
    up = upstream()
    return T.build_all_tables(up["wse_trajectories"], up["wse_trajectory_consistency"],
                              up["wse_consistency_steps"], up["wse_richness_verdicts"], PARAMS)


def _row(df, **where):
    sub = df.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in where.items()))
    assert sub.height == 1, (where, sub)
    return sub.row(0, named=True)


def test_every_table_has_its_declared_columns(built):
    assert set(built.tables) == set(T.FINAL_COLUMNS)
    for name, df in built.tables.items():
        assert df.columns == list(T.FINAL_COLUMNS[name]), name


def test_ddl_matches_builder_columns():
    ddl = (Path(__file__).resolve().parents[2] / "sql" / "wse_tables.sql").read_text()
    for name, cols in T.FINAL_COLUMNS.items():
        body = re.search(rf"CREATE TABLE IF NOT EXISTS {name} \((.*?)\n\);", ddl, re.S).group(1)
        declared = [ln.split()[0] for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("--")]
        assert declared == list(cols), name


def test_cell_metrics_by_hand(built):
    cm = built.tables["wse_cell_metrics"]
    b1 = _row(cm, arch="B1")
    # G = 100·(3+3+1+1)/12; KM: Y=[4,2,1], D=[0,1,0] -> S=[1,.5,.5] -> C = 100/3·2
    assert b1["G"] == pytest.approx(200 / 3)
    assert b1["C_obs"] == pytest.approx(200 / 3) and b1["C_adj"] == pytest.approx(200 / 3)
    # R: medians 100 (5,5,1 judges -> 100,100,0), R70, 0 (one judge failed: median of 0,0), 100
    # weighted by observed steps L = 3, 3, 1, 1 (App. B.6); the plain mean is R_unweighted
    assert b1["R"] == pytest.approx((3 * 100 + 3 * R70 + 1 * 0 + 1 * 100) / 8)
    assert b1["R_unweighted"] == pytest.approx((100 + R70 + 0 + 100) / 4)
    assert (b1["n_richness_judge_failures"], b1["fail_story_agent"], b1["n_failures"]) == (1, 2, 2)
    b2 = _row(cm, arch="B2")
    # s2 censored at 1: Y=[4,3,3], D=[0,0,1] -> S3 = 2/3
    assert b2["C_obs"] == pytest.approx(100 / 3 * (2 + 2 / 3))
    assert b2["G"] == pytest.approx(1100 / 12)
    assert (b2["n_censored_no_majority"], b2["end_closed_story"], b2["n_story_endings"]) == (1, 1, 1)
    wm = _row(cm, arch="B1+WMEM")
    assert wm["C_obs"] == pytest.approx(75.0) and wm["fail_world_memory_agent"] == 1
    assert b1["judge_config_id"] == CJ and b1["richness_judge_config_id"] == RJ


def test_architecture_contrasts_by_hand(built):
    ac = built.tables["wse_architecture_contrasts"]
    r_b1 = (3 * 100 + 3 * R70 + 1 * 0 + 1 * 100) / 8      # step-weighted R, as in wse_cell_metrics
    g = _row(ac, scope="group", model_group="all", contrast="B2-B1")
    assert g["delta_G"] == pytest.approx(1100 / 12 - 200 / 3)
    assert g["delta_C_obs"] == pytest.approx(100 / 3 * (2 + 2 / 3) - 200 / 3)
    assert g["delta_R"] == pytest.approx(100 - r_b1)
    assert (g["n_models"], g["n_pairs"], g["n_seeds"], g["n_worlds"], g["n_draws"]) == (1, 1, 4, 4, 200)
    for m in ("G", "C_obs", "C_adj", "R"):
        assert g[f"delta_{m}_lo"] <= g[f"delta_{m}"] + 1e-9 or g[f"delta_{m}_lo"] is None
    w = _row(ac, scope="group", contrast="WMEM on-off")
    assert w["delta_C_obs"] == pytest.approx(75 - 200 / 3)
    assert _row(ac, scope="model", model="m1", contrast="WMEM on-off")["delta_G"] == pytest.approx(w["delta_G"])
    assert _row(ac, scope="base_conditional", base_level="B1", contrast="WMEM on-off")["delta_C_obs"] == \
        pytest.approx(75 - 200 / 3)
    # no B3 and no WMOD architectures -> no such rows
    assert ac.filter(pl.col("contrast").is_in(["B3-B1", "B3-B2", "WMOD on-off"])).is_empty()


def test_contrast_weights_average_pairs_then_models():
    cells = [("a", "B1"), ("a", "B2"), ("a", "B1+WMOD"), ("a", "B2+WMOD"), ("b", "B1"), ("b", "B2")]
    specs, cm = T.contrast_specs(cells, T.TableParams(model_groups={"g": ["a", "b"]}))
    j = next(i for i, s in enumerate(specs) if s.scope == "group" and s.contrast == "B2-B1")
    # model a: two pairs (1/2 each) weighted 1/2; model b: one pair weighted 1/2
    assert cm[:, j].tolist() == [-0.25, 0.25, -0.25, 0.25, -0.5, 0.5]


def test_pareto_rows(built):
    p = built.tables["wse_pareto"]
    assert p.height == 6
    # B2 (C_adj 88.9, R 100) dominates B1 and B1+WMEM (75, 100)
    assert _row(p, consistency_axis="C_adj", arch="B2")["supported"]
    wm = _row(p, consistency_axis="C_adj", arch="B1+WMEM")
    assert not wm["non_dominated"] and wm["gap_below_chord"] is None


def test_scaling_fit_empty_and_fitted():
    empty = T.scaling_fit(pl.DataFrame({"model": ["m1"], "G": [1.0], "C_obs": [1.0], "R": [1.0]}),
                          T.TableParams(model_params={"m1": (1.0, "f")}))
    assert empty[0].is_empty() and empty[0].columns == list(T.FINAL_COLUMNS["wse_scaling_fit"])
    assert "< 3" in empty[1]
    cells = pl.DataFrame({"model": ["a", "a", "b", "c", "d"], "G": [9.0, 11.0, 13.0, 16.0, 50.0],
                          "C_obs": [1.0, 1.0, 2.0, 3.0, 0.0], "R": [5.0, 5.0, 5.0, 5.0, 5.0]})
    params = T.TableParams(model_params={"a": (1.0, "dense"), "b": (2.0, "dense"), "c": (4.0, "dense"),
                                         "d": (8.0, None)})
    table, note = T.scaling_fit(cells, params)
    g = _row(table, metric="G", fit="all")
    assert (g["alpha"], g["beta"], g["r2"], g["n"]) == pytest.approx((10.0, 3.0, 1.0, 3))  # a averages to 10
    assert table.filter((pl.col("metric") == "G") & (pl.col("fit") == "leave_one_out")).height == 3
    r = _row(table, metric="R", fit="all")
    assert r["beta"] == pytest.approx(0.0) and r["r2"] is None   # constant R: R² undefined
    assert note == ""


def test_source_family_by_hand(built):
    sf = built.tables["wse_source_family"]
    d = _row(sf, row_kind="family", source_family="dracor")
    # B1: 66.7 / 66.7; B2: 100 / 100; B1+WMEM: S=[.5,.5,.5] with Y3=0 -> 50 / 33.3
    assert d["C_obs"] == pytest.approx((200 / 3 + 100 + 50) / 3)
    assert d["C_adj"] == pytest.approx((200 / 3 + 100 + 100 / 3) / 3)
    assert (d["n_trajectories"], d["observed_steps"], d["n_worlds"]) == (6, 16, 2)
    assert d["day_advance_pct"] == pytest.approx(100 * 3 / 16)
    assert d["full_horizon_pct"] == pytest.approx(100 * 4 / 6)
    assert d["first_contradiction_median"] == pytest.approx(1.5)
    itp = _row(sf, row_kind="family", source_family="itp")
    assert itp["C_obs"] == pytest.approx((100 + 200 / 3 + 100) / 3)
    assert itp["C_adj"] == pytest.approx((100 / 3 + 200 / 3 + 100) / 3)
    c = _row(sf, row_kind="contrast", contrast="dracor-itp")
    assert c["C_obs"] == pytest.approx(d["C_obs"] - itp["C_obs"])
    sv = _row(sf, row_kind="contrast", contrast="dracor-smallville")
    assert sv["C_adj"] == pytest.approx(d["C_adj"] - (100 / 3 + 100 + 100) / 3)
    drop_w1 = _row(sf, row_kind="leave_one_play_out", source_family="dracor", dropped_world="w1")
    assert (drop_w1["C_obs"], drop_w1["C_adj"]) == pytest.approx((400 / 9, 200 / 9))
    drop_w1b = _row(sf, row_kind="leave_one_play_out", source_family="dracor", dropped_world="w1b")
    assert (drop_w1b["C_obs"], drop_w1b["C_adj"]) == pytest.approx((100.0, 800 / 9))
    assert d["C_obs_lo"] <= d["C_obs"] <= d["C_obs_hi"]


def test_horizon_sensitivity_truncates_lengths_and_contradictions():
    rows = [("x", 10, 7), ("y", 10, None)]
    traj = pl.DataFrame([{"model": "m", "arch": "B1", "seed_id": s, "world_id": "w", "source_family": "itp",
                          "horizon": 10, "length": L, "failure_component": None, "failure_step": None,
                          "end_kind": None, "end_step": None, "day_advances": 0, "lost_steps_wmem": 0}
                         for s, L, _ in rows])
    tc = pl.DataFrame([{"judge_config_id": CJ, "model": "m", "arch": "B1", "seed_id": s, "length": L,
                        "first_contradiction": t, "censored_at": None, "censor_reason": None} for s, L, t in rows],
                      schema_overrides={"first_contradiction": pl.Int64, "censored_at": pl.Int64,
                                        "censor_reason": pl.String})
    frame, info = T.trajectory_frame(traj, tc, pl.DataFrame(), T.TableParams())
    hs = T.horizon_sensitivity(frame, info)
    h5 = _row(hs, scope="all", h=5)
    assert (h5["G_h"], h5["C_obs_h"]) == pytest.approx((100.0, 100.0))   # the step-7 contradiction is beyond h
    h10 = _row(hs, scope="model", model="m", h=10)
    assert h10["C_obs_h"] == pytest.approx(10 * (6 + 4 * 0.5))           # S = .5 from step 7
    assert h10["share_by_step10"] == 1.0 and h10["n_first_contradictions"] == 1
    assert sorted(hs.filter(pl.col("scope") == "all")["h"].to_list()) == [5, 10]


def test_horizon_sensitivity_short_horizon_has_the_horizon_row(built):
    hs = built.tables["wse_horizon_sensitivity"]
    assert hs["h"].unique().to_list() == [H]
    cm = built.tables["wse_cell_metrics"]
    assert _row(hs, scope="all", h=H)["G_h"] == pytest.approx(cm["G"].mean())


def test_first_violations_by_hand(built):
    fv = built.tables["wse_first_violations"]
    t = _row(fv, table_kind="category", scope="all", label="temporal")
    assert (t["n"], t["pct"], t["median_step"]) == pytest.approx((2, 200 / 3, 2.5))
    assert _row(fv, table_kind="category", scope="all", label=T.NO_CATEGORY)["n"] == 1
    src = fv.filter((pl.col("table_kind") == "commitment_source") & (pl.col("scope") == "all"))
    assert dict(src.select("label", "n").iter_rows()) == {"opening": 1, "initial_world": 1, "unresolved": 1}
    # per model: 2 category + 3 source + 3 category × source rows
    assert fv.filter(pl.col("scope") == "model").height == 8


def test_generation_failures_by_hand(built):
    gf = built.tables["wse_generation_failures"]
    story = _row(gf, scope="all", component="story_agent")
    assert (story["n_enabled"], story["n_failures"]) == (12, 2)
    assert story["failure_rate_pct"] == pytest.approx(100 * 2 / 12)
    ca = _row(gf, scope="all", component="centralized_ca")
    assert (ca["n_enabled"], ca["n_failures"], ca["median_failure_step"]) == (4, 1, 3.0)
    wm = _row(gf, scope="all", component="world_memory_agent")
    assert (wm["n_enabled"], wm["n_failures"], wm["lost_steps_wmem"]) == (4, 1, 1)
    assert wm["lost_steps_pct"] == pytest.approx(100 / 12)
    assert _row(gf, scope="all", component="any")["n_failures"] == 4
    assert gf.filter(pl.col("component").is_in(["world_model", "distributed_ca"])).is_empty()


# ---- bad input is reported with table, record and field -------------------------------------------
def test_missing_consistency_row_names_the_trajectory():
    up = upstream()
    tc = up["wse_trajectory_consistency"].filter(~((pl.col("arch") == "B2") & (pl.col("seed_id") == "s3")))
    with pytest.raises(T.TableInputError, match=r"wse_trajectory_consistency.*arch='B2', seed_id='s3'"):
        T.trajectory_frame(up["wse_trajectories"], tc, up["wse_richness_verdicts"], PARAMS)


def test_stale_judged_length_is_rejected():
    up = upstream()
    tc = up["wse_trajectory_consistency"].with_columns(
        length=pl.when(pl.col("seed_id") == "s1").then(1).otherwise(pl.col("length")))
    with pytest.raises(T.TableInputError, match="re-judge"):
        T.trajectory_frame(up["wse_trajectories"], tc, up["wse_richness_verdicts"], PARAMS)


def test_bad_rating_names_field():
    up = upstream()
    rv = up["wse_richness_verdicts"].with_columns(
        rating_world_expansion=pl.when(pl.col("judge_index") == 0).then(9).otherwise(pl.col("rating_world_expansion")))
    with pytest.raises(T.TableInputError, match="rating_world_expansion = 9"):
        T.trajectory_frame(up["wse_trajectories"], up["wse_trajectory_consistency"], rv, PARAMS)


def test_several_judge_configurations_need_a_choice():
    up = upstream()
    tc = pl.concat([up["wse_trajectory_consistency"],
                    up["wse_trajectory_consistency"].with_columns(judge_config_id=pl.lit("old"))])
    with pytest.raises(T.TableInputError, match="several judge configurations"):
        T.trajectory_frame(up["wse_trajectories"], tc, up["wse_richness_verdicts"], T.TableParams())
    frame, info = T.trajectory_frame(up["wse_trajectories"], tc, up["wse_richness_verdicts"], PARAMS)
    assert info["consistency_judge_id"] == CJ and frame.height == 12


def test_missing_column_is_named():
    up = upstream()
    with pytest.raises(T.TableInputError, match=r"wse_trajectories: missing column\(s\) \['lost_steps_wmem'\]"):
        T.generation_failures(up["wse_trajectories"].drop("lost_steps_wmem"))


# ---- the Dagster assets write every table into a warehouse --------------------------------------------
def extra_upstream():
    """Votes with panel members and claims, steps with component texts, and llm_calls for the
    failure-kind, agreement, precursor and cost tables."""
    claim = "Nora burned the silver letter beside the river"
    votes = [{"judge_config_id": CJ, "model": "m1", "arch": a, "seed_id": s, "step": k, "judge_index": j,
              "judge_member": f"{j}:m1", "judge_model": "m1", "verdict": "inconsistent" if j < 2 else "consistent",
              "conflicting_claim": claim if j < 2 else None,
              "failure_json": None, "generation_version": "t"} for (a, s, k) in FIRST_STEPS for j in range(3)]
    steps = [{"model": "m1", "arch": "B1", "seed_id": "s2", "step": k, "player_option": "walk",
              "intents_json": '[{"character_id": "nora", "intent": "Nora burned the silver letter"}]',
              "new_day": k == 1, "failure_component": None, "failure_json": None, "generation_version": "t"}
             for k in (1, 2, 3)]
    steps.append({"model": "m1", "arch": "B1", "seed_id": "s3", "step": 2, "player_option": "run",
                  "intents_json": None, "new_day": False, "failure_component": "story_agent",
                  "failure_json": '{"error_kind": "truncated"}', "generation_version": "t"})
    calls = [{"call_id": f"c{i}", "role": "wse.story_agent", "model": "m1", "partition_key": f"{a}|m1",
              "request_key": f"r{i}", "attempt": 1, "tokens_in": 100, "tokens_out": 10, "valid": i != 0,
              "error_kind": "truncated" if i == 0 else None, "finish_reason": "length" if i == 0 else "stop"}
             for i, a in enumerate(["B1", "B1", "B2", "B1+WMEM"])]
    return {"wse_consistency_verdicts": pl.DataFrame(votes), "wse_trajectory_steps": pl.DataFrame(steps),
            "llm_calls": pl.DataFrame(calls)}


def test_assets_materialize_into_warehouse(tmp_path, monkeypatch):
    from dagster import materialize

    from assets.partitions import build_partitions
    from assets.wse import tables as asset_module
    from resources import SettingsResource, WarehouseResource
    from wse_platform.config import load_settings
    from wse_platform.warehouse import Warehouse

    cfg = tmp_path / "wse.yaml"
    cfg.write_text(
        "profile: demo\nwarehouse_path: wh.duckdb\nartifacts_dir: art\ncache_dir: cache\n"
        "models:\n  m1: {backend: embedded, model_id: x.gguf}\n"
        "wse:\n  models: [m1]\n  consistency_judge: {model: m1, count: 3}\n  richness_judge: {model: m1, count: 3}\n"
        "  bootstrap_draws: 50\n  human_labels: labels\n")
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "consistency_labels.csv").write_text(
        "model,arch,seed_id,step,label\nm1,B1,s2,2,inconsistent\nm1,B2,s3,3,consistent\n")
    for var in ("WSE_CONFIG", "WSE_WAREHOUSE", "WSE_ARTIFACTS_DIR", "WSE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    settings = load_settings(cfg)
    wh = Warehouse(settings.warehouse)
    for name, df in {**upstream(), **extra_upstream()}.items():
        wh.replace_table(name, df)
    assets = asset_module.build(settings, build_partitions(settings))
    result = materialize(assets, resources={"settings": SettingsResource(config_path=str(cfg)),
                                            "warehouse": WarehouseResource(config_path=str(cfg))})
    assert result.success
    for name, cols in T.FINAL_COLUMNS.items():
        stored = wh.query(f'SELECT * FROM "{name}"')
        assert [c.lower() for c in stored.columns] == [c.lower() for c in cols], name
        assert name == "wse_scaling_fit" or stored.height > 0, name
    g = wh.query("SELECT G FROM wse_cell_metrics WHERE arch = 'B1'")["G"][0]
    assert g == pytest.approx(200 / 3)
    assert (settings.artifacts / "wse" / "wse_heatmap_C_obs.png").stat().st_size > 1000
    assert (settings.artifacts / "wse" / "wse_pareto_C_adj.png").exists()
    for name in ("wse_family_models", "wse_full_horizon", "wse_cost_coverage", "wse_precursor_origins",
                 # the appendix figures, each on its asset (issue 22)
                 "wse_fig7", "wse_fig9", "wse_fig11", "wse_fig12", "wse_fig13", "wse_fig14", "wse_fig15"):
        assert (settings.artifacts / "wse" / f"{name}.png").stat().st_size > 1000, name
    hv = wh.query("SELECT statistic, value, n FROM wse_human_validation WHERE statistic = 'accuracy'")
    assert (hv["value"].item(), hv["n"].item()) == (0.5, 2)     # labels: one agrees, one does not


def test_configured_judge_without_rows_is_reported():
    up = upstream()
    params = T.TableParams(consistency_judge_id="wse.consistency_judge:other:v2:x3", richness_judge_id=RJ)
    with pytest.raises(T.TableInputError, match="no rows of judge configuration"):
        T.trajectory_frame(up["wse_trajectories"], up["wse_trajectory_consistency"], up["wse_richness_verdicts"],
                           params)


def test_a_run_reads_the_trajectory_frame_once_while_its_inputs_stay_the_same(tmp_path, monkeypatch):
    """`assets/wse/tables._frame`: nine tables of a run read the same per-trajectory frame; a later table of
    the same run takes the one built first, unless an upstream asset got a newer materialization (a cell
    written meanwhile), or it is another run, warehouse file or parameter set."""
    from types import SimpleNamespace

    from dagster import AssetMaterialization, DagsterInstance

    import assets.wse.tables as A

    built = []
    monkeypatch.setattr(T, "trajectory_frame", lambda *frames, params=None: built.append(1) or
                        (pl.DataFrame({"n": [len(built)]}), {"horizon": H}))
    monkeypatch.setattr(A, "_FRAMES", {})
    (tmp_path / "wh.duckdb").write_bytes(b"")
    wh = SimpleNamespace(path=tmp_path / "wh.duckdb", query=lambda sql: pl.DataFrame())
    instance = DagsterInstance.ephemeral()
    for key in A.FRAME_DEPS:
        instance.report_runless_asset_event(AssetMaterialization(key))
    ctx = SimpleNamespace(instance=instance, run=SimpleNamespace(run_id="run-1"))
    params = T.TableParams()

    frame, info = A._frame(wh, params, ctx)
    again, info2 = A._frame(wh, params, ctx)
    assert len(built) == 1 and again is frame and info2 == info and info2 is not info   # one build; info a copy
    instance.report_runless_asset_event(AssetMaterialization(A.FRAME_DEPS[1]))       # a cell written meanwhile
    assert A._frame(wh, params, ctx)[0]["n"].to_list() == [2]
    A._frame(wh, params, SimpleNamespace(instance=instance, run=SimpleNamespace(run_id="run-2")))          # another run
    A._frame(wh, T.TableParams(bootstrap_seed=7), SimpleNamespace(instance=instance, run=SimpleNamespace(run_id="run-2")))
    A._frame(wh, params)                                                                 # no context: no reuse
    A._frame(wh, params)
    assert len(built) == 6
