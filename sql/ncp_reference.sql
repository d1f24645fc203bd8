-- NCP-Bench metrics as the reference (NLP2CT/NCP-Bench metrics.py) computes them. Idempotent.
-- Headline survival (survival, survival_at_20) = share of episodes whose turn count is >= t; the
-- Kaplan–Meier estimate stays as the secondary km_survival (its CI: ci_lower / ci_upper) and km_survival_at_20.
ALTER TABLE ncp_survival ADD COLUMN IF NOT EXISTS km_survival DOUBLE;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS km_survival_at_20 DOUBLE;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS km_survival_at_20 DOUBLE;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS km_survival_at_20 DOUBLE;
-- Table 2's pairwise auditor correlations from the live ablation (row_type 'correlation'; 'auditor' rows as before).
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS row_type VARCHAR;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS auditor_b VARCHAR;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS metric VARCHAR;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS n_environments INTEGER;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS pearson_r DOUBLE;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS pearson_p DOUBLE;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS spearman_rho DOUBLE;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS spearman_p DOUBLE;
-- Paper Table 5: every model's episode on each spec a human narrated (wse ncp play --as narrator), and the human sessions.
CREATE TABLE IF NOT EXISTS ncp_human_baseline (
    spec_id                VARCHAR,
    model                  VARCHAR,   -- 'human' for a human session
    arch                   VARCHAR,
    auditor_id             VARCHAR,
    session                VARCHAR,   -- the play session name (human rows)
    turns                  INTEGER,
    nodes_completed        INTEGER,
    nodes_total            INTEGER,
    commitments_satisfied  INTEGER,
    commitments_total      INTEGER,
    traj                   VARCHAR,   -- "reached/total" as the paper prints it
    sati                   VARCHAR,
    status                 VARCHAR,   -- SUCCESS | SURVIVED | FAILURE
    failure_mode           VARCHAR    -- e.g. "Commitment + fact conflict"
);
