"""Repeats (Table 7), the corpus summary (Table 3), the rubric judge and its contrasts, and the
separation of generator and evaluator models."""
from __future__ import annotations

import json

import polars as pl
import pytest

from wse_platform.config import ConfigError, settings_from_dict
from wse_platform.endings import reports as R
from wse_platform.endings import tables as T
from wse_platform.endings.forecast import SplitStory, compute_positions, run_forecasts
from wse_platform.endings.judge import run_judging
from wse_platform.endings.rubric import RubricError, load_rubric, score_rows
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.metrics.endings import whitespace_token_count

SENTENCES = [f"Sentence number {i} tells us that Mara walked further along the quiet shore." for i in range(12)]
TEXT = " ".join(SENTENCES)
MODELS = {"f": {"backend": "litellm", "model_id": "openai/f"}, "j": {"backend": "litellm", "model_id": "openai/j"},
          "g": {"backend": "litellm", "model_id": "openai/g"}}


def _settings(tmp_path, **endings):
    cfg = {"forecaster": "f", "judge": "j", "k": 2, **endings}
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "models": MODELS, "endings": cfg})


def test_repeats_are_separate_rows_with_different_seeds(tmp_path):
    s = _settings(tmp_path, repeats=3)
    story = SplitStory.of("s1", TEXT)
    positions = compute_positions([story], "human:x", whitespace_token_count, 4, "f", "ws")
    fb, jb = ScriptedBackend({"endings.forecast": ["A.", "B."]}), ScriptedBackend({"endings.judge": "N"})
    client = LLMClient(s, backends={"f": fb, "j": jb}, progress=False)
    preds = run_forecasts(client, [story], positions, "human:x", "f", 2, s.endings.forecast_sampling,
                          repeats=s.endings.repeats)
    assert len(fb.calls) == 3 * len(positions)
    assert sorted({c.sampling.seed for c in fb.calls}, key=str) == sorted({None, 1, 2}, key=str)
    keys = {(p["position"], p["sample_index"], p["repeat"]) for p in preds}
    assert len(keys) == len(preds) == 3 * 2 * len(positions)          # no repeat overwrites another
    verdicts = run_judging(client, [story], positions, preds, s)
    assert {v["repeat"] for v in verdicts} == {0, 1, 2}
    assert sorted({c.sampling.seed for c in jb.calls}, key=str) == sorted({None, 1, 2}, key=str)


def _tension(rows):
    base = {c: None for c in T.STORY_TENSION_SCHEMA}
    return pl.DataFrame([{**base, "set_kind": T.set_kind(r["set_key"]), "n_positions": 5, "judge_config_id": "J",
                          **r} for r in rows], schema=T.STORY_TENSION_SCHEMA)


def test_stability_table7_per_repeat_and_spread():
    st = _tension([
        {"story_id": s, "set_key": "gen:m:vanilla", "repeat": r, "mean_no_rate": v, "late_no_rate": 0.2,
         "ir60": 0.1, "retention": 0.3}
        for (s, r, v) in [("a", 0, 0.6), ("b", 0, 0.8), ("a", 1, 0.5), ("b", 1, 0.7)]])
    out = R.build_stability(st)
    reps = out.filter(pl.col("row_kind") == "repeat").sort("repeat")
    assert reps["mean_no_rate"].to_list() == pytest.approx([0.7, 0.6]) and reps["n"].to_list() == [2, 2]
    summ = out.filter(pl.col("row_kind") == "summary").row(0, named=True)
    assert summ["n_repeats"] == 2 and summ["mean_no_rate"] == pytest.approx(0.65)
    assert summ["mean_no_rate_std"] == pytest.approx(0.0707107, rel=1e-5)     # sample std of 0.7, 0.6
    assert summ["late_no_rate_std"] == pytest.approx(0.0)
    # the result tables report the main run only
    corpus = T.build_corpus_tension(st)
    assert corpus.height == 1 and corpus["mean_no_rate"][0] == pytest.approx(0.7)


