-- WSE-bench upstream tables: sources, trajectories, judge verdicts.
-- Partitioned tables are written with Warehouse.replace_partition by {model, arch}; judge
-- tables additionally by judge_config_id so older judge configurations' verdicts are kept.
-- Final tables (wse_cell_metrics, contrasts, pareto, ...) live in sql/wse_tables.sql.

-- One row per InitialWorld (9: 7 DraCor plays, Smallville, Bianjing-1100).
CREATE TABLE IF NOT EXISTS wse_initial_worlds (
    world_id       VARCHAR,
    title          VARCHAR,
    source_family  VARCHAR,   -- dracor | smallville | itp
    language       VARCHAR,   -- BCP-47
    n_characters   INTEGER,
    world_order    INTEGER,   -- fixed order of load_initial_worlds() (seed construction depends on it)
    world_json     VARCHAR    -- InitialWorld.model_dump_json()
);

-- One row per EpisodeSeed (42 at paper scale); shared by every model and architecture.
CREATE TABLE IF NOT EXISTS wse_episode_seeds (
    seed_id        VARCHAR,
    world_id       VARCHAR,
    source_family  VARCHAR,
    language       VARCHAR,
    player_id      VARCHAR,
    seed_order     INTEGER,   -- fixed family-interleaved order; the demo uses a balanced prefix
    seed_json      VARCHAR    -- EpisodeSeed.model_dump_json()
);

-- One row per attempted step of a trajectory (model x arch x seed x step).
CREATE TABLE IF NOT EXISTS wse_trajectory_steps (
    model               VARCHAR,
    arch                VARCHAR,
    seed_id             VARCHAR,
    world_id            VARCHAR,
    source_family       VARCHAR,
    step                INTEGER,   -- 1-based
    player_option       VARCHAR,   -- P_t (text of the chosen option)
    player_option_index INTEGER,   -- 0..2, from the seed's choice schedule
    intents_json        VARCHAR,   -- [{character_id, intent}] (B2/B3)
    plan_json           VARCHAR,   -- PlotPlan (WMOD)
    narrative           VARCHAR,   -- N_t; NULL when the step failed before narration
    options_json        VARCHAR,   -- the 3 options for step t+1
    new_day             BOOLEAN,
    story_end           BOOLEAN,
    end_kind            VARCHAR,   -- death | permanent_incapacity | closed_story
    memory_delta_json   VARCHAR,   -- MemoryDelta (WMEM)
    memory_state_json   VARCHAR,   -- M_{t+1} after the reducer (WMEM, when applied)
    failure_component   VARCHAR,   -- centralized_ca | distributed_ca | world_model | story_agent | world_memory_agent
    failure_json        VARCHAR,   -- StepFailure (error kind, message, raw text, attempts, actor)
    llm_call_ids        VARCHAR[], -- llm_calls.call_id of every attempt made for this step
    generation_version  VARCHAR
);

-- One row per trajectory (model x arch x seed).
CREATE TABLE IF NOT EXISTS wse_trajectories (
    model              VARCHAR,
    arch               VARCHAR,
    seed_id            VARCHAR,
    world_id           VARCHAR,
    source_family      VARCHAR,
    horizon            INTEGER,   -- H
    length             INTEGER,   -- L_i: number of steps with a valid narrative
    failure_component  VARCHAR,   -- NULL when no component failed
    failure_step       INTEGER,
    end_kind           VARCHAR,   -- accepted story ending (not a failure)
    end_step           INTEGER,
    day_advances       INTEGER,   -- number of new_day flags on canon steps
    lost_steps_wmem    INTEGER,   -- H - failure_step when a WMEM failure ended the run, else 0
    generation_version VARCHAR
);

