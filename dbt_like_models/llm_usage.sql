-- Usage per run, role and model: calls, cache hits, tokens, latency, cost, failures.
SELECT
    run_id,
    role,
    model,
    count(*)                                   AS calls,
    count(*) FILTER (WHERE cache_hit)          AS cache_hits,
    count(*) FILTER (WHERE NOT cache_hit)      AS backend_calls,
    sum(tokens_in)::BIGINT                     AS tokens_in,
    sum(tokens_out)::BIGINT                    AS tokens_out,
    sum(latency_s)                             AS backend_seconds,
    sum(cost_usd)                              AS cost_usd,
    count(*) FILTER (WHERE NOT valid)          AS invalid_attempts,
    min(created_at)                            AS first_call,
    max(created_at)                            AS last_call
FROM {{ ref('llm_calls') }}
GROUP BY ALL
ORDER BY first_call, role, model
