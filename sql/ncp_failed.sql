-- NCP-Bench episodes without a result: a call still failed after the client's retries (transport error or an
-- output that stayed invalid). As in the reference runner, such an episode has no result file: it is not in
-- ncp_episodes (so in no denominator) and the next run of its cell plays it again. Partition key (model, arch).
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
    retry_round         INTEGER     -- 0 at the first failure; each later run that still fails adds 1 (more attempts)
);
