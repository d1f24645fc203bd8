-- 100-Endings result tables, built from endings_verdicts / endings_positions / endings_stories
-- by wse_platform.endings.tables (assets/endings/tables.py). Every statement is idempotent.
-- Columns must match the *_SCHEMA dicts in wse_platform/endings/tables.py (checked by tests).

-- One row per story position and judge configuration: K judged endings -> no-rate.
-- no_rate = 1 - n_yes / n_valid over parsed verdicts; failed judgements are counted in
-- n_failed and left out (NULL no_rate when every verdict of the position failed).
CREATE TABLE IF NOT EXISTS endings_no_rate (
    story_id                       VARCHAR,
    set_key                        VARCHAR,
    judge_config_id                VARCHAR,
    position                       BIGINT,
    sentence_index                 BIGINT,
    revealed_share                 DOUBLE,
    n_samples                      BIGINT,
    n_valid                        BIGINT,
    n_yes                          BIGINT,
    n_failed                       BIGINT,
    no_rate                        DOUBLE
);

-- One row per included story and judge configuration: tension metrics of its no-rate curve
-- (wse_platform.metrics.endings.story_tension). late_no_rate: NULL without a position at >= 80 %;
-- retention/convergence: NULL without a strict peak; convergence in percent; irXX = share of
-- kept positions that are smoothed peaks/valleys with vertex angle <= XX degrees.
CREATE TABLE IF NOT EXISTS endings_story_tension (
    story_id                       VARCHAR,
    set_key                        VARCHAR,
    set_kind                       VARCHAR,
    judge_config_id                VARCHAR,
    corpus                         VARCHAR,
    quality_tier                   VARCHAR,
    generator_model                VARCHAR,
    pipeline                       VARCHAR,
    n_words                        BIGINT,
    same_model_judge               BOOLEAN,
    n_positions                    BIGINT,
    n_positions_failed             BIGINT,
    n_peaks                        BIGINT,
    n_extrema                      BIGINT,
    mean_no_rate                   DOUBLE,
    late_no_rate                   DOUBLE,
    retention                      DOUBLE,
    convergence                    DOUBLE,
    ir30                           DOUBLE,
    ir60                           DOUBLE,
    ir120                          DOUBLE
);

-- Paper Table 6: one row per corpus / generated set (set_key) and judge configuration.
-- n = stories with a curve; each metric: mean over stories, 95 % CI mean +- 1.96*sd/sqrt(n)
-- (sd with ddof=1; NULL CI when n = 1), and <metric>_n stories defining it.
CREATE TABLE IF NOT EXISTS endings_corpus_tension (
    set_key                        VARCHAR,
    set_kind                       VARCHAR,
    judge_config_id                VARCHAR,
    corpus                         VARCHAR,
    quality_tier                   VARCHAR,
    generator_model                VARCHAR,
    pipeline                       VARCHAR,
    same_model_judge               BOOLEAN,
    n                              BIGINT,
    mean_no_rate                   DOUBLE,
    mean_no_rate_ci_low            DOUBLE,
    mean_no_rate_ci_high           DOUBLE,
    mean_no_rate_n                 BIGINT,
    late_no_rate                   DOUBLE,
    late_no_rate_ci_low            DOUBLE,
    late_no_rate_ci_high           DOUBLE,
    late_no_rate_n                 BIGINT,
    retention                      DOUBLE,
    retention_ci_low               DOUBLE,
    retention_ci_high              DOUBLE,
    retention_n                    BIGINT,
    convergence                    DOUBLE,
    convergence_ci_low             DOUBLE,
    convergence_ci_high            DOUBLE,
    convergence_n                  BIGINT,
    ir30                           DOUBLE,
    ir30_ci_low                    DOUBLE,
    ir30_ci_high                   DOUBLE,
    ir30_n                         BIGINT,
    ir60                           DOUBLE,
    ir60_ci_low                    DOUBLE,
    ir60_ci_high                   DOUBLE,
    ir60_n                         BIGINT,
    ir120                          DOUBLE,
    ir120_ci_low                   DOUBLE,
    ir120_ci_high                  DOUBLE,
    ir120_n                        BIGINT
);

