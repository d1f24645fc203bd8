-- NCP-Bench episodes, re-audits and paper tables. Every statement is idempotent.
-- Terminations: CONFLICT (confirmed conflict = the event), SUCCESS (all achievement commitments
-- satisfied), SURVIVAL (reached T_max), INVALID (an output stayed invalid after retries; never a
-- conflict), CENSORED (re-audit only: the stored transcript ran out before T_max).

-- One row per episode of a cell (narrator model x architecture); partition key (model, arch).
CREATE TABLE IF NOT EXISTS ncp_episodes (
    model                        VARCHAR,    -- narrator model (config name)
    arch                         VARCHAR,    -- baseline+adversarial | baseline+natural | memory+adversarial
    spec_id                      VARCHAR,
    eval_order                   INTEGER,    -- position of the spec in index.yaml
    auditor_id                   VARCHAR,    -- in-loop auditor: ncp.auditor:<model>:<prompt_version>:x<count>
    turns                        INTEGER,    -- last completed turn (turn of the conflict for CONFLICT)
    termination                  VARCHAR,
    conflict_kinds               VARCHAR[],  -- confirmed kinds at the ending turn: fact | commitment | player_input
    nodes_completed              INTEGER,
    nodes_total                  INTEGER,
    trajectory_progress          DOUBLE,     -- nodes_completed / nodes_total at termination
    commitments_satisfied        INTEGER,
    commitments_total            INTEGER,
    commitments_satisfied_share  DOUBLE,
    invalid_role                 VARCHAR,    -- role whose output stayed invalid (INVALID only)
    invalid_message              VARCHAR,
    generation_version           VARCHAR     -- fingerprint of models, prompts, scale and loop code
);

-- One row per turn (turn 0 = opening narration); partition key (model, arch).
CREATE TABLE IF NOT EXISTS ncp_turns (
    model                   VARCHAR,
    arch                    VARCHAR,
    spec_id                 VARCHAR,
    auditor_id              VARCHAR,
    turn                    INTEGER,
    node_before             VARCHAR,    -- current trajectory node when the turn started
    node_after              VARCHAR,    -- after the node update (NULL: all nodes complete)
    player_input            VARCHAR,
    narrator_text           VARCHAR,
    fact_diff_json          VARCHAR,    -- {proposed: {add, negate}, applied: {added, negated, rejected}, discarded}
    conflict_report_json    VARCHAR,    -- {counts, conflicts: [{kind, target_id, reason, confirmed, review_reason}],
                                        --  double_checked, review_reason, confirmed_counts}
    node_assessment_json    VARCHAR,    -- {node_id, trigger_occurred, key_delta_occurred, ambiguous, evidence, advanced}
    commitment_status_json  VARCHAR,    -- {updates, rejected, statuses: {c_N: {status, evidence, turn}}}
    ledger_snapshot_json    VARCHAR,    -- every fact after the turn: {id, content, active, added_turn, negated_turn}
    memory_json             VARCHAR,    -- memory narrator (HiAgent): the memory layout shown this turn, its summaries (requested per prompt), the tokenizer
    outcome                 VARCHAR,    -- termination decided at this turn, else NULL
    invalid_role            VARCHAR,
    llm_call_ids            VARCHAR[]   -- llm_calls.call_id of every call made for this turn
);

-- Re-audited episodes (stored transcripts replayed by another auditor configuration);
-- partition key (model, arch, auditor_id), so older auditor configurations are kept.
CREATE TABLE IF NOT EXISTS ncp_reaudit_episodes (
    model                        VARCHAR,
    arch                         VARCHAR,
    spec_id                      VARCHAR,
    eval_order                   INTEGER,
    auditor_id                   VARCHAR,    -- the re-auditing configuration
    turns                        INTEGER,
    termination                  VARCHAR,    -- CONFLICT | SUCCESS | SURVIVAL | CENSORED | INVALID
    conflict_kinds               VARCHAR[],
    nodes_completed              INTEGER,
    nodes_total                  INTEGER,
    trajectory_progress          DOUBLE,
    commitments_satisfied        INTEGER,
    commitments_total            INTEGER,
    commitments_satisfied_share  DOUBLE,
    invalid_role                 VARCHAR,
    invalid_message              VARCHAR,
    generation_version           VARCHAR
);

