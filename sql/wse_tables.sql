-- WSE-bench final tables (built by assets/wse/tables.py from wse_platform/wse/tables.py; whole-table
-- replacements). Columns must match wse_platform.wse.tables.FINAL_COLUMNS (checked by tests/wse/test_tables.py).
-- Metric definitions: wse_platform/metrics/wse.py. Percent scales (0..100) throughout.

-- Table 1 of the final tables: one row per model x architecture (current judge configurations).
CREATE TABLE IF NOT EXISTS wse_cell_metrics (
    model                        VARCHAR,
    arch                         VARCHAR,
    judge_config_id              VARCHAR,   -- consistency judge configuration used
    richness_judge_config_id     VARCHAR,
    horizon                      BIGINT,    -- H
    n                            BIGINT,    -- trajectories (EpisodeSeeds)
    n_with_narrative             BIGINT,    -- trajectories with L_i >= 1
    G                            DOUBLE,    -- generation coverage
    C_obs                        DOUBLE,    -- KM consistency, last estimable value carried forward; NULL if no step observed
    C_adj                        DOUBLE,    -- KM consistency credited only where trajectories are at risk
    R                            DOUBLE,    -- Σ L_i·R_i / Σ L_i over trajectories with L_i >= 1 (R_i: median judge R; App. B.6)
    R_unweighted                 DOUBLE,    -- the plain mean of R_i over the same trajectories
    n_richness                   BIGINT,    -- trajectories contributing to R
    n_richness_judge_failures    BIGINT,    -- richness judge outputs that stayed invalid
    n_contradictions             BIGINT,    -- observed first contradictions
    n_censored_no_majority       BIGINT,    -- trajectories censored by a step without a valid majority
    n_failures                   BIGINT,
    fail_centralized_ca          BIGINT,
    fail_distributed_ca          BIGINT,
    fail_world_model             BIGINT,
    fail_story_agent             BIGINT,
    fail_world_memory_agent      BIGINT,
    n_story_endings              BIGINT,    -- accepted endings (not failures)
    end_death                    BIGINT,
    end_permanent_incapacity     BIGINT,
    end_closed_story             BIGINT
);

-- Architecture contrasts with 95 % hierarchical bootstrap intervals (worlds, then seeds within worlds;
-- models fixed). scope: group = paper Table 1 (per model group, models weighted equally),
-- model = Table 8 (per model), base_conditional = WMEM / WMOD effect within base_level per group,
-- model_base_conditional = Table 9 (the same per model).
CREATE TABLE IF NOT EXISTS wse_architecture_contrasts (
    scope                        VARCHAR,   -- group | model | base_conditional | model_base_conditional
    model_group                  VARCHAR,
    model                        VARCHAR,
    base_level                   VARCHAR,   -- B1 | B2 | B3 (base_conditional only)
    contrast                     VARCHAR,   -- B2-B1 | B3-B1 | B3-B2 | WMEM on-off | WMOD on-off
    n_models                     BIGINT,
    n_pairs                      BIGINT,    -- architecture pairs averaged per model
    n_seeds                      BIGINT,
    n_worlds                     BIGINT,
    delta_G                      DOUBLE,
    delta_G_lo                   DOUBLE,
    delta_G_hi                   DOUBLE,
    delta_C_obs                  DOUBLE,
    delta_C_obs_lo               DOUBLE,
    delta_C_obs_hi               DOUBLE,
    delta_C_adj                  DOUBLE,
    delta_C_adj_lo               DOUBLE,
    delta_C_adj_hi               DOUBLE,
    delta_R                      DOUBLE,
    delta_R_lo                   DOUBLE,
    delta_R_hi                   DOUBLE,
    n_draws                      BIGINT,
    n_draws_valid                BIGINT,    -- draws where every metric's contrast was defined
    bootstrap_seed               BIGINT,
    judge_config_id              VARCHAR,
    richness_judge_config_id     VARCHAR
);

-- Pareto status of every cell on (C_adj, R) and on (C_obs, R).
CREATE TABLE IF NOT EXISTS wse_pareto (
    panel                        VARCHAR,   -- pooled (all cells) | a model group (cells of its models only)
    consistency_axis             VARCHAR,   -- C_adj | C_obs
    model                        VARCHAR,
    arch                         VARCHAR,
    consistency                  DOUBLE,
    R                            DOUBLE,
    non_dominated                BOOLEAN,
    supported                    BOOLEAN,   -- on the upper concave envelope (maximises a positive weighting)
    gap_below_chord              DOUBLE     -- R below the chord of the neighbouring supported cells; 0 if supported, NULL if dominated
);