def test_corpus_summary_table3():
    stories = pl.DataFrame([
        {"story_id": "a", "set_key": "human:c", "corpus": "c", "quality_tier": "pro", "n_words": 1000,
         "included": True, "exclusion_reason": None},
        {"story_id": "b", "set_key": "human:c", "corpus": "c", "quality_tier": "pro", "n_words": 3000,
         "included": True, "exclusion_reason": None},
        {"story_id": "c", "set_key": "human:c", "corpus": "c", "quality_tier": "pro", "n_words": 9000,
         "included": False, "exclusion_reason": "too long: 9000 words > max_words 5000"},
        {"story_id": "d", "set_key": "human:c", "corpus": "c", "quality_tier": "pro", "n_words": 700,
         "included": False, "exclusion_reason": "not prose: 3 control character(s), e.g. U+0000"},
    ])
    positions = pl.DataFrame({"story_id": ["a", "a", "b"], "set_key": ["human:c"] * 3})
    r = R.build_corpus_summary(stories, positions).row(0, named=True)
    assert (r["n_stories"], r["n_kept"], r["mean_words_kept"], r["n_positions"]) == (4, 2, 2000.0, 3)
    assert json.loads(r["exclusions_json"]) == {"not prose": 1, "too long": 1}
    assert (r["n_rubric_band"], r["n_rubric_scored"]) == (None, None)          # rubric judge off
    # rubric-band n ("EQ-Bench n"): kept stories in the band (b), of which scored; a set the
    # rubric judge has not scored yet stays NULL, not 0
    other = stories.with_columns(pl.lit("human:o").alias("set_key"), pl.lit("o").alias("corpus"))
    rubric = pl.DataFrame({"story_id": ["a", "b", "x", "y"], "set_key": ["human:c", "human:c", "gen:g:v", "gen:g:v"],
                           "in_length_band": [False, True, True, True], "overall": [None, 70.0, None, 50.0]})
    rows = {r["set_key"]: r for r in R.build_corpus_summary(pl.concat([stories, other]), positions, rubric)
            .iter_rows(named=True)}
    assert (rows["human:c"]["n_rubric_band"], rows["human:c"]["n_rubric_scored"]) == (1, 1)
    assert (rows["human:o"]["n_rubric_band"], rows["human:o"]["n_rubric_scored"]) == (None, None)
    failed = rubric.with_columns(pl.when(pl.col("story_id") == "b").then(None).otherwise(pl.col("overall"))
                                 .alias("overall"))
    r = R.build_corpus_summary(stories, positions, failed).row(0, named=True)
    assert (r["n_rubric_band"], r["n_rubric_scored"]) == (1, 0)                 # a failed judgement


def test_rubric_file_scores_and_failures(tmp_path):
    rub = tmp_path / "rubric.yaml"
    rub.write_text("scale_max: 10\ncriteria:\n"
                   "  - {id: engaging, name: Engaging, description: d, tension: true}\n"
                   "  - {id: purple, name: Purple, description: d, negative: true}\n", encoding="utf-8")
    rubric = load_rubric(rub)
    assert rubric.overall({"engaging": 8, "purple": 2}) == pytest.approx(80.0)   # (80 + (100 - 20)) / 2
    assert rubric.tension8({"engaging": 8, "purple": 2}) == pytest.approx(80.0)
    shipped = load_rubric()
    assert len(shipped.criteria) == 22 and sum(c.tension for c in shipped.criteria) == 8
    bad = tmp_path / "bad.yaml"
    bad.write_text("scale_max: 10\ncriteria: [{id: x, name: X}]\n", encoding="utf-8")
    with pytest.raises(RubricError, match=r"criteria\[0\]: needs id, name and description"):
        load_rubric(bad)

    s = _settings(tmp_path, rubric={"model": "j", "min_words": 5, "max_words": 100, "band_applies_to": "all"})
    answers = {"A": json.dumps({"scores": {"engaging": 10, "purple": 0}}), "B": "not json"}
    jb = ScriptedBackend(lambda call: answers["A" if "Alpha" in call.messages[-1]["content"] else "B"])
    client = LLMClient(s, backends={"j": jb}, progress=False)
    stories = [{"story_id": "a", "set_key": "gen:g:vanilla", "n_words": 20, "text": "Alpha story. " * 10,
                "idea_id": "i1"},
               {"story_id": "b", "set_key": "gen:g:vanilla", "n_words": 20, "text": "Beta story. " * 10,
                "idea_id": "i1"},
               {"story_id": "c", "set_key": "gen:g:vanilla", "n_words": 500, "text": "Long. " * 500,
                "idea_id": "i1"}]
    rows = {r["story_id"]: r for r in score_rows(client, stories, {"i1": "THE IDEA TEXT"}, rubric, s.endings.rubric)}
    assert rows["a"]["overall"] == pytest.approx(100.0) and json.loads(rows["a"]["scores_json"])["purple"] == 0
    assert rows["b"]["overall"] is None and json.loads(rows["b"]["failure_json"])["error_kind"]
    assert rows["c"]["in_length_band"] is False and rows["c"]["llm_call_id"] is None   # not sent
    sent = [c.messages[-1]["content"] for c in jb.calls]
    assert len({c for c in sent if "Alpha" in c}) == 1 and all("THE IDEA TEXT" in c for c in sent)
    assert all("purple (Purple, fault)" in c for c in sent)
    # by default the band restricts human corpora only: generated stories are scored at all lengths
    s2 = _settings(tmp_path, rubric={"model": "j", "min_words": 5, "max_words": 100})
    human_c = {**stories[2], "story_id": "hc", "set_key": "human:ny"}
    rows2 = {r["story_id"]: r for r in score_rows(client, [stories[2], human_c], {}, rubric, s2.endings.rubric)}
    assert rows2["c"]["in_length_band"] is True and rows2["c"]["llm_call_id"] is not None
    assert rows2["hc"]["in_length_band"] is False and rows2["hc"]["llm_call_id"] is None