-- Per-turn audit records of the re-audits (same JSON layouts as ncp_turns).
CREATE TABLE IF NOT EXISTS ncp_reaudit_turns (
    model                   VARCHAR,
    arch                    VARCHAR,
    spec_id                 VARCHAR,
    auditor_id              VARCHAR,
    turn                    INTEGER,
    node_before             VARCHAR,
    node_after              VARCHAR,
    player_input            VARCHAR,
    narrator_text           VARCHAR,
    fact_diff_json          VARCHAR,
    conflict_report_json    VARCHAR,
    node_assessment_json    VARCHAR,
    commitment_status_json  VARCHAR,
    ledger_snapshot_json    VARCHAR,
    memory_json             VARCHAR,
    outcome                 VARCHAR,
    invalid_role            VARCHAR,
    llm_call_ids            VARCHAR[]
);

-- Paper Table 1: one row per narrator model x arch x auditor (percentages 0..100).
CREATE TABLE IF NOT EXISTS ncp_summary (
    model                      VARCHAR,
    arch                       VARCHAR,
    auditor_id                 VARCHAR,
    n_episodes                 INTEGER,
    avg_turns                  DOUBLE,
    trajectory_pct             DOUBLE,
    satisfied_pct              DOUBLE,
    pct_fact_conflict          DOUBLE,   -- episodes ending in a confirmed conflict of this kind
    pct_commitment_conflict    DOUBLE,
    pct_player_input_conflict  DOUBLE,
    pct_conflict               DOUBLE,
    pct_success                DOUBLE,
    pct_survival               DOUBLE,
    pct_invalid                DOUBLE,
    pct_censored               DOUBLE,
    survival_at_20             DOUBLE    -- share of episodes with turn count >= 20 (the reference's); KM: km_survival_at_20
);

-- Paper Figure 4: per cell x auditor x turn, Kaplan-Meier survival (CONFLICT = event).
CREATE TABLE IF NOT EXISTS ncp_survival (
    model             VARCHAR,
    arch              VARCHAR,
    auditor_id        VARCHAR,
    turn              INTEGER,
    survival          DOUBLE,    -- share of episodes with turn count >= turn (the reference's headline)
    ci_lower          DOUBLE,    -- 95% exponential-Greenwood interval of km_survival (lifelines)
    ci_upper          DOUBLE,
    at_risk           INTEGER,   -- episodes whose duration >= turn
    raw_share_active  DOUBLE,    -- share not yet ended after this turn (SURVIVAL never ends)
    n_episodes        INTEGER
);

-- Paper Table 2: metrics per auditor configuration (row_type 'auditor') and Pearson/Spearman
-- correlations between auditor pairs across environments (row_type 'correlation').
CREATE TABLE IF NOT EXISTS ncp_auditor_sensitivity (
    row_type                   VARCHAR,
    auditor_id                 VARCHAR,
    n_episodes                 INTEGER,
    avg_turns                  DOUBLE,
    trajectory_pct             DOUBLE,
    satisfied_pct              DOUBLE,
    pct_fact_conflict          DOUBLE,
    pct_commitment_conflict    DOUBLE,
    pct_player_input_conflict  DOUBLE,
    pct_conflict               DOUBLE,
    pct_success                DOUBLE,
    pct_survival               DOUBLE,
    pct_invalid                DOUBLE,
    pct_censored               DOUBLE,
    survival_at_20             DOUBLE,
    auditor_b                  VARCHAR,  -- correlation rows: the second auditor
    metric                     VARCHAR,  -- turns | trajectory_progress | commitments_satisfied_share
    n_environments             INTEGER,  -- episodes (model, arch, spec_id) audited by both
    pearson_r                  DOUBLE,
    pearson_p                  DOUBLE,
    spearman_rho               DOUBLE,
    spearman_p                 DOUBLE
);

-- Paper Table 7: trajectory % and satisfied % per primary genre x model (x arch x auditor).
CREATE TABLE IF NOT EXISTS ncp_genre (
    primary_genre   VARCHAR,
    model           VARCHAR,
    arch            VARCHAR,
    auditor_id      VARCHAR,
    n_episodes      INTEGER,
    trajectory_pct  DOUBLE,
    satisfied_pct   DOUBLE
);
