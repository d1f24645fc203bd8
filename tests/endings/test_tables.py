"""Table builders on small synthetic frames (expected values computed by hand)."""
import shutil

import polars as pl
import pytest

from wse_platform.config import REPO_ROOT
from wse_platform.endings import tables as T
from wse_platform.endings.plots import plot_curve_grid, plot_story_curves
from wse_platform.warehouse import Warehouse

JUDGE = "endings.judge:smollm2:v1:x1"
FAIL = '{"kind": "invalid_output"}'

# (story_id, set_key, position, share, sentence_index, verdicts); "F" = failed judgement
CURVES = [
    ("s1", "human:pd", 0, 0.20, 3, "YYNN"),    # 0.50
    ("s1", "human:pd", 1, 0.50, 7, "YNNN"),    # 0.75  ← strict peak
    ("s1", "human:pd", 2, 0.85, 12, "YYYN"),   # 0.25  (late)
    ("s2", "human:pd", 0, 0.30, 2, "YYYN"),    # 0.25
    ("s2", "human:pd", 1, 0.60, 5, "NNNF"),    # 1.00 over 3 valid
    ("s2", "human:pd", 2, 0.90, 9, "FFFF"),    # no no-rate
    ("s3", "human:pd", 0, 0.50, 4, "NNNN"),    # excluded story
    ("g1", "gen:m:vanilla", 0, 0.20, 2, "NNNN"),   # 1.00
    ("g1", "gen:m:vanilla", 1, 0.40, 4, "YNNN"),   # 0.75
    ("g2", "gen:m:beats", 0, 0.20, 2, "YYYY"),     # 0.00
    ("g2", "gen:m:beats", 1, 0.40, 4, "YYNN"),     # 0.50
]


def _positions() -> pl.DataFrame:
    return pl.DataFrame(
        [{"story_id": s, "set_key": k, "position": p, "sentence_index": si, "revealed_share": sh,
          "n_tokens_revealed": 10, "n_tokens_total": 100, "last_sentence": "x"}
         for s, k, p, sh, si, _ in CURVES])


def _verdicts() -> pl.DataFrame:
    rows = []
    for s, k, p, _, _, vs in CURVES:
        for i, v in enumerate(vs):
            failed = v == "F"
            rows.append({"story_id": s, "set_key": k, "position": p, "sample_index": i,
                         "judge_config_id": JUDGE, "verdict_raw": None if failed else v.lower(),
                         "verdict": None if failed else v, "failure_json": FAIL if failed else None})
    return pl.DataFrame(rows, schema_overrides={"verdict_raw": pl.Utf8, "verdict": pl.Utf8, "failure_json": pl.Utf8})


def _stories() -> pl.DataFrame:
    def row(sid, key, n_words, included=True, corpus=None, model=None, pipeline=None):
        return {"story_id": sid, "set_key": key, "corpus": corpus, "quality_tier": "human" if corpus else "generated",
                "generator_model": model, "pipeline": pipeline, "title": sid, "author": None, "source": None,
                "license": None, "n_words": n_words, "text": "...", "included": included,
                "exclusion_reason": None if included else "too short", "same_model_judge": True}
    return pl.DataFrame([
        row("s1", "human:pd", 800, corpus="pd"), row("s2", "human:pd", 2500, corpus="pd"),
        row("s3", "human:pd", 300, included=False, corpus="pd"),
        row("g1", "gen:m:vanilla", 1200, model="m", pipeline="vanilla"),
        row("g2", "gen:m:beats", 1500, model="m", pipeline="beats"),
    ])


@pytest.fixture(scope="module")
def built():
    nr = T.build_no_rate(_verdicts(), _positions())
    st = T.build_story_tension(nr, _stories())
    return {"no_rate": nr, "story": st, "corpus": T.build_corpus_tension(st),
            "pipeline": T.build_pipeline_effect(st), "length": T.build_length_buckets(st)}


