"""More 100-Endings report tables (pure polars, no I/O): measurement stability across repeats
(paper Table 7), the corpus summary (Table 3), rubric-vs-tension contrasts (Table 1 left,
Table 4, Fig. 4) and per-criterion rubric scores (Fig. 7).
"""
from __future__ import annotations

import json
import math

import polars as pl

from wse_platform.endings.rubric import Rubric
from wse_platform.endings.tables import (STORY_TENSION_SCHEMA, EndingsTableError, _require, main_repeat,
                                         set_kind)

STABILITY_METRICS = ("mean_no_rate", "late_no_rate", "ir60", "retention")

STABILITY_SCHEMA = {
    "set_key": pl.Utf8, "judge_config_id": pl.Utf8, "repeat": pl.Int64, "row_kind": pl.Utf8,
    "n_repeats": pl.Int64, "n": pl.Int64,
    **{c: pl.Float64 for m in STABILITY_METRICS for c in (m, f"{m}_std")},
}

CORPUS_SUMMARY_SCHEMA = {
    "set_key": pl.Utf8, "set_kind": pl.Utf8, "corpus": pl.Utf8, "quality_tier": pl.Utf8,
    "n_stories": pl.Int64, "n_kept": pl.Int64, "mean_words_kept": pl.Float64, "n_positions": pl.Int64,
    "exclusions_json": pl.Utf8, "n_rubric_band": pl.Int64, "n_rubric_scored": pl.Int64,
}

RUBRIC_CONTRAST_SCHEMA = {
    "scope": pl.Utf8, "group": pl.Utf8, "judge_config_id": pl.Utf8, "rubric_config_id": pl.Utf8,
    "n": pl.Int64, "rubric_overall": pl.Float64, "rubric_tension8": pl.Float64, "mean_no_rate": pl.Float64,
    "late_no_rate": pl.Float64, "spearman_rubric_vs_mean_no_rate": pl.Float64,
    # ±95 % CI half-widths 1.96·s/√n of each mean (Table 4's "±95 % CI"; NULL for n < 2), added later
    "rubric_overall_ci95": pl.Float64, "rubric_tension8_ci95": pl.Float64, "mean_no_rate_ci95": pl.Float64,
    "late_no_rate_ci95": pl.Float64,
}