-- One row per (trajectory, judged step, judge index).
CREATE TABLE IF NOT EXISTS wse_consistency_verdicts (
    judge_config_id    VARCHAR,
    model              VARCHAR,
    arch               VARCHAR,
    seed_id            VARCHAR,
    step               INTEGER,
    judge_index        INTEGER,
    judge_member       VARCHAR,   -- panel member that voted (label, default "<index>:<model>")
    judge_model        VARCHAR,   -- that member's configured model
    verdict            VARCHAR,   -- consistent | inconsistent | uncertain; NULL if the judge failed
    category           VARCHAR,   -- inconsistent votes only (temporal, world-fact, ...)
    prior_fact         VARCHAR,
    prior_source       VARCHAR,   -- initial_world | opening | narrative
    prior_step         INTEGER,   -- k when prior_source = narrative
    conflicting_claim  VARCHAR,
    exclusion_reason   VARCHAR,
    missing_transition VARCHAR,
    failure_json       VARCHAR,   -- LLMFailure when the judge's output stayed invalid
    vote_json          VARCHAR,   -- the judge's full validated output
    llm_call_ids       VARCHAR[],
    generation_version VARCHAR    -- of the judged trajectory
);

-- One row per judged (trajectory, step): the aggregated majority.
CREATE TABLE IF NOT EXISTS wse_consistency_steps (
    judge_config_id       VARCHAR,
    model                 VARCHAR,
    arch                  VARCHAR,
    seed_id               VARCHAR,
    step                  INTEGER,
    n_valid_votes         INTEGER,  -- judges with a valid verdict (uncertain included)
    n_consistent          INTEGER,
    n_inconsistent        INTEGER,
    n_uncertain           INTEGER,
    majority              VARCHAR,  -- consistent | inconsistent | NULL (no valid majority)
    category_majority     VARCHAR,  -- category given by >= 2 inconsistent votes, else NULL
    prior_source_majority VARCHAR,  -- initial_world | opening | earlier_narrative | current_narrative | NULL
    no_verdict_reason     VARCHAR   -- missing_judge (a member's output stayed invalid) | no_majority | NULL
);

-- One row per trajectory: first contradiction and censoring.
CREATE TABLE IF NOT EXISTS wse_trajectory_consistency (
    judge_config_id     VARCHAR,
    model               VARCHAR,
    arch                VARCHAR,
    seed_id             VARCHAR,
    length              INTEGER,  -- L_i
    first_contradiction INTEGER,  -- T_inc; NULL = none observed
    censored_at         INTEGER,  -- last step with a binary verdict before a no-majority step; NULL = not censored
    censor_reason       VARCHAR,  -- 'missing_judge' | 'no_majority' | NULL
    judged_steps        INTEGER,  -- steps judged before stopping
    generation_version  VARCHAR
);

-- One row per (trajectory with L >= 1, judge index).
CREATE TABLE IF NOT EXISTS wse_richness_verdicts (
    judge_config_id         VARCHAR,
    model                   VARCHAR,
    arch                    VARCHAR,
    seed_id                 VARCHAR,
    judge_index             INTEGER,
    judge_member            VARCHAR,  -- panel member that rated
    judge_model             VARCHAR,
    units_json              VARCHAR,  -- [{step, kind, repetitive, evidence, description, evidence_found}]
    n_units_non_repetitive  INTEGER,
    observed_steps          INTEGER,  -- L_i
    rating_event_diversity  INTEGER,  -- 1..5
    rating_character_change INTEGER,  -- 1..5
    rating_world_expansion  INTEGER,  -- 1..5
    failure_json            VARCHAR,  -- NULL unless the judge's output stayed invalid (ratings NULL then)
    llm_call_ids            VARCHAR[],
    generation_version      VARCHAR
);

-- Warehouses created before judge panels: add the panel-member columns (idempotent).
ALTER TABLE wse_consistency_verdicts ADD COLUMN IF NOT EXISTS judge_member VARCHAR;
ALTER TABLE wse_consistency_verdicts ADD COLUMN IF NOT EXISTS judge_model VARCHAR;
ALTER TABLE wse_consistency_steps ADD COLUMN IF NOT EXISTS no_verdict_reason VARCHAR;
ALTER TABLE wse_richness_verdicts ADD COLUMN IF NOT EXISTS judge_member VARCHAR;
ALTER TABLE wse_richness_verdicts ADD COLUMN IF NOT EXISTS judge_model VARCHAR;