def test_rubric_contrasts_and_spearman():
    assert R.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert R.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert R.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / 22.5 ** 0.5)   # ties: mean ranks
    assert R.spearman([1, 2], [1, 2]) is None
    st = _tension([
        {"story_id": f"h{i}", "set_key": "human:ny", "corpus": "ny", "repeat": 0, "mean_no_rate": 0.5 + 0.1 * i}
        for i in range(3)] + [
        {"story_id": f"g{i}", "set_key": "gen:m:vanilla", "generator_model": "m", "pipeline": "vanilla",
         "repeat": 0, "mean_no_rate": 0.4} for i in range(3)])
    rubric = pl.DataFrame([{"story_id": f"h{i}", "set_key": "human:ny", "rubric_config_id": "R",
                            "overall": 60.0 - 10 * i, "tension8": 50.0, "in_length_band": True} for i in range(3)]
                          + [{"story_id": f"g{i}", "set_key": "gen:m:vanilla", "rubric_config_id": "R",
                              "overall": 85.0, "tension8": 80.0, "in_length_band": i < 2} for i in range(3)])
    out = R.build_rubric_contrasts(st, rubric)
    by = {(r["scope"], r["group"]): r for r in out.iter_rows(named=True)}
    assert set(by) == {("set", "human:ny"), ("set", "gen:m:vanilla"), ("pipeline", "m (vanilla)"),
                       ("all", "all stories")}
    assert by[("set", "human:ny")]["spearman_rubric_vs_mean_no_rate"] == pytest.approx(-1.0)
    assert by[("set", "gen:m:vanilla")]["n"] == 2                    # the out-of-band story is left out
    assert by[("pipeline", "m (vanilla)")]["rubric_overall"] == pytest.approx(85.0)
    assert by[("all", "all stories")]["n"] == 5
    # Table 4's ±95 % CI: 1.96·s/√n over the group's stories (human overall 60, 50, 40: s = 10)
    h = by[("set", "human:ny")]
    assert h["rubric_overall_ci95"] == pytest.approx(1.96 * 10 / 3 ** 0.5)
    assert h["rubric_tension8_ci95"] == pytest.approx(0.0)
    assert h["mean_no_rate_ci95"] == pytest.approx(1.96 * 0.1 / 3 ** 0.5)
    assert by[("pipeline", "m (vanilla)")]["rubric_overall_ci95"] == pytest.approx(0.0)


def test_evaluators_must_not_share_a_model_id_with_a_generator(tmp_path):
    models = {**MODELS, "g_alias": {"backend": "litellm", "model_id": "openai/j"}}   # same model, other name
    base = {"cache_dir": str(tmp_path / "c"), "models": models}
    with pytest.raises(ConfigError, match=r"endings.judge: model 'j' has the same model_id 'openai/j' as the "
                                          r"story generator 'g_alias'"):
        settings_from_dict({**base, "endings": {"forecaster": "f", "judge": "j", "generators": ["g_alias"]}})
    with pytest.raises(ConfigError, match="endings.rubric.model"):
        settings_from_dict({**base, "endings": {"forecaster": "f", "judge": "j", "generators": ["g"],
                                                "rubric": {"model": "g"}}})
    ok = settings_from_dict({**base, "endings": {"forecaster": "f", "judge": "j", "generators": ["g"]}})
    assert ok.endings.generators == ["g"]
    allowed = settings_from_dict({**base, "endings": {"forecaster": "f", "judge": "j", "generators": ["g_alias"],
                                                      "allow_same_model": True}})
    assert allowed.endings.allow_same_model