def _one(df: pl.DataFrame, **where) -> dict:
    for c, v in where.items():
        df = df.filter(pl.col(c) == v)
    assert df.height == 1, f"expected one row for {where}, got {df.height}"
    return df.row(0, named=True)


def test_no_rate_rows(built):
    nr = built["no_rate"]
    assert nr.height == len(CURVES)
    r = _one(nr, story_id="s1", position=1)
    assert (r["n_samples"], r["n_valid"], r["n_yes"], r["n_failed"]) == (4, 4, 1, 0)
    assert r["no_rate"] == pytest.approx(0.75)
    assert (r["sentence_index"], r["revealed_share"], r["judge_config_id"]) == (7, 0.50, JUDGE)
    r = _one(nr, story_id="s2", position=1)           # failed judgement left out, not an N
    assert (r["n_valid"], r["n_failed"], r["no_rate"]) == (3, 1, pytest.approx(1.0))
    r = _one(nr, story_id="s2", position=2)
    assert (r["n_valid"], r["n_failed"], r["no_rate"]) == (0, 4, None)


def test_story_tension_rows(built):
    st = built["story"]
    assert sorted(st["story_id"].to_list()) == ["g1", "g2", "s1", "s2"]   # s3 excluded
    s1 = _one(st, story_id="s1")
    assert s1["mean_no_rate"] == pytest.approx(0.5)
    assert s1["late_no_rate"] == pytest.approx(0.25)
    assert s1["retention"] == pytest.approx(0.25 / 0.75)
    assert s1["convergence"] == pytest.approx(-100 * 0.5 / 0.75)  # paper sign: a drop is negative
    assert (s1["n_positions"], s1["n_peaks"], s1["set_kind"], s1["corpus"], s1["n_words"]) == (3, 1, "human", "pd", 800)
    s2 = _one(st, story_id="s2")
    assert (s2["n_positions"], s2["n_positions_failed"]) == (2, 1)
    assert s2["mean_no_rate"] == pytest.approx(0.625)
    assert s2["late_no_rate"] is None and s2["retention"] is None
    assert st["same_model_judge"].all()


def test_corpus_tension_table6(built):
    c = built["corpus"]
    assert c.height == 3
    h = _one(c, set_key="human:pd")
    assert (h["n"], h["set_kind"], h["corpus"], h["same_model_judge"]) == (2, "human", "pd", True)
    # mean NR over stories 0.5 and 0.625: sd = 0.125/√2, half-width = 1.96·sd/√2 = 0.1225
    assert h["mean_no_rate"] == pytest.approx(0.5625)
    assert h["mean_no_rate_ci_low"] == pytest.approx(0.5625 - 0.1225)
    assert h["mean_no_rate_ci_high"] == pytest.approx(0.5625 + 0.1225)
    assert h["mean_no_rate_n"] == 2
    # late NR and retention are defined for s1 only → n = 1, CI NULL
    assert (h["late_no_rate"], h["late_no_rate_n"], h["late_no_rate_ci_low"]) == (pytest.approx(0.25), 1, None)
    assert (h["retention_n"], h["retention_ci_high"]) == (1, None)
    g = _one(c, set_key="gen:m:beats")
    assert (g["generator_model"], g["pipeline"], g["n"]) == ("m", "beats", 1)
    assert g["mean_no_rate"] == pytest.approx(0.25)


