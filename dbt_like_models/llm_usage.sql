-- Usage per run, role and model: calls, cache hits, tokens, latency, cost, failures by kind
-- (truncated = answer cut by max_tokens, a failure; answers_cut = every cut answer, also those a
-- role accepts (allow_truncated) and cut closed choices; input_truncated = prompt cut to fit the context;
-- transport = provider/transport error after retries, infrastructure = setup/disk failure: both failed
-- the run with no result, and a later answer to the same call replaces their row; see the README),
-- cut prompts (also when allowed), reasoning tokens and backend calls per endpoint.
SELECT
    run_id,
    role,
    model,
    count(*)                                                     AS calls,
    count(*) FILTER (WHERE cache_hit)                            AS cache_hits,
    count(*) FILTER (WHERE NOT cache_hit)                        AS backend_calls,
    sum(tokens_in)::BIGINT                                       AS tokens_in,
    sum(tokens_out)::BIGINT                                      AS tokens_out,
    sum(reasoning_tokens)::BIGINT                                AS reasoning_tokens,
    sum(latency_s)                                               AS backend_seconds,
    sum(cost_usd)                                                AS cost_usd,
    count(*) FILTER (WHERE NOT valid)                            AS invalid_attempts,
    count(*) FILTER (WHERE error_kind = 'truncated')             AS truncated,
    count(*) FILTER (WHERE finish_reason = 'length')             AS answers_cut,
    count(*) FILTER (WHERE error_kind = 'input_truncated')       AS input_truncated,
    count(*) FILTER (WHERE coalesce(prompt_truncated_tokens, 0) > 0) AS prompts_cut,
    count(*) FILTER (WHERE error_kind = 'transport')             AS transport_failures,
    count(*) FILTER (WHERE error_kind = 'infrastructure')        AS infrastructure_failures,
    count(*) FILTER (WHERE error_kind = 'truncated') / count(*)  AS truncated_share,
    histogram(endpoint) FILTER (WHERE NOT cache_hit AND endpoint IS NOT NULL) AS calls_per_endpoint,
    min(created_at)                                              AS first_call,
    max(created_at)                                              AS last_call
FROM {{ ref('llm_calls') }}
GROUP BY ALL
ORDER BY first_call, role, model
