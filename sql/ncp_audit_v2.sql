-- NCP-Bench, loop version 2 (issue 10): columns added to the tables of ncp.sql, and the live
-- auditor ablation (paper Table 2). Idempotent: ADD COLUMN IF NOT EXISTS upgrades an older warehouse.

-- Words per response: the paper's limits (narration 150, player input 50) are prompt
-- instructions, reported here as statistics, never a validity criterion.
ALTER TABLE ncp_turns ADD COLUMN IF NOT EXISTS player_words INTEGER;
ALTER TABLE ncp_turns ADD COLUMN IF NOT EXISTS narrator_words INTEGER;
ALTER TABLE ncp_reaudit_turns ADD COLUMN IF NOT EXISTS player_words INTEGER;
ALTER TABLE ncp_reaudit_turns ADD COLUMN IF NOT EXISTS narrator_words INTEGER;

ALTER TABLE ncp_episodes ADD COLUMN IF NOT EXISTS narrator_responses INTEGER;   -- opening included
ALTER TABLE ncp_episodes ADD COLUMN IF NOT EXISTS narrator_words_mean DOUBLE;
ALTER TABLE ncp_episodes ADD COLUMN IF NOT EXISTS narrator_over_limit INTEGER;  -- responses > 150 words
ALTER TABLE ncp_episodes ADD COLUMN IF NOT EXISTS player_inputs INTEGER;
ALTER TABLE ncp_episodes ADD COLUMN IF NOT EXISTS player_words_mean DOUBLE;
ALTER TABLE ncp_episodes ADD COLUMN IF NOT EXISTS player_over_limit INTEGER;    -- inputs > 50 words
ALTER TABLE ncp_reaudit_episodes ADD COLUMN IF NOT EXISTS narrator_responses INTEGER;
ALTER TABLE ncp_reaudit_episodes ADD COLUMN IF NOT EXISTS narrator_words_mean DOUBLE;
ALTER TABLE ncp_reaudit_episodes ADD COLUMN IF NOT EXISTS narrator_over_limit INTEGER;
ALTER TABLE ncp_reaudit_episodes ADD COLUMN IF NOT EXISTS player_inputs INTEGER;
ALTER TABLE ncp_reaudit_episodes ADD COLUMN IF NOT EXISTS player_words_mean DOUBLE;
ALTER TABLE ncp_reaudit_episodes ADD COLUMN IF NOT EXISTS player_over_limit INTEGER;

-- Survival as the paper reports it: episodes still active at turn t with the reference's
-- `turns >= t` convention (raw_share_active = n_active / n_episodes), next to the KM estimate.
ALTER TABLE ncp_survival ADD COLUMN IF NOT EXISTS n_active INTEGER;

-- Table-1 style metrics: termination counts (the paper's Succ. counts), raw survival at turn 20
-- (0, not NULL, when every episode ended before turn 20) and words per response.
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS n_conflict INTEGER;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS n_success INTEGER;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS n_survival INTEGER;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS n_invalid INTEGER;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS n_censored INTEGER;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS n_active_at_20 INTEGER;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS share_active_at_20 DOUBLE;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS narrator_words_mean DOUBLE;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS narrator_over_limit_pct DOUBLE;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS player_words_mean DOUBLE;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS player_over_limit_pct DOUBLE;
-- ncp_auditor_sensitivity is the *re-audit* analysis (stored transcripts replayed); same metric columns
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS n_conflict INTEGER;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS n_success INTEGER;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS n_survival INTEGER;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS n_invalid INTEGER;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS n_censored INTEGER;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS n_active_at_20 INTEGER;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS share_active_at_20 DOUBLE;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS narrator_words_mean DOUBLE;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS narrator_over_limit_pct DOUBLE;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS player_words_mean DOUBLE;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS player_over_limit_pct DOUBLE;

-- Paper Table 2 as run: live episodes of one cell (ncp.ablation: one narrator, one architecture,
-- the paper's adversarial player) with each auditor configuration in the loop. Same layouts as
-- ncp_episodes / ncp_turns; partition key (auditor_id).
CREATE TABLE IF NOT EXISTS ncp_ablation_episodes AS SELECT * FROM ncp_episodes LIMIT 0;
CREATE TABLE IF NOT EXISTS ncp_ablation_turns AS SELECT * FROM ncp_turns LIMIT 0;

-- One row per in-loop auditor configuration: the paper's Table 2 columns (turns, trajectory %,
-- satisfied %, fact / commitment / player-input conflict %, success = SUCCESS + SURVIVAL count)
-- plus the full Table-1 metric set of that auditor's episodes.
CREATE TABLE IF NOT EXISTS ncp_auditor_ablation (
    auditor_id                 VARCHAR,
    model                      VARCHAR,   -- the narrator of the ablation cell
    arch                       VARCHAR,
    n_episodes                 INTEGER,
    avg_turns                  DOUBLE,
    trajectory_pct             DOUBLE,
    satisfied_pct              DOUBLE,
    pct_fact_conflict          DOUBLE,
    pct_commitment_conflict    DOUBLE,
    pct_player_input_conflict  DOUBLE,
    n_succ                     INTEGER,   -- the paper's Succ.: runs reaching T_max or satisfying all achievements
    n_success                  INTEGER,   -- of which: all achievement commitments satisfied
    n_survival                 INTEGER,   -- of which: reached T_max
    n_conflict                 INTEGER,
    n_invalid                  INTEGER,
    survival_at_20             DOUBLE,
    n_active_at_20             INTEGER,
    share_active_at_20         DOUBLE
);