def test_pipeline_effect_table2(built):
    p = built["pipeline"]
    rows = p.filter(pl.col("row_kind") == "pipeline")
    assert sorted(rows["pipeline"].to_list()) == ["beats", "vanilla"]    # one row per model × pipeline
    v = _one(p, row_kind="pipeline", pipeline="vanilla")
    b = _one(p, row_kind="pipeline", pipeline="beats")
    assert v["mean_no_rate"] == pytest.approx(0.875)
    assert b["mean_no_rate"] == pytest.approx(0.25)
    assert b["delta_mean_no_rate_vs_vanilla"] == pytest.approx(0.25 - 0.875)
    assert v["delta_mean_no_rate_vs_vanilla"] == pytest.approx(0.0)
    # every metric has its own delta against vanilla
    assert b["delta_ir60_vs_vanilla"] == pytest.approx(b["ir60"] - v["ir60"])
    assert b["delta_late_no_rate_vs_vanilla"] is None         # no position ≥ 80 % in either
    assert b["rubric_overall"] is None and b["rubric_n"] == 0  # no rubric scores given
    # reference rows in the same table: each measured corpus by name and the pooled vanilla stories
    refs = {r["label"]: r for r in p.filter(pl.col("row_kind") == "reference").iter_rows(named=True)}
    assert set(refs) == {"reference corpus: pd", "all generators, vanilla (pooled)"}
    assert refs["reference corpus: pd"]["mean_no_rate"] == pytest.approx(0.5625)
    assert refs["all generators, vanilla (pooled)"]["n"] == 1
    assert refs["reference corpus: pd"]["delta_mean_no_rate_vs_vanilla"] is None


def test_table2_reference_rows_are_the_configured_corpora_by_name_not_the_best_scoring(built):
    """The paper's reference rows are named corpora (Top-10 LLMs, New Yorker), not "the human corpus
    with the highest mean no-rate": a lower-scoring corpus named in the config is the row."""
    st = built["story"]
    low = st.filter(pl.col("set_key") == "human:pd").with_columns(
        set_key=pl.lit("human:eqbench_top10"), corpus=pl.lit("eqbench_top10"), mean_no_rate=pl.lit(0.1))
    both = pl.concat([st, low])
    p = T.build_pipeline_effect(both, None, ["eqbench_top10", "new_yorker"])
    refs = [r for r in p.iter_rows(named=True) if r["row_kind"] == "reference"]
    assert [r["label"] for r in refs] == ["all generators, vanilla (pooled)", "reference corpus: eqbench_top10",
                                          "reference corpus: new_yorker"]
    assert refs[1]["mean_no_rate"] == pytest.approx(0.1) and refs[1]["n"] == 2
    assert refs[2]["n"] == 0 and refs[2]["mean_no_rate"] is None      # named, not measured: an empty row
    from wse_platform.config import ConfigError, settings_from_dict
    with pytest.raises((ConfigError, ValueError), match="reference_corpora.*nope"):
        settings_from_dict({"endings": {"corpora": [{"name": "a", "path": "x"}], "reference_corpora": ["nope"]}})


def test_pipeline_effect_carries_the_rubric_score(built):
    rubric = pl.DataFrame([{"story_id": "g1", "set_key": "gen:m:vanilla", "overall": 80.0},
                           {"story_id": "g2", "set_key": "gen:m:beats", "overall": 70.0}])
    p = T.build_pipeline_effect(built["story"], rubric)
    b = _one(p, row_kind="pipeline", pipeline="beats")
    assert (b["rubric_overall"], b["rubric_n"]) == (70.0, 1)
    assert b["delta_rubric_overall_vs_vanilla"] == pytest.approx(-10.0)


def test_length_buckets_table9(built):
    lb = built["length"]
    rows = {(r["set_key"], r["bucket"]): r for r in lb.iter_rows(named=True)}
    # per corpus / generated set, never pooled: the paper's <2k, 2-3k, 3-4k, 4-5k buckets
    assert set(rows) == {("human:pd", "<2k"), ("human:pd", "2-3k"), ("gen:m:vanilla", "<2k"),
                         ("gen:m:beats", "<2k")}
    g = rows[("gen:m:vanilla", "<2k")]
    assert (g["n"], g["corpus"], g["set_kind"]) == (1, None, "gen")
    assert g["mean_no_rate"] == pytest.approx(0.875) and g["median_no_rate"] == pytest.approx(0.875)
    assert (g["min_words"], g["max_words"], g["bucket_order"]) == (0, 2000, 0)
    assert rows[("human:pd", "<2k")]["mean_no_rate"] == pytest.approx(0.5)
    assert rows[("human:pd", "2-3k")]["corpus"] == "pd"