-- Paper Table 2: generated stories per generator model x pipeline and judge configuration
-- (same metric columns as endings_corpus_tension) and the mean no-rate difference from vanilla.
CREATE TABLE IF NOT EXISTS endings_pipeline_effect (
    generator_model                VARCHAR,
    pipeline                       VARCHAR,
    judge_config_id                VARCHAR,
    same_model_judge               BOOLEAN,
    n                              BIGINT,
    mean_no_rate                   DOUBLE,
    mean_no_rate_ci_low            DOUBLE,
    mean_no_rate_ci_high           DOUBLE,
    mean_no_rate_n                 BIGINT,
    late_no_rate                   DOUBLE,
    late_no_rate_ci_low            DOUBLE,
    late_no_rate_ci_high           DOUBLE,
    late_no_rate_n                 BIGINT,
    retention                      DOUBLE,
    retention_ci_low               DOUBLE,
    retention_ci_high              DOUBLE,
    retention_n                    BIGINT,
    convergence                    DOUBLE,
    convergence_ci_low             DOUBLE,
    convergence_ci_high            DOUBLE,
    convergence_n                  BIGINT,
    ir30                           DOUBLE,
    ir30_ci_low                    DOUBLE,
    ir30_ci_high                   DOUBLE,
    ir30_n                         BIGINT,
    ir60                           DOUBLE,
    ir60_ci_low                    DOUBLE,
    ir60_ci_high                   DOUBLE,
    ir60_n                         BIGINT,
    ir120                          DOUBLE,
    ir120_ci_low                   DOUBLE,
    ir120_ci_high                  DOUBLE,
    ir120_n                        BIGINT,
    delta_mean_no_rate_vs_vanilla  DOUBLE
);

-- Paper Table 9 (length invariance): story mean no-rate by word-count bucket [min_words, max_words)
-- (<1k, 1-2k, 2-3k, 3-5k, >=5k), human and generated sets separately: n, mean with 95 % CI, median.
CREATE TABLE IF NOT EXISTS endings_length_buckets (
    set_kind                       VARCHAR,
    judge_config_id                VARCHAR,
    bucket                         VARCHAR,
    bucket_order                   BIGINT,
    min_words                      BIGINT,
    max_words                      BIGINT,
    same_model_judge               BOOLEAN,
    n                              BIGINT,
    mean_no_rate                   DOUBLE,
    mean_no_rate_ci_low            DOUBLE,
    mean_no_rate_ci_high           DOUBLE,
    median_no_rate                 DOUBLE
);

-- Later columns (ALTER ... IF NOT EXISTS keeps warehouses built before them usable).
ALTER TABLE endings_no_rate ADD COLUMN IF NOT EXISTS "repeat" BIGINT DEFAULT 0;
ALTER TABLE endings_story_tension ADD COLUMN IF NOT EXISTS "repeat" BIGINT DEFAULT 0;
ALTER TABLE endings_corpus_tension ADD COLUMN IF NOT EXISTS retention_median DOUBLE;   -- Fig. 10
-- Table 9 per corpus / generated set (set_kind kept); buckets <2k, 2-3k, 3-4k, 4-5k (>=5k if widened)
ALTER TABLE endings_length_buckets ADD COLUMN IF NOT EXISTS set_key VARCHAR;
ALTER TABLE endings_length_buckets ADD COLUMN IF NOT EXISTS corpus VARCHAR;
-- Table 2: row_kind 'pipeline' | 'reference' (top human corpus, pooled vanilla), rubric score, and
-- every metric's difference from the same generator's vanilla pipeline.
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS row_kind VARCHAR;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS label VARCHAR;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS rubric_overall DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS rubric_n BIGINT;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_rubric_overall_vs_vanilla DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_late_no_rate_vs_vanilla DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_retention_vs_vanilla DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_convergence_vs_vanilla DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_ir30_vs_vanilla DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_ir60_vs_vanilla DOUBLE;
ALTER TABLE endings_pipeline_effect ADD COLUMN IF NOT EXISTS delta_ir120_vs_vanilla DOUBLE;

