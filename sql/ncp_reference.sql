-- NCP-Bench metrics as the reference (NLP2CT/NCP-Bench metrics.py) computes them. Idempotent.
-- Headline survival (survival, survival_at_20) = share of episodes whose turn count is >= t; the
-- Kaplan–Meier estimate stays as the secondary km_survival (its CI: ci_lower / ci_upper) and km_survival_at_20.
ALTER TABLE ncp_survival ADD COLUMN IF NOT EXISTS km_survival DOUBLE;
ALTER TABLE ncp_summary ADD COLUMN IF NOT EXISTS km_survival_at_20 DOUBLE;
ALTER TABLE ncp_auditor_sensitivity ADD COLUMN IF NOT EXISTS km_survival_at_20 DOUBLE;
ALTER TABLE ncp_auditor_ablation ADD COLUMN IF NOT EXISTS km_survival_at_20 DOUBLE;