def test_length_bucket_edges_and_median():
    # a 5,000-word story passes the 500-5,000 filter (inclusive) and lands in its last bucket, 4-5k
    assert [T.length_bucket(n)[0] for n in (0, 1999, 2000, 2999, 3000, 4000, 4999, 5000, 5001, 12000)] == [
        "<2k", "<2k", "2-3k", "2-3k", "3-4k", "4-5k", "4-5k", "4-5k", ">5k", ">5k"]
    st = pl.DataFrame([
        {"story_id": f"x{i}", "set_key": "human:c", "set_kind": "human", "judge_config_id": JUDGE,
         "n_words": 1500, "same_model_judge": False, "n_positions": 3, "mean_no_rate": v}
        for i, v in enumerate([0.1, 0.9, 0.2])
    ]).with_columns([pl.lit(None, dtype=t).alias(c) for c, t in T.STORY_TENSION_SCHEMA.items()
                     if c not in ("story_id", "set_key", "set_kind", "judge_config_id", "n_words",
                                  "same_model_judge", "n_positions", "mean_no_rate")])
    r = T.build_length_buckets(st).row(0, named=True)
    assert r["median_no_rate"] == pytest.approx(0.2) and r["mean_no_rate"] == pytest.approx(0.4)


def test_judge_configurations_stay_separate():
    v = _verdicts()
    other = v.with_columns(judge_config_id=pl.lit("endings.judge:other:v1:x1"), verdict=pl.lit("Y"),
                           failure_json=pl.lit(None, dtype=pl.Utf8))
    nr = T.build_no_rate(pl.concat([v, other]), _positions())
    assert nr.height == 2 * len(CURVES)
    st = T.build_story_tension(nr, _stories())
    c = T.build_corpus_tension(st)
    assert _one(c, set_key="human:pd", judge_config_id="endings.judge:other:v1:x1")["mean_no_rate"] == 0.0
    assert _one(c, set_key="human:pd", judge_config_id=JUDGE)["mean_no_rate"] == pytest.approx(0.5625)


def test_bad_verdict_names_record_and_field():
    v = _verdicts().with_columns(
        verdict=pl.when((pl.col("story_id") == "s1") & (pl.col("position") == 2) & (pl.col("sample_index") == 1))
        .then(pl.lit("maybe")).otherwise(pl.col("verdict")))
    with pytest.raises(T.EndingsTableError, match=r"story_id='s1'.*position=2 sample_index=1: field 'verdict'"):
        T.build_no_rate(v, _positions())


def test_verdict_without_position_fails_clearly():
    with pytest.raises(T.EndingsTableError, match=r"story_id='g2'.*position=1.*endings_positions"):
        T.build_no_rate(_verdicts(), _positions().filter(~((pl.col("story_id") == "g2") & (pl.col("position") == 1))))


def test_missing_column_fails_clearly():
    with pytest.raises(T.EndingsTableError, match=r"endings_verdicts: missing column\(s\) \['failure_json'\]"):
        T.build_no_rate(_verdicts().drop("failure_json"), _positions())


def test_empty_inputs_give_empty_tables_with_schema():
    empty_v = _verdicts().clear()
    nr = T.build_no_rate(empty_v, _positions())
    assert nr.is_empty() and nr.schema == pl.Schema(T.NO_RATE_SCHEMA)
    st = T.build_story_tension(nr, _stories())
    assert st.is_empty() and list(st.columns) == list(T.STORY_TENSION_SCHEMA)
    assert T.build_corpus_tension(st).columns == list(T.CORPUS_TENSION_SCHEMA)
    assert T.build_pipeline_effect(st).is_empty()
    assert T.build_length_buckets(st).is_empty()