-- Y = alpha + beta * log2(params_b) per dense family (>= 3 models), on model means over architectures.
CREATE TABLE IF NOT EXISTS wse_scaling_fit (
    family                       VARCHAR,
    metric                       VARCHAR,   -- G | C_obs | R
    fit                          VARCHAR,   -- all | leave_one_out
    dropped_model                VARCHAR,
    alpha                        DOUBLE,
    beta                         DOUBLE,    -- change per doubling of the parameter count
    r2                           DOUBLE,
    n                            BIGINT,
    models                       VARCHAR    -- comma-separated models in the fit
);

-- Paper Table 7. row_kind: family (bootstrap CIs, worlds resampled within family) | contrast
-- (dracor-itp, dracor-smallville; C_* hold the differences) | leave_one_play_out (point estimates) |
-- model_family (the paper's way: one KM per model pooled over its architectures, with CIs) |
-- family_pooled (equal-model mean of the model_family values, with CIs).
CREATE TABLE IF NOT EXISTS wse_source_family (
    row_kind                     VARCHAR,
    source_family                VARCHAR,
    model                        VARCHAR,   -- model_family rows
    contrast                     VARCHAR,
    dropped_world                VARCHAR,
    n_worlds                     BIGINT,
    C_obs                        DOUBLE,
    C_obs_lo                     DOUBLE,
    C_obs_hi                     DOUBLE,
    C_adj                        DOUBLE,
    C_adj_lo                     DOUBLE,
    C_adj_hi                     DOUBLE,
    n_trajectories               BIGINT,
    observed_steps               BIGINT,    -- sum of L_i
    mean_length                  DOUBLE,
    day_advance_pct              DOUBLE,    -- day advances per observed step, %
    full_horizon_pct             DOUBLE,    -- trajectories with L_i = H, %
    first_contradiction_median   DOUBLE,    -- median step of observed first contradictions
    mean_first_contradiction_step DOUBLE,   -- model_family: mean step; family_pooled: equal-model mean
    relative_day_at_contradiction DOUBLE,   -- mean day index (from day 0, by new_day flags) at the first contradiction
    n_draws                      BIGINT,
    bootstrap_seed               BIGINT,
    judge_config_id              VARCHAR
);

-- G_h, C_obs(h), C_adj(h) with trajectories truncated at h (5, 10, 15, 20 up to H, and H itself).
CREATE TABLE IF NOT EXISTS wse_horizon_sensitivity (
    scope                        VARCHAR,   -- all | group (model group = the paper's panel) | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    h                            BIGINT,
    G_h                          DOUBLE,
    C_obs_h                      DOUBLE,
    C_adj_h                      DOUBLE,
    n_cells                      BIGINT,
    share_by_step10              DOUBLE,    -- share of observed first contradictions (by H) at step <= 10
    n_first_contradictions       BIGINT,
    horizon                      BIGINT,
    judge_config_id              VARCHAR
);

-- Paper Tables 5 and 6 at the first contradiction of each trajectory.
CREATE TABLE IF NOT EXISTS wse_first_violations (
    table_kind                   VARCHAR,   -- category (Table 5) | commitment_source (Table 6) | category_x_source (Table 6 cross-tab)
    scope                        VARCHAR,   -- all | group (a model group = the paper's panel) | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    label                        VARCHAR,   -- category or no_majority_category | initial_world, opening, earlier_narrative, current_narrative, unresolved
    source                       VARCHAR,   -- category_x_source only: the commitment source
    n                            BIGINT,
    pct                          DOUBLE,
    median_step                  DOUBLE,
    judge_config_id              VARCHAR
);

-- Paper Table 3: failure rates over trajectories where the component is enabled.
CREATE TABLE IF NOT EXISTS wse_generation_failures (
    scope                        VARCHAR,   -- all | group (model group = the paper's panel) | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    component                    VARCHAR,   -- centralized_ca | distributed_ca | world_model | story_agent | world_memory_agent | any
    n_enabled                    BIGINT,
    n_failures                   BIGINT,
    failure_rate_pct             DOUBLE,
    median_failure_step          DOUBLE,
    lost_steps_wmem              BIGINT,    -- world_memory_agent only: narrative steps lost after WMEM failures
    lost_steps_pct               DOUBLE,    -- of n_enabled * H
    horizon                      BIGINT
);

-- Failures per role and error kind. source: outputs (recorded as failures after all retries; by the
-- evaluated model of the cell) | attempts (invalid attempts in llm_calls; by the calling model).
CREATE TABLE IF NOT EXISTS wse_failure_kinds (
    source                       VARCHAR,   -- outputs | attempts
    scope                        VARCHAR,   -- all | group | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    role                         VARCHAR,   -- wse.story_agent, wse.consistency_judge, ...
    error_kind                   VARCHAR,   -- invalid_json | schema_violation | truncated | backend_error | ...
    n                            BIGINT,
    n_length_cut                 BIGINT     -- attempts only: finish_reason = length (cut by the token budget)
);

-- Inter-judge agreement of each consistency panel on steps where every member gave a valid verdict.
CREATE TABLE IF NOT EXISTS wse_judge_agreement (
    judge_config_id              VARCHAR,
    model_group                  VARCHAR,   -- NULL = all evaluated models
    kind                         VARCHAR,   -- panel | pairwise
    member_a                     VARCHAR,   -- pairwise only
    member_b                     VARCHAR,
    n_members                    BIGINT,
    n_steps                      BIGINT,    -- steps with a complete panel
    n_steps_incomplete           BIGINT,    -- steps with a missing member (left out)
    fleiss_kappa                 DOUBLE,    -- panel only
    cohen_kappa                  DOUBLE,    -- pairwise only
    agreement_pct                DOUBLE,    -- pairwise only
    unanimous_pct                DOUBLE,    -- panel only: steps where every member voted the same
    consistent_pct               DOUBLE,    -- panel only: share of votes
    inconsistent_pct             DOUBLE,
    uncertain_pct                DOUBLE
);

-- Inter-judge agreement of each richness panel on trajectories where every member rated validly.
CREATE TABLE IF NOT EXISTS wse_richness_agreement (
    judge_config_id              VARCHAR,
    model_group                  VARCHAR,   -- NULL = all evaluated models
    kind                         VARCHAR,   -- panel | pairwise
    quantity                     VARCHAR,   -- event_diversity | character_change | world_expansion | units_per_step | R
    member_a                     VARCHAR,   -- pairwise only
    member_b                     VARCHAR,
    n_members                    BIGINT,
    n_trajectories               BIGINT,    -- trajectories with a complete panel
    n_trajectories_incomplete    BIGINT,    -- trajectories with a failed member (left out)
    exact_pct                    DOUBLE,    -- pairwise, ratings: same rating
    within_one_pct               DOUBLE,    -- ratings: pair (or all members) within one point
    qwk                          DOUBLE,    -- ratings: quadratic-weighted kappa (panel: mean over pairs)
    fleiss_kappa                 DOUBLE,    -- panel, ratings: over the 5 rating categories (nominal)
    unanimous_pct                DOUBLE,    -- panel, ratings: every member gave the same rating
    icc                          DOUBLE,    -- panel: ICC(2,1), absolute agreement, single rater
    mae                          DOUBLE,    -- pairwise: mean absolute difference
    pearson_r                    DOUBLE     -- pairwise
);

-- Paper Table 3 lower half: possible precursors of each first contradiction (lexical matching).
CREATE TABLE IF NOT EXISTS wse_precursor_audit (
    row_kind                     VARCHAR,   -- trajectory | summary
    scope                        VARCHAR,   -- summary: all | group | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    arch                         VARCHAR,   -- trajectory rows
    seed_id                      VARCHAR,
    first_contradiction          BIGINT,
    origin                       VARCHAR,   -- player_intent | character_agent | world_model | memory | none | not_localized | plurality_tie
    origin_step                  BIGINT,    -- first step at which the origin component carried the content
    persisted                    BOOLEAN,   -- the origin component carried it at more than one step
    match_score                  DOUBLE,    -- share of the claim's content tokens found
    n_votes                      BIGINT,    -- inconsistent votes with a claim at that step
    n                            BIGINT,    -- summary: trajectories with this origin
    pct                          DOUBLE,
    n_persisted                  BIGINT,
    n_trajectories               BIGINT,
    judge_config_id              VARCHAR,
    ca_precursor                 BOOLEAN,   -- trajectory: a strong Character-Agent match in any vote (App. C)
    ca_through_world_model       BOOLEAN,   -- ... whose claim also matches the World Model plan then or later
    world_model_only             BOOLEAN    -- a World Model match and no Character-Agent match
);
ALTER TABLE wse_precursor_audit ADD COLUMN IF NOT EXISTS ca_precursor BOOLEAN;
ALTER TABLE wse_precursor_audit ADD COLUMN IF NOT EXISTS ca_through_world_model BOOLEAN;
ALTER TABLE wse_precursor_audit ADD COLUMN IF NOT EXISTS world_model_only BOOLEAN;

-- App. C.3: contrasts over seed-paired trajectories that both reach the horizon with valid scores.
CREATE TABLE IF NOT EXISTS wse_full_horizon_contrasts (
    scope                        VARCHAR,   -- group | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    contrast                     VARCHAR,
    n_models                     BIGINT,
    n_pairs                      BIGINT,
    delta_C                      DOUBLE,    -- % of steps before the first contradiction, paired difference
    delta_R                      DOUBLE,
    horizon                      BIGINT,
    judge_config_id              VARCHAR
);

-- Fig. 11: generation cost next to coverage (llm_calls, judge calls excluded; each request attempt once).
CREATE TABLE IF NOT EXISTS wse_cost_contrasts (
    row_kind                     VARCHAR,   -- cell | contrast
    scope                        VARCHAR,   -- cell | group | model
    model_group                  VARCHAR,
    model                        VARCHAR,
    arch                         VARCHAR,
    contrast                     VARCHAR,
    n_models                     BIGINT,
    n_pairs                      BIGINT,
    n_calls                      BIGINT,
    tokens_per_trajectory        DOUBLE,    -- tokens in + out
    cost_per_trajectory          DOUBLE,    -- USD when prices are configured
    tokens_per_step              DOUBLE,    -- per observed narrative step
    G                            DOUBLE,
    delta_tokens_per_trajectory  DOUBLE,
    delta_cost_per_trajectory    DOUBLE,
    delta_G                      DOUBLE,
    pct_tokens_per_trajectory    DOUBLE,    -- Fig. 11: within-model % change, mean over pairs then models
    pct_cost_per_trajectory      DOUBLE,
    pct_G                        DOUBLE
);
ALTER TABLE wse_cost_contrasts ADD COLUMN IF NOT EXISTS pct_tokens_per_trajectory DOUBLE;
ALTER TABLE wse_cost_contrasts ADD COLUMN IF NOT EXISTS pct_cost_per_trajectory DOUBLE;
ALTER TABLE wse_cost_contrasts ADD COLUMN IF NOT EXISTS pct_G DOUBLE;

-- App. B.5: agreement of the judge panels with human labels (wse.human_labels CSV files).
CREATE TABLE IF NOT EXISTS wse_human_validation (
    study                        VARCHAR,   -- consistency | richness
    statistic                    VARCHAR,   -- accuracy | balanced_accuracy | mae_R | pearson_r_R | bias_R | mae_R_judge_<m> | qwk_<dim> | within_one_pct_<dim> | one_vs_rest_<cat>
    value                        DOUBLE,
    n                            BIGINT,    -- labels matched to a panel verdict / score
    n_unmatched                  BIGINT,    -- labels without a binary panel verdict or richness score
    judge_config_id              VARCHAR,
    value_lo                     DOUBLE,    -- 95 % bootstrap interval (labels resampled)
    value_hi                     DOUBLE,
    labels                       VARCHAR    -- where the labels came from (the shipped example says so)
);
ALTER TABLE wse_human_validation ADD COLUMN IF NOT EXISTS value_lo DOUBLE;
ALTER TABLE wse_human_validation ADD COLUMN IF NOT EXISTS value_hi DOUBLE;
ALTER TABLE wse_human_validation ADD COLUMN IF NOT EXISTS labels VARCHAR;

-- Warehouses created before these columns (final tables are rebuilt whole; BY NAME inserts).
ALTER TABLE wse_cell_metrics ADD COLUMN IF NOT EXISTS R_unweighted DOUBLE;   -- R is step-weighted since issue 22
ALTER TABLE wse_pareto ADD COLUMN IF NOT EXISTS panel VARCHAR;
ALTER TABLE wse_source_family ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE wse_source_family ADD COLUMN IF NOT EXISTS mean_first_contradiction_step DOUBLE;
ALTER TABLE wse_source_family ADD COLUMN IF NOT EXISTS relative_day_at_contradiction DOUBLE;
ALTER TABLE wse_horizon_sensitivity ADD COLUMN IF NOT EXISTS model_group VARCHAR;
ALTER TABLE wse_first_violations ADD COLUMN IF NOT EXISTS model_group VARCHAR;
ALTER TABLE wse_first_violations ADD COLUMN IF NOT EXISTS source VARCHAR;
ALTER TABLE wse_generation_failures ADD COLUMN IF NOT EXISTS model_group VARCHAR;
