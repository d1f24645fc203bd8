-- NCP-Bench narrative specifications and their statistics. Every statement is idempotent.

-- One row per released spec that loaded without errors (eval_order = position in index.yaml).
CREATE TABLE IF NOT EXISTS ncp_specs (
    spec_id               VARCHAR PRIMARY KEY,  -- movieNN (= file stem = meta.id)
    eval_order            INTEGER,              -- fixed evaluation order from index.yaml
    title                 VARCHAR,              -- as released ("——" joins subtitles)
    display_title         VARCHAR,              -- "Title: Subtitle"
    genres                VARCHAR[],            -- [primary, secondary]
    primary_genre         VARCHAR,
    player_role           VARCHAR,
    n_facts               INTEGER,
    n_negated_facts       INTEGER,              -- facts that start inactive
    n_commitments         INTEGER,
    n_nodes               INTEGER,
    n_invariant           INTEGER,
    n_ordering            INTEGER,
    n_achievement         INTEGER,
    commitment_links_json VARCHAR,              -- {c_N: [s_M, ...]} derived from s_N mentions
    spec_json             VARCHAR,              -- the validated NarrativeSpec
    source_file           VARCHAR
);

-- Paper Table 6: one row per quantity (facts / commitments / trajectory_nodes).
CREATE TABLE IF NOT EXISTS ncp_spec_stats (
    quantity  VARCHAR PRIMARY KEY,
    n_specs   INTEGER,
    total     BIGINT,
    mean      DOUBLE,
    std       DOUBLE,    -- sample standard deviation (std_ddof = 1) reproduces the printed digits
    min       INTEGER,
    max       INTEGER,
    std_ddof  INTEGER
);

-- Commitment types by count and genre distributions.
CREATE TABLE IF NOT EXISTS ncp_spec_breakdown (
    dimension VARCHAR,   -- commitment_type | primary_genre | genre_any
    category  VARCHAR,
    n         BIGINT,
    share     DOUBLE,    -- of commitments (types) or of specs (genres)
    PRIMARY KEY (dimension, category)
);

-- Specs extracted from the synopses by one extraction model (one row per movie and model).
CREATE TABLE IF NOT EXISTS ncp_spec_extraction (
    extraction_model  VARCHAR,
    spec_id           VARCHAR,
    ok                BOOLEAN,   -- all three stages produced valid output and the spec validated
    failed_stage      VARCHAR,   -- trajectory | commitments | facts | assemble (NULL when ok)
    error_kind        VARCHAR,
    error_message     VARCHAR,
    n_facts           INTEGER,
    n_commitments     INTEGER,
    n_nodes           INTEGER,
    n_invariant       INTEGER,
    n_ordering        INTEGER,
    n_achievement     INTEGER,
    spec_json         VARCHAR,   -- the extracted NarrativeSpec (NULL on failure)
    prompt_versions   VARCHAR,   -- e.g. ncp.extract_trajectory@v1,...
    llm_call_ids      VARCHAR[],
    PRIMARY KEY (extraction_model, spec_id)
);

-- Extracted vs released spec: counts and commitment type mix per movie and model.
CREATE TABLE IF NOT EXISTS ncp_extraction_comparison (
    extraction_model       VARCHAR,
    spec_id                VARCHAR,
    ok                     BOOLEAN,
    quantity               VARCHAR,  -- facts | commitments | trajectory_nodes | invariant | ordering | achievement
    released               INTEGER,
    extracted              INTEGER,  -- NULL when the extraction failed
    diff                   INTEGER,  -- extracted - released
    released_share         DOUBLE,   -- type rows: share of the spec's commitments
    extracted_share        DOUBLE,
    PRIMARY KEY (extraction_model, spec_id, quantity)
);
