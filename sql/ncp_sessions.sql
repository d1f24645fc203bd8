-- NCP-Bench turns of `wse ncp play` sessions: the session is part of the turns' key, so every play
-- session of a spec keeps its transcript (ncp_episodes keeps one row per session through its
-- generation_version 'ncp-play:<session>'). NULL for the episodes of the model cells (and for play
-- turns written before this column existed). Same layout for the re-audit and ablation turn tables.
ALTER TABLE ncp_turns ADD COLUMN IF NOT EXISTS session VARCHAR;
ALTER TABLE ncp_reaudit_turns ADD COLUMN IF NOT EXISTS session VARCHAR;
ALTER TABLE ncp_ablation_turns ADD COLUMN IF NOT EXISTS session VARCHAR;