def _mean(xs: list) -> float | None:
    xs = [float(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _std(xs: list) -> float | None:
    xs = [float(x) for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _ci95(xs: list) -> float | None:
    """Half-width 1.96·s/√n of the mean of the non-missing values (None for fewer than 2)."""
    sd = _std(xs)
    n = len([x for x in xs if x is not None])
    return 1.96 * sd / math.sqrt(n) if sd is not None else None


def build_stability(story_tension_df: pl.DataFrame) -> pl.DataFrame:
    """Paper Table 7: per set and judge configuration, one row per repeat (story means of mean
    NR, late NR, IR60, retention) and a `summary` row with the mean and the sample std across
    repeats (std NULL with one repeat)."""
    _require(story_tension_df, "endings_story_tension", list(STORY_TENSION_SCHEMA))
    st = story_tension_df.filter(pl.col("n_positions") > 0)
    rows = []
    for (set_key_, judge), g in sorted(st.partition_by(["set_key", "judge_config_id"], as_dict=True).items()):
        per = []
        for (rep,), gr in sorted(g.partition_by(["repeat"], as_dict=True).items()):
            r = {"set_key": set_key_, "judge_config_id": judge, "repeat": rep, "row_kind": "repeat",
                 "n_repeats": None, "n": gr.height}
            for m in STABILITY_METRICS:
                r |= {m: _mean(gr[m].to_list()), f"{m}_std": None}
            per.append(r)
        summary = {"set_key": set_key_, "judge_config_id": judge, "repeat": None, "row_kind": "summary",
                   "n_repeats": len(per), "n": min(r["n"] for r in per)}
        for m in STABILITY_METRICS:
            vals = [r[m] for r in per]
            summary |= {m: _mean(vals), f"{m}_std": _std(vals)}
        rows += per + [summary]
    return pl.DataFrame(rows, schema=STABILITY_SCHEMA) if rows else pl.DataFrame(schema=STABILITY_SCHEMA)


def _rubric_counts(rubric: pl.DataFrame | None) -> dict[str, tuple[int, int]]:
    """set_key -> (kept stories inside the rubric's length band, of those scored without failure)."""
    if rubric is None or rubric.is_empty():
        return {}
    _require(rubric, "endings_rubric_scores", ["story_id", "set_key", "in_length_band", "overall"])
    band = rubric.filter(pl.col("in_length_band").fill_null(False))
    out = {}
    for (set_key_,), g in rubric.partition_by(["set_key"], as_dict=True).items():
        b = band.filter(pl.col("set_key") == set_key_)
        out[set_key_] = (b["story_id"].n_unique(), b.filter(pl.col("overall").is_not_null())["story_id"].n_unique())
    return out


def build_corpus_summary(stories: pl.DataFrame, positions: pl.DataFrame,
                         rubric: pl.DataFrame | None = None) -> pl.DataFrame:
    """Paper Table 3: per corpus / generated set, stories read, stories kept (measured), the
    kept stories' mean word count, kept positions, the exclusion reasons counted, and the
    paper's "EQ-Bench n": kept stories inside the rubric judge's length band (`n_rubric_band`,
    from `endings_rubric_scores`) and how many of them were scored (`n_rubric_scored`). Both
    NULL when the rubric judge is off (`rubric` None) or has not scored the set yet."""
    _require(stories, "endings_stories", ["story_id", "set_key", "corpus", "quality_tier", "n_words", "included",
                                          "exclusion_reason"])
    _require(positions, "endings_positions", ["story_id", "set_key"])
    n_pos = dict(positions.group_by("set_key").len().iter_rows()) if positions.height else {}
    rub = _rubric_counts(rubric)
    rows = []
    for (set_key_,), g in sorted(stories.partition_by(["set_key"], as_dict=True).items()):
        kept = g.filter(pl.col("included").fill_null(False))
        reasons: dict[str, int] = {}
        for r in g.filter(~pl.col("included").fill_null(False))["exclusion_reason"].to_list():
            key = (r or "unknown").split(":", 1)[0]
            reasons[key] = reasons.get(key, 0) + 1
        rows.append({"set_key": set_key_, "set_kind": set_kind(set_key_), "corpus": g["corpus"][0],
                     "quality_tier": g["quality_tier"][0], "n_stories": g.height, "n_kept": kept.height,
                     "mean_words_kept": _mean(kept["n_words"].to_list()),
                     "n_positions": int(n_pos.get(set_key_, 0)),
                     "exclusions_json": json.dumps(reasons, sort_keys=True),
                     "n_rubric_band": rub.get(set_key_, (None, None))[0],
                     "n_rubric_scored": rub.get(set_key_, (None, None))[1]})
    return pl.DataFrame(rows, schema=CORPUS_SUMMARY_SCHEMA) if rows else pl.DataFrame(schema=CORPUS_SUMMARY_SCHEMA)


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1   # ties get their mean rank
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman rank correlation (Pearson on mean ranks); None for n < 3 or a constant side."""
    if len(xs) != len(ys):
        raise ValueError("spearman: sequences of different length")
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def build_rubric_contrasts(story_tension_df: pl.DataFrame, rubric: pl.DataFrame) -> pl.DataFrame:
    """Rubric score against tension: per corpus / generated set, per generator × pipeline, and
    over all stories: mean rubric score (overall, tension-related criteria), mean and late
    no-rate, each with its ±95 % CI half-width (1.96·s/√n over stories, as Table 4 reports it), and
    the Spearman rank correlation between a story's rubric score and its mean no-rate (stories inside
    the rubric's length band only, main repeat)."""
    _require(story_tension_df, "endings_story_tension", list(STORY_TENSION_SCHEMA))
    _require(rubric, "endings_rubric_scores", ["story_id", "set_key", "rubric_config_id", "overall", "tension8",
                                               "in_length_band"])
    st = main_repeat(story_tension_df).filter(pl.col("n_positions") > 0)
    ok = rubric.filter(pl.col("overall").is_not_null() & pl.col("in_length_band").fill_null(False))
    if st.is_empty() or ok.is_empty():
        return pl.DataFrame(schema=RUBRIC_CONTRAST_SCHEMA)
    joined = st.join(ok.select("story_id", "set_key", "rubric_config_id", "overall", "tension8"),
                     on=["story_id", "set_key"], how="inner")
    dup = joined.group_by("story_id", "set_key", "judge_config_id", "rubric_config_id").len().filter(
        pl.col("len") > 1)
    if dup.height:
        raise EndingsTableError(f"endings_rubric_scores: story {dup['story_id'][0]!r} scored twice")
    joined = joined.with_columns(
        pl.when(pl.col("set_kind") == "gen")
        .then(pl.col("generator_model") + " (" + pl.col("pipeline") + ")").otherwise(None).alias("_pipe"))
    rows = []
    for scope, col in (("set", "set_key"), ("pipeline", "_pipe"), ("all", None)):
        keys = [col, "judge_config_id", "rubric_config_id"] if col else ["judge_config_id", "rubric_config_id"]
        src = joined.filter(pl.col(col).is_not_null()) if col else joined
        if src.is_empty():
            continue
        for key, g in sorted(src.partition_by(keys, as_dict=True).items(), key=lambda kv: str(kv[0])):
            group = key[0] if col else "all stories"
            rows.append({"scope": scope, "group": group, "judge_config_id": key[-2], "rubric_config_id": key[-1],
                         "n": g.height, "rubric_overall": _mean(g["overall"].to_list()),
                         "rubric_tension8": _mean(g["tension8"].to_list()),
                         "mean_no_rate": _mean(g["mean_no_rate"].to_list()),
                         "late_no_rate": _mean(g["late_no_rate"].to_list()),
                         "spearman_rubric_vs_mean_no_rate": spearman(g["overall"].to_list(),
                                                                     g["mean_no_rate"].to_list()),
                         **{f"{c}_ci95": _ci95(g[src].to_list()) for c, src in (
                             ("rubric_overall", "overall"), ("rubric_tension8", "tension8"),
                             ("mean_no_rate", "mean_no_rate"), ("late_no_rate", "late_no_rate"))}})
    return pl.DataFrame(rows, schema=RUBRIC_CONTRAST_SCHEMA)


RUBRIC_CRITERIA_SCHEMA = {
    "set_key": pl.Utf8, "set_kind": pl.Utf8, "rubric_config_id": pl.Utf8, "criterion": pl.Utf8,
    "criterion_name": pl.Utf8, "criterion_order": pl.Int64, "negative": pl.Boolean, "tension": pl.Boolean,
    "n": pl.Int64, "mean_raw": pl.Float64, "mean_score": pl.Float64, "mean_score_ci_low": pl.Float64,
    "mean_score_ci_high": pl.Float64, "reference_set_key": pl.Utf8, "delta_vs_reference": pl.Float64,
}


def top_human_set(story_tension_df: pl.DataFrame | None) -> str | None:
    """The human set with the highest mean story no-rate (main repeat, first judge configuration
    in id order): the reference the paper contrasts against (New Yorker). None without one."""
    if story_tension_df is None or story_tension_df.is_empty():
        return None
    st = main_repeat(story_tension_df).filter((pl.col("n_positions") > 0) & (pl.col("set_kind") == "human")
                                              & pl.col("mean_no_rate").is_not_null())
    if st.is_empty():
        return None
    st = st.filter(pl.col("judge_config_id") == sorted(st["judge_config_id"].unique().to_list())[0])
    means = st.group_by("set_key").agg(pl.col("mean_no_rate").mean()).sort(
        ["mean_no_rate", "set_key"], descending=[True, False])
    return means["set_key"][0]


def build_rubric_criteria(rubric_scores: pl.DataFrame, rubric: Rubric,
                          story_tension_df: pl.DataFrame | None = None) -> pl.DataFrame:
    """Paper Fig. 7: one row per set × criterion of `rubric`: stories scored inside the length
    band (n), the mean raw score, the mean 0-100 score with faults inverted (higher = better)
    and its 95 % CI (x̄ ± 1.96·s/√n, NULL for n = 1), and the paper's contrast: the difference
    from the same criterion's score in the reference set (the top human corpus by tension, see
    `top_human_set`). Scores made with another rubric file (other `rubric.sha`) are left out."""
    _require(rubric_scores, "endings_rubric_scores", ["story_id", "set_key", "rubric_config_id", "in_length_band",
                                                      "scores_json"])
    ok = rubric_scores.filter(pl.col("scores_json").is_not_null() & pl.col("in_length_band").fill_null(False)
                              & pl.col("rubric_config_id").str.ends_with(f":{rubric.sha}"))
    if ok.is_empty():
        return pl.DataFrame(schema=RUBRIC_CRITERIA_SCHEMA)
    ref = top_human_set(story_tension_df)
    rows = []
    for (set_key_, config), g in sorted(ok.partition_by(["set_key", "rubric_config_id"], as_dict=True).items()):
        scores = [json.loads(x) for x in g["scores_json"].to_list()]
        for i, c in enumerate(rubric.criteria):
            raw = [float(sc[c.id]) for sc in scores if sc.get(c.id) is not None]
            norm = [rubric.normalised(c, x) for x in raw]
            m, sd = _mean(norm), _std(norm)
            half = 1.96 * sd / math.sqrt(len(norm)) if sd is not None else None
            rows.append({"set_key": set_key_, "set_kind": set_kind(set_key_), "rubric_config_id": config,
                         "criterion": c.id, "criterion_name": c.name, "criterion_order": i, "negative": c.negative,
                         "tension": c.tension, "n": len(raw), "mean_raw": _mean(raw), "mean_score": m,
                         "mean_score_ci_low": m - half if half is not None else None,
                         "mean_score_ci_high": m + half if half is not None else None})
    ref_of = {(r["rubric_config_id"], r["criterion"]): r["mean_score"] for r in rows if r["set_key"] == ref}
    for r in rows:
        base = ref_of.get((r["rubric_config_id"], r["criterion"]))
        r["reference_set_key"] = ref if base is not None else None
        r["delta_vs_reference"] = r["mean_score"] - base if base is not None and r["mean_score"] is not None else None
    return pl.DataFrame(rows, schema=RUBRIC_CRITERIA_SCHEMA)
