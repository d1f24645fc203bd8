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
    assert keys(report_assets, on) == {"endings_stability", "endings_corpus_summary", "endings_rubric_contrasts"}


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
                          ("endings_rubric_scores", RUBRIC_SCHEMA)]:
        df = pl.DataFrame([{c: None for c in schema}], schema=schema)
        assert wh.replace_table(table, df) == 1
        assert wh.table(table).columns == list(schema), table
