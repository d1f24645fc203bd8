-- 100-Endings upstream tables (stories -> positions -> predictions -> verdicts).
-- Every table is partitioned by set_key ("human:<corpus>" or "gen:<model>:<pipeline>") and
-- written with Warehouse.replace_partition; verdicts also by judge_config_id, so the verdicts of
-- older judge configurations stay. Derived tables (endings_no_rate, ...) are built elsewhere.

-- One row per story file or generated story, measured or not (see included / exclusion_reason).
CREATE TABLE IF NOT EXISTS endings_stories (
    story_id             VARCHAR,   -- "human:<corpus>/<file stem>" or "<set_key>/<idea_id>"
    set_key              VARCHAR,
    corpus               VARCHAR,   -- corpus name; the set key for generated sets
    quality_tier         VARCHAR,   -- from corpus.yaml / config; "generated" for generated sets
    generator_model      VARCHAR,   -- NULL for human stories
    pipeline             VARCHAR,   -- vanilla | beats | warmup_beats; NULL for human stories
    title                VARCHAR,
    author               VARCHAR,
    source               VARCHAR,
    license              VARCHAR,
    file                 VARCHAR,   -- file name inside the corpus folder (human)
    n_words              INTEGER,   -- whitespace words
    text                 VARCHAR,   -- NULL when generation failed
    included             BOOLEAN,   -- measured by the forecasting pipeline
    exclusion_reason     VARCHAR,   -- why not (word range, demo cap, generation failure)
    same_model_judge     BOOLEAN,   -- the judge is the forecaster (allowed only by config)
    idea_id              VARCHAR,   -- generated: the story idea
    beats_json           VARCHAR,   -- generated: the beats the story was written from
    reference_beats_json VARCHAR,   -- warmup_beats: the 7 beats extracted from the reference
    reference_title      VARCHAR,   -- warmup_beats: the reference story
    reference_mode       VARCHAR,   -- warmup_beats: title | full_text
    steps_json           VARCHAR,   -- generated: steps run (prompt id, call ids, ok)
    failure_json         VARCHAR    -- generated: the recorded failure, if any
);

-- One row per kept forecasting position of an included story.
CREATE TABLE IF NOT EXISTS endings_positions (
    story_id          VARCHAR,
    set_key           VARCHAR,
    position          INTEGER,   -- 0-based order among kept positions (after the stride)
    sentence_index    INTEGER,   -- 1-based index of the last revealed sentence
    revealed_share    DOUBLE,    -- tokens(sentences 1..i) / tokens(story), forecaster's tokenizer
    n_tokens_revealed INTEGER,
    n_tokens_total    INTEGER,
    last_sentence     VARCHAR,
    n_sentences       INTEGER,
    forecaster_model  VARCHAR,
    tokenizer         VARCHAR
);

-- K rows per position: one predicted ending each (NULL + failure_json when the request failed).
CREATE TABLE IF NOT EXISTS endings_predictions (
    story_id          VARCHAR,
    set_key           VARCHAR,
    position          INTEGER,
    sample_index      INTEGER,
    prediction        VARCHAR,
    forecaster_model  VARCHAR,
    llm_call_id       VARCHAR,   -- llm_calls.call_id of the (last) attempt
    failure_json      VARCHAR
);

-- One row per prediction and judge configuration.
CREATE TABLE IF NOT EXISTS endings_verdicts (
    story_id          VARCHAR,
    set_key           VARCHAR,
    position          INTEGER,
    sample_index      INTEGER,
    judge_config_id   VARCHAR,   -- JudgeConfig.judge_id("endings.judge")
    judge_model       VARCHAR,
    verdict_raw       VARCHAR,   -- the judge's answer as given
    verdict           VARCHAR,   -- 'Y' | 'N' (first non-space char rule); NULL when failed
    choice_fallback   BOOLEAN,   -- answer outside the closed choice, rule applied to the raw text
    same_model_judge  BOOLEAN,
    llm_call_id       VARCHAR,
    failure_json      VARCHAR
);

-- Later columns (ALTER ... IF NOT EXISTS keeps warehouses built before them usable).
-- metadata_json: optional metadata columns of a JSONL/CSV corpus record.
ALTER TABLE endings_stories ADD COLUMN IF NOT EXISTS metadata_json VARCHAR;
-- repeat: index of the forecast+judge repeat (endings.repeats; 0 is the main run). Repeats use
-- different seeds and never overwrite each other: (set_key, story_id, position, sample_index, repeat).
ALTER TABLE endings_predictions ADD COLUMN IF NOT EXISTS "repeat" INTEGER DEFAULT 0;
ALTER TABLE endings_verdicts ADD COLUMN IF NOT EXISTS "repeat" INTEGER DEFAULT 0;
-- sample_error: one sample of an answered forecast request was empty or malformed (its kind, e.g.
-- empty_output); the row keeps the text as given and its verdict is N (the paper's rule), no judge call.
ALTER TABLE endings_predictions ADD COLUMN IF NOT EXISTS sample_error VARCHAR;

-- One rubric judgement of one story (EQ-Bench-style criteria, wse_platform/endings/rubric.yaml):
-- per-criterion scores as JSON and the 0-100 overall score (negative criteria inverted).
CREATE TABLE IF NOT EXISTS endings_rubric_scores (
    story_id          VARCHAR,
    set_key           VARCHAR,
    rubric_config_id  VARCHAR,   -- endings.rubric:<model>:<prompt version>:<rubric file hash>
    rubric_model      VARCHAR,
    n_words           INTEGER,
    in_length_band    BOOLEAN,   -- inside endings.rubric.min_words..max_words (length control)
    scores_json       VARCHAR,   -- {criterion: raw score}
    overall           DOUBLE,    -- mean over criteria on 0-100, negative criteria inverted
    tension8          DOUBLE,    -- the same over the tension-related criteria only
    llm_call_id       VARCHAR,
    failure_json      VARCHAR
);