def test_tables_fit_the_warehouse_ddl(built, tmp_path):
    sql_dir = tmp_path / "sql"
    sql_dir.mkdir()
    shutil.copy(REPO_ROOT / "sql" / "endings_tables.sql", sql_dir)
    wh = Warehouse(tmp_path / "w.duckdb", sql_dir=sql_dir)
    for table, key in [("endings_no_rate", "no_rate"), ("endings_story_tension", "story"),
                       ("endings_corpus_tension", "corpus"), ("endings_pipeline_effect", "pipeline"),
                       ("endings_length_buckets", "length")]:
        assert wh.replace_table(table, built[key]) == built[key].height
        back = wh.table(table)
        assert back.columns == built[key].columns, table
        assert back.height == built[key].height


def test_plots_write_pngs(built, tmp_path):
    paths = plot_story_curves(built["no_rate"], tmp_path / "curves")
    assert len(paths) == 5      # s1, s2, s3, g1, g2 (the no-rate table is not filtered by inclusion)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    assert (tmp_path / "curves" / "human_pd" / f"s1__{JUDGE.replace(':', '_')}.png").exists()
    grid = plot_curve_grid(built["no_rate"], tmp_path / "grid.png", max_stories=4)
    assert grid is not None and grid.read_bytes()[:4] == b"\x89PNG"
    none = plot_curve_grid(built["no_rate"].clear(), tmp_path / "none.png")   # a "no data" figure (issue 13)
    assert none == tmp_path / "none.png" and none.read_bytes()[:4] == b"\x89PNG"


def test_assets_build_the_tables_from_the_warehouse(tmp_path):
    """The Dagster assets read the upstream tables and write all five result tables."""
    from dagster import materialize

    from assets.endings.tables import build
    from assets.partitions import build_partitions
    from resources import SettingsResource, WarehouseResource
    from wse_platform.config import load_settings

    cfg = tmp_path / "wse.yaml"
    shutil.copy(REPO_ROOT / "wse.yaml", cfg)   # relative warehouse/artifacts paths → tmp_path
    settings = load_settings(cfg)
    wh = Warehouse(settings.warehouse)
    wh.replace_table("endings_stories", _stories())
    wh.replace_table("endings_positions", _positions())
    wh.replace_table("endings_verdicts", _verdicts())

    defs = build(settings, build_partitions(settings))
    result = materialize(defs, resources={"warehouse": WarehouseResource(config_path=str(cfg)),
                                          "settings": SettingsResource(config_path=str(cfg))})
    assert result.success
    assert wh.table("endings_no_rate").height == len(CURVES)
    corpus = wh.table("endings_corpus_tension")
    assert _one(corpus, set_key="human:pd")["mean_no_rate"] == pytest.approx(0.5625)
    assert wh.table("endings_pipeline_effect").height == 2 + 2          # + the two reference rows
    assert wh.table("endings_length_buckets").height == 4              # per set, not pooled
    pngs = list((settings.artifacts / "endings" / "no_rate_curves").rglob("*.png"))
    assert len(pngs) == 4 + 1        # four included stories + the overview grid
    mats = {e.asset_key.to_user_string(): e for e in result.get_asset_materialization_events()}
    meta = mats["endings_story_tension"].materialization.metadata
    assert meta["dagster/row_count"].value == 4 and meta["same_model_judge"].value is True
    # per-corpus bar plots (paper Figs. 8-10) in the corpus table's metadata
    corpus_meta = mats["endings_corpus_tension"].materialization.metadata
    for name in ("no_rate_bars", "inflection_bars", "retention_bars"):
        assert corpus_meta[f"{name}_file"].value.endswith(f"{name}.png")
        assert corpus_meta[name].value.startswith(f"![{name}](http://127.0.0.1:")  # inline on the Overview
        assert (settings.artifacts / "endings" / "bars" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_curve_names_the_story():
    pos = _positions().with_columns(
        revealed_share=pl.when((pl.col("story_id") == "s1") & (pl.col("position") == 2))
        .then(pl.lit(0.1)).otherwise(pl.col("revealed_share")))
    nr = T.build_no_rate(_verdicts(), pos)
    with pytest.raises(T.EndingsTableError, match=r"story_id='s1'.*strictly increasing"):
        T.build_story_tension(nr, _stories())