def test_rubric_assets_exist_only_when_configured(tmp_path):
    from assets.endings import reports as report_assets
    from assets.endings import rubric as rubric_assets
    from assets.partitions import build_partitions

    base = {"cache_dir": str(tmp_path / "c"), "models": MODELS,
            "endings": {"forecaster": "f", "judge": "j", "generators": ["g"], "pipelines": ["vanilla"]}}
    off = settings_from_dict(base)
    on = settings_from_dict({**base, "endings": {**base["endings"], "rubric": {"model": "j"}}})

    def keys(module, s):
        return {k.to_user_string() for a in module.build(s, build_partitions(s)) for k in a.keys}
    assert keys(rubric_assets, off) == set()
    assert keys(rubric_assets, on) == {"endings_rubric_scores"}
    assert keys(report_assets, off) == {"endings_stability", "endings_corpus_summary"}
    assert keys(report_assets, on) == {"endings_stability", "endings_corpus_summary", "endings_rubric_contrasts",
                                       "endings_rubric_criteria"}
    [scores] = rubric_assets.build(on, build_partitions(on))
    deps = {k.to_user_string() for k in scores.asset_deps[scores.key]}
    assert "endings_rubric_config" in deps and "endings_set_config" not in deps
    summary = next(a for a in report_assets.build(on, build_partitions(on)) if a.key.path == ["endings_corpus_summary"])
    assert "endings_rubric_scores" in {k.to_user_string() for k in summary.asset_deps[summary.key]}


def test_report_tables_fit_the_warehouse_ddl(tmp_path):
    import shutil

    from assets.endings.rubric import SCHEMA as RUBRIC_SCHEMA
    from wse_platform.config import REPO_ROOT
    from wse_platform.warehouse import Warehouse

    sql_dir = tmp_path / "sql"
    sql_dir.mkdir()
    for f in ("endings.sql", "endings_tables.sql"):
        shutil.copy(REPO_ROOT / "sql" / f, sql_dir)
    wh = Warehouse(tmp_path / "w.duckdb", sql_dir=sql_dir)
    for table, schema in [("endings_stability", R.STABILITY_SCHEMA), ("endings_corpus_summary", R.CORPUS_SUMMARY_SCHEMA),
                          ("endings_rubric_contrasts", R.RUBRIC_CONTRAST_SCHEMA),
                          ("endings_rubric_criteria", R.RUBRIC_CRITERIA_SCHEMA),
                          ("endings_rubric_scores", RUBRIC_SCHEMA)]:
        df = pl.DataFrame([{c: None for c in schema}], schema=schema)
        assert wh.replace_table(table, df) == 1
        assert wh.table(table).columns == list(schema), table


def _two_criteria(tmp_path):
    rub = tmp_path / "rubric.yaml"
    rub.write_text("scale_max: 10\ncriteria:\n"
                   "  - {id: engaging, name: Engaging, description: d, tension: true}\n"
                   "  - {id: purple, name: Purple, description: d, negative: true}\n", encoding="utf-8")
    return load_rubric(rub)