-- Paper Table 7: per set x judge configuration, one row per repeat and a summary row (mean, std).
CREATE TABLE IF NOT EXISTS endings_stability (
    set_key VARCHAR, judge_config_id VARCHAR, "repeat" BIGINT, row_kind VARCHAR, n_repeats BIGINT, n BIGINT,
    mean_no_rate DOUBLE, mean_no_rate_std DOUBLE, late_no_rate DOUBLE, late_no_rate_std DOUBLE,
    ir60 DOUBLE, ir60_std DOUBLE, retention DOUBLE, retention_std DOUBLE
);

-- Paper Table 3: per corpus / generated set: stories, kept, mean words (kept), positions, exclusions.
CREATE TABLE IF NOT EXISTS endings_corpus_summary (
    set_key VARCHAR, set_kind VARCHAR, corpus VARCHAR, quality_tier VARCHAR, n_stories BIGINT, n_kept BIGINT,
    mean_words_kept DOUBLE, n_positions BIGINT, exclusions_json VARCHAR
);

-- Rubric vs tension: scope 'set' | 'pipeline' | 'all'; Spearman of rubric overall vs mean no-rate.
CREATE TABLE IF NOT EXISTS endings_rubric_contrasts (
    scope VARCHAR, "group" VARCHAR, judge_config_id VARCHAR, rubric_config_id VARCHAR, n BIGINT,
    rubric_overall DOUBLE, rubric_tension8 DOUBLE, mean_no_rate DOUBLE, late_no_rate DOUBLE,
    spearman_rubric_vs_mean_no_rate DOUBLE
);

-- ±95 % CI half-widths (1.96·s/√n over stories) of the contrast's means (paper Table 4).
ALTER TABLE endings_rubric_contrasts ADD COLUMN IF NOT EXISTS rubric_overall_ci95 DOUBLE;
ALTER TABLE endings_rubric_contrasts ADD COLUMN IF NOT EXISTS rubric_tension8_ci95 DOUBLE;
ALTER TABLE endings_rubric_contrasts ADD COLUMN IF NOT EXISTS mean_no_rate_ci95 DOUBLE;
ALTER TABLE endings_rubric_contrasts ADD COLUMN IF NOT EXISTS late_no_rate_ci95 DOUBLE;

-- Table 3's "EQ-Bench n": kept stories inside the rubric's length band, and how many were scored
-- (NULL when the rubric judge is off or has not scored the set).
ALTER TABLE endings_corpus_summary ADD COLUMN IF NOT EXISTS n_rubric_band BIGINT;
ALTER TABLE endings_corpus_summary ADD COLUMN IF NOT EXISTS n_rubric_scored BIGINT;

-- Paper Fig. 7: per set x rubric criterion, mean raw score and 0-100 score (faults inverted, 95 % CI)
-- and its difference from the same criterion in the top human corpus by mean no-rate.
CREATE TABLE IF NOT EXISTS endings_rubric_criteria (
    set_key VARCHAR, set_kind VARCHAR, rubric_config_id VARCHAR, criterion VARCHAR, criterion_name VARCHAR,
    criterion_order BIGINT, negative BOOLEAN, tension BOOLEAN, n BIGINT, mean_raw DOUBLE, mean_score DOUBLE,
    mean_score_ci_low DOUBLE, mean_score_ci_high DOUBLE, reference_set_key VARCHAR, delta_vs_reference DOUBLE
);
