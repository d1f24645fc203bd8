-- Core platform tables. Every statement is idempotent (run at every start).

-- One row per LLM call attempt made through the platform client (cache hits included).
CREATE TABLE IF NOT EXISTS llm_calls (
    call_id        VARCHAR PRIMARY KEY,  -- unique per (run, request, attempt)
    run_id         VARCHAR,              -- Dagster run id, or a CLI/notebook session id
    partition_key  VARCHAR,              -- Dagster partition (if any)
    role           VARCHAR,              -- e.g. wse.story_agent
    model          VARCHAR,              -- config model name
    backend        VARCHAR,
    backend_model  VARCHAR,              -- backend model id (+revision)
    prompt_version VARCHAR,
    request_key    VARCHAR,              -- content hash of the request (cache key without attempt)
    attempt        INTEGER,              -- 1-based attempt index
    n_samples      INTEGER,
    tokens_in      BIGINT,
    tokens_out     BIGINT,
    latency_s      DOUBLE,               -- backend wall time (0 for cache hits)
    cost_usd       DOUBLE,               -- when the price is known
    cache_hit      BOOLEAN,
    valid          BOOLEAN,              -- output parsed/validated
    error_kind     VARCHAR,              -- NULL when valid
    created_at     TIMESTAMP
);
-- Added for real models (ADD COLUMN IF NOT EXISTS: older warehouses gain them at the next start).
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS finish_reason VARCHAR;            -- 'length' = cut by max_tokens
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS prompt_truncated_tokens BIGINT;   -- tokens cut from the prompt to fit n_ctx
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS reasoning VARCHAR;                -- <think> block / provider reasoning, removed from the answer
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS reasoning_tokens BIGINT;          -- as reported by the provider (NULL: not reported)
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS endpoint VARCHAR;                 -- api_base that answered (several servers per model)