def test_rubric_criteria_fig7_means_ci_and_contrast(tmp_path):
    rubric = _two_criteria(tmp_path)
    cid = f"endings.rubric:j:v1:{rubric.sha}"

    def row(story, set_key, engaging, purple, band=True, config=cid):
        return {"story_id": story, "set_key": set_key, "rubric_config_id": config, "in_length_band": band,
                "scores_json": json.dumps({"engaging": engaging, "purple": purple})}
    scores = pl.DataFrame([
        row("n1", "human:ny", 8, 2), row("n2", "human:ny", 6, 4),              # engaging 70 ± ..., purple 70
        row("t1", "human:tmas", 4, 6), row("t2", "human:tmas", 9, 9, band=False),   # out of band: left out
        row("g1", "gen:m:vanilla", 10, 0),
        row("o1", "gen:m:vanilla", 0, 10, config="endings.rubric:j:v1:otherrubric"),  # another rubric file
    ] + [{"story_id": "f1", "set_key": "human:tmas", "rubric_config_id": cid, "in_length_band": True,
          "scores_json": None}])                                                 # a failed judgement
    st = _tension([{"story_id": "n1", "set_key": "human:ny", "repeat": 0, "mean_no_rate": 0.7},
                   {"story_id": "t1", "set_key": "human:tmas", "repeat": 0, "mean_no_rate": 0.4},
                   {"story_id": "g1", "set_key": "gen:m:vanilla", "repeat": 0, "mean_no_rate": 0.9}])
    assert R.top_human_set(st) == "human:ny"             # the highest-tension *human* set, not the gen set
    out = R.build_rubric_criteria(scores, rubric, st)
    by = {(r["set_key"], r["criterion"]): r for r in out.iter_rows(named=True)}
    assert out.height == 6 and set(out["rubric_config_id"]) == {cid}
    ny = by[("human:ny", "engaging")]
    assert (ny["n"], ny["mean_raw"], ny["mean_score"]) == (2, 7.0, pytest.approx(70.0))
    half = 1.96 * (200 ** 0.5) / 2 ** 0.5                 # scores 80, 60: sample sd = sqrt(200)
    assert (ny["mean_score_ci_low"], ny["mean_score_ci_high"]) == (pytest.approx(70 - half), pytest.approx(70 + half))
    assert by[("human:ny", "purple")]["mean_score"] == pytest.approx(70.0)     # raw 2, 4 -> 80, 60 inverted
    assert by[("human:ny", "purple")]["mean_raw"] == pytest.approx(3.0)
    tm = by[("human:tmas", "purple")]
    assert (tm["n"], tm["mean_score"], tm["mean_score_ci_low"]) == (1, pytest.approx(40.0), None)
    assert tm["delta_vs_reference"] == pytest.approx(40.0 - 70.0) and tm["reference_set_key"] == "human:ny"
    assert by[("gen:m:vanilla", "engaging")]["delta_vs_reference"] == pytest.approx(100.0 - 70.0)
    assert by[("human:ny", "engaging")]["delta_vs_reference"] == pytest.approx(0.0)
    assert by[("human:ny", "engaging")]["tension"] and by[("human:ny", "purple")]["negative"]
    # without tension results there is no reference: the contrast is NULL, the means are not
    bare = R.build_rubric_criteria(scores, rubric)
    assert bare["delta_vs_reference"].null_count() == bare.height and bare["mean_score"].null_count() == 0

    from wse_platform.endings.rubric_plots import plot_rubric_criteria
    png = plot_rubric_criteria(out, tmp_path / "bars" / "rubric_criteria.png")
    assert png is not None and png.read_bytes()[:4] == b"\x89PNG"
    none = plot_rubric_criteria(out.clear(), tmp_path / "none.png")   # a "no data" figure (issue 13)
    assert none == tmp_path / "none.png" and none.read_bytes()[:4] == b"\x89PNG"


def test_rubric_changes_have_their_own_staleness(tmp_path):
    from wse_platform import versions

    def settings(**rubric):
        cfg = {"forecaster": "f", "judge": "j", "generators": ["g"], "pipelines": ["vanilla"], "rubric": rubric}
        return settings_from_dict({"cache_dir": str(tmp_path / "c"), "models": MODELS, "endings": cfg})
    rub = tmp_path / "my_rubric.yaml"
    rub.write_text("scale_max: 10\ncriteria: [{id: a, name: A, description: d}]\n", encoding="utf-8")
    base = settings(model="j")
    variants = [settings(model="j", rubric_file=str(rub)), settings(model="j", min_words=2000, max_words=3000),
                settings(model="f")]
    edited = settings(model="j", rubric_file=str(rub))
    v_file = versions.endings_rubric_version(edited)
    rub.write_text("scale_max: 20\ncriteria: [{id: a, name: A, description: d}]\n", encoding="utf-8")
    assert versions.endings_rubric_version(edited) != v_file          # the file's content, not only its path
    prompts = tmp_path / "prompts" / "endings"
    prompts.mkdir(parents=True)
    # the user's own wording of the same prompt version (prompts directory override)
    (prompts / "rubric.v1.md").write_text((versions.SHIPPED_DIR / "endings" / "rubric.v1.md").read_text() + "\nMore.\n")
    variants.append(settings_from_dict({"cache_dir": str(tmp_path / "c"), "models": MODELS,
                                        "prompts_dir": str(tmp_path / "prompts"),
                                        "endings": {**base.endings.model_dump(include={"forecaster", "judge",
                                                                                       "generators", "pipelines"}),
                                                    "rubric": {"model": "j"}}}))
    off = settings_from_dict({"cache_dir": str(tmp_path / "c"), "models": MODELS,
                              "endings": {"forecaster": "f", "judge": "j", "generators": ["g"], "pipelines": ["vanilla"]}})
    for other in [*variants, off]:
        assert versions.endings_rubric_version(other) != versions.endings_rubric_version(base)
        assert versions.endings_judge_version(other) == versions.endings_judge_version(base)
        for key in ("gen:g:vanilla",):
            assert versions.endings_set_version(other, key) == versions.endings_set_version(base, key)


