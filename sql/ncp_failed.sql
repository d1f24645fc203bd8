-- NCP-Bench episodes without a result: a call still failed after the client's retries (transport error or an
-- output that stayed invalid). As in the reference runner, such an episode has no result file: it is not in
-- its episode table (so in no denominator) and the next run plays it again. `analysis` names that table:
-- ncp_episodes (partition key model, arch, auditor_id), ncp_reaudit_episodes (model, arch, auditor_id = the
-- re-auditor) or ncp_ablation_episodes (auditor_id).
CREATE TABLE IF NOT EXISTS ncp_failed_episodes (
    model               VARCHAR,
    arch                VARCHAR,
    spec_id             VARCHAR,
    eval_order          INTEGER,
    auditor_id          VARCHAR,
    turn                INTEGER,    -- turn whose call failed (0 = opening)
    role                VARCHAR,    -- role of the failing call (ncp.conflict_check, ...)
    error_kind          VARCHAR,    -- transport | invalid_json | schema_violation | empty_output | truncated | ...
    message             VARCHAR,
    generation_version  VARCHAR,
    retry_round         INTEGER,    -- 0 at the first failure; each later run that still fails adds 1 (more attempts)
    analysis            VARCHAR     -- ncp_episodes | ncp_reaudit_episodes | ncp_ablation_episodes
);
-- warehouses from before the re-audit and ablation were listed: their rows are the live cells'
ALTER TABLE ncp_failed_episodes ADD COLUMN IF NOT EXISTS analysis VARCHAR DEFAULT 'ncp_episodes';
