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
    R                            DOUBLE,    -- mean over trajectories with L_i >= 1 of the median judge R
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
-- model = Table 8 (per model), base_conditional = Table 9 (WMEM / WMOD effect within base_level).
CREATE TABLE IF NOT EXISTS wse_architecture_contrasts (
    scope                        VARCHAR,   -- group | model | base_conditional
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
-- (dracor-itp, dracor-smallville; C_* hold the differences) | leave_one_play_out (point estimates).
CREATE TABLE IF NOT EXISTS wse_source_family (
    row_kind                     VARCHAR,
    source_family                VARCHAR,
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
    n_draws                      BIGINT,
    bootstrap_seed               BIGINT,
    judge_config_id              VARCHAR
);

-- G_h, C_obs(h), C_adj(h) with trajectories truncated at h (5, 10, 15, 20 up to H, and H itself).
CREATE TABLE IF NOT EXISTS wse_horizon_sensitivity (
    scope                        VARCHAR,   -- all | model
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
    table_kind                   VARCHAR,   -- category (Table 5) | commitment_source (Table 6)
    scope                        VARCHAR,   -- all | model
    model                        VARCHAR,
    label                        VARCHAR,   -- category or no_majority_category | initial_world, opening, earlier_narrative, current_narrative, unresolved
    n                            BIGINT,
    pct                          DOUBLE,
    median_step                  DOUBLE,
    judge_config_id              VARCHAR
);

-- Paper Table 3: failure rates over trajectories where the component is enabled.
CREATE TABLE IF NOT EXISTS wse_generation_failures (
    scope                        VARCHAR,   -- all | model
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