def test_definitions_with_the_rubric_judge_wire_its_own_config(tmp_path, monkeypatch):
    from dagster import AssetKey, Definitions

    from tests.conftest import write_config
    from wse_platform.definitions import build_definitions

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    (tmp_path / "dh").mkdir()
    cfg = write_config(tmp_path, endings={"forecaster": "smollm2", "judge": "smollm2", "allow_same_model": True,
                                          "generators": ["smollm2"], "rubric": {"model": "smollm2"}})
    defs = build_definitions(str(cfg))
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    children = {k.to_user_string() for k in graph.get(AssetKey("endings_rubric_config")).child_keys}
    assert children == {"endings_rubric_scores"}
    assert AssetKey("endings_rubric_scores") not in graph.get(AssetKey("endings_set_config")).child_keys
    assert {"endings_rubric_contrasts", "endings_rubric_criteria", "endings_corpus_summary"} <= {
        k.to_user_string() for k in graph.get(AssetKey("endings_rubric_scores")).child_keys}


def test_report_assets_write_table3_rubric_n_and_fig7_from_the_warehouse(tmp_path):
    """The Dagster assets read the warehouse and write the rubric-band n and the Fig. 7 table + plot."""
    from dagster import materialize

    from assets.endings import reports as report_assets
    from assets.endings.rubric import SCHEMA as RUBRIC_SCHEMA
    from assets.partitions import build_partitions
    from resources import SettingsResource, WarehouseResource
    from tests.conftest import write_config
    from tests.endings.test_tables import _positions, _stories, _verdicts
    from wse_platform.config import load_settings
    from wse_platform.warehouse import Warehouse

    cfg = write_config(tmp_path, endings={"forecaster": "smollm2", "judge": "smollm2", "allow_same_model": True,
                                          "generators": ["smollm2"], "rubric": {"model": "smollm2"}})
    settings = load_settings(cfg)
    shipped = load_rubric()
    wh = Warehouse(settings.warehouse)
    stories = _stories()
    wh.replace_table("endings_stories", stories)
    wh.replace_table("endings_positions", _positions())
    wh.replace_table("endings_story_tension", T.build_story_tension(T.build_no_rate(_verdicts(), _positions()),
                                                                    stories))
    all_ten = json.dumps({c.id: 10 for c in shipped.criteria})            # every criterion at 10 / 20
    scores = pl.DataFrame([{**{c: None for c in RUBRIC_SCHEMA}, "story_id": sid, "set_key": key,
                            "rubric_config_id": f"endings.rubric:smollm2:v1:{shipped.sha}", "in_length_band": band,
                            "scores_json": all_ten if band else None, "overall": 50.0 if band else None}
                           for sid, key, band in [("s1", "human:pd", False), ("s2", "human:pd", True),
                                                  ("g1", "gen:m:vanilla", True)]], schema=RUBRIC_SCHEMA)
    wh.replace_table("endings_rubric_scores", scores)
    defs = report_assets.build(settings, build_partitions(settings))
    result = materialize(defs, resources={"warehouse": WarehouseResource(config_path=str(cfg)),
                                          "settings": SettingsResource(config_path=str(cfg))})
    assert result.success
    summary = {r["set_key"]: r for r in wh.table("endings_corpus_summary").iter_rows(named=True)}
    assert (summary["human:pd"]["n_rubric_band"], summary["human:pd"]["n_rubric_scored"]) == (1, 1)
    assert summary["gen:m:beats"]["n_rubric_band"] is None                 # not scored
    crit = wh.table("endings_rubric_criteria")
    assert crit.height == 2 * len(shipped.criteria)
    assert set(crit["mean_score"].to_list()) == {50.0}                      # 10 / 20, inverted or not
    assert set(crit["reference_set_key"].to_list()) == {"human:pd"}
    mats = {e.asset_key.to_user_string(): e for e in result.get_asset_materialization_events()}
    meta = mats["endings_rubric_criteria"].materialization.metadata
    assert meta["rubric_criteria_bars_file"].value.endswith("rubric_criteria.png")
    assert meta["rubric_criteria_bars"].value.startswith("![rubric_criteria_bars](http://127.0.0.1:")  # inline
    assert (settings.artifacts / "endings" / "bars" / "rubric_criteria.png").read_bytes()[:4] == b"\x89PNG"
