-- One row per model found in any benchmark table or in llm_calls: its results on the three
-- benchmarks side by side, each with the judge/auditor configuration it was computed with.
--   wse_*       WSE-bench G / C_obs / C_adj / R, mean over the architectures it ran (equal weight),
--               and per architecture in wse_by_arch (with the consistency/richness judge ids)
--   ncp_*       NCP-Bench as narrator: per architecture x auditor configuration in ncp_by_arch
--               (avg turns, trajectory %, satisfied %, survival at 20), plus means over them
--   endings_*   100-Endings no-rate statistics as forecaster (human corpora, any judge), as judge
--               (human corpora, any forecaster) and as story generator (per pipeline), each list
--               entry with its judge_config_id
--   tokens_* / cost_usd_*   backend (non-cached) tokens and cost per benchmark (role prefix)
WITH
wse AS (
    SELECT model,
           count(*)                               AS wse_architectures,
           avg(G)                                 AS wse_G,
           avg(C_obs)                             AS wse_C_obs,
           avg(C_adj)                             AS wse_C_adj,
           avg(R)                                 AS wse_R,
           list({'arch': arch, 'G': G, 'C_obs': C_obs, 'C_adj': C_adj, 'R': R, 'n': n,
                 'judge_config_id': judge_config_id, 'richness_judge_config_id': richness_judge_config_id}
                ORDER BY arch)                    AS wse_by_arch
    FROM {{ ref('wse_cell_metrics') }}
    GROUP BY model
),
ncp AS (
    SELECT model,
           avg(avg_turns)                         AS ncp_avg_turns,
           avg(trajectory_pct)                    AS ncp_trajectory_pct,
           avg(satisfied_pct)                     AS ncp_satisfied_pct,
           avg(survival_at_20)                    AS ncp_survival_at_20,
           list({'arch': arch, 'auditor_id': auditor_id, 'n_episodes': n_episodes, 'avg_turns': avg_turns,
                 'trajectory_pct': trajectory_pct, 'satisfied_pct': satisfied_pct,
                 'survival_at_20': survival_at_20} ORDER BY arch, auditor_id) AS ncp_by_arch
    FROM {{ ref('ncp_summary') }}
    GROUP BY model
),
forecasters AS (
    SELECT DISTINCT story_id, set_key, forecaster_model FROM {{ ref('endings_positions') }}
),
human AS (
    SELECT f.forecaster_model                     AS forecaster,
           split_part(t.judge_config_id, ':', 2)  AS judge,
           t.judge_config_id,
           count(*)                               AS n_stories,
           avg(t.mean_no_rate)                    AS mean_no_rate,
           avg(t.late_no_rate)                    AS late_no_rate
    FROM {{ ref('endings_story_tension') }} t
    JOIN forecasters f USING (story_id, set_key)
    WHERE t.set_kind = 'human'
    GROUP BY ALL
),
as_forecaster AS (
    SELECT forecaster AS model, avg(mean_no_rate) AS endings_forecaster_mean_no_rate,
           list({'judge_config_id': judge_config_id, 'n_stories': n_stories, 'mean_no_rate': mean_no_rate,
                 'late_no_rate': late_no_rate} ORDER BY judge_config_id) AS endings_as_forecaster
    FROM human GROUP BY forecaster
),
as_judge AS (
    SELECT judge AS model, avg(mean_no_rate) AS endings_judge_mean_no_rate,
           list({'judge_config_id': judge_config_id, 'forecaster': forecaster, 'n_stories': n_stories,
                 'mean_no_rate': mean_no_rate, 'late_no_rate': late_no_rate}
                ORDER BY judge_config_id, forecaster) AS endings_as_judge
    FROM human GROUP BY judge
),
as_generator AS (
    SELECT generator_model AS model, avg(mean_no_rate) AS endings_generator_mean_no_rate,
           list({'pipeline': pipeline, 'judge_config_id': judge_config_id, 'n': n, 'mean_no_rate': mean_no_rate,
                 'late_no_rate': late_no_rate} ORDER BY pipeline, judge_config_id) AS endings_as_generator
    FROM {{ ref('endings_corpus_tension') }}
    WHERE generator_model IS NOT NULL
    GROUP BY generator_model
),
usage AS (
    SELECT model,
           sum(tokens_in + tokens_out) FILTER (WHERE split_part(role, '.', 1) = 'wse')::BIGINT     AS tokens_wse,
           sum(tokens_in + tokens_out) FILTER (WHERE split_part(role, '.', 1) = 'ncp')::BIGINT     AS tokens_ncp,
           sum(tokens_in + tokens_out) FILTER (WHERE split_part(role, '.', 1) = 'endings')::BIGINT AS tokens_endings,
           sum(cost_usd) FILTER (WHERE split_part(role, '.', 1) = 'wse')                           AS cost_usd_wse,
           sum(cost_usd) FILTER (WHERE split_part(role, '.', 1) = 'ncp')                           AS cost_usd_ncp,
           sum(cost_usd) FILTER (WHERE split_part(role, '.', 1) = 'endings')                       AS cost_usd_endings
    FROM {{ ref('llm_calls') }}
    WHERE NOT cache_hit
    GROUP BY model
),
models AS (
    SELECT model FROM wse UNION SELECT model FROM ncp UNION SELECT model FROM as_forecaster
    UNION SELECT model FROM as_judge UNION SELECT model FROM as_generator UNION SELECT model FROM usage
)
SELECT m.model,
       wse.wse_architectures, wse.wse_G, wse.wse_C_obs, wse.wse_C_adj, wse.wse_R, wse.wse_by_arch,
       ncp.ncp_avg_turns, ncp.ncp_trajectory_pct, ncp.ncp_satisfied_pct, ncp.ncp_survival_at_20, ncp.ncp_by_arch,
       f.endings_forecaster_mean_no_rate, f.endings_as_forecaster,
       j.endings_judge_mean_no_rate, j.endings_as_judge,
       g.endings_generator_mean_no_rate, g.endings_as_generator,
       u.tokens_wse, u.tokens_ncp, u.tokens_endings, u.cost_usd_wse, u.cost_usd_ncp, u.cost_usd_endings
FROM models m
LEFT JOIN wse USING (model)
LEFT JOIN ncp USING (model)
LEFT JOIN as_forecaster f USING (model)
LEFT JOIN as_judge j USING (model)
LEFT JOIN as_generator g USING (model)
LEFT JOIN usage u USING (model)
WHERE m.model IS NOT NULL
ORDER BY m.model
