"""Benchmark metric functions, exactly as the papers define them (details in each submodule).

WSE-bench: generation_coverage, consistency_scores, richness, pareto.
NCP-Bench: kaplan_meier, survival_table, summary_table, correlations, auditor_sensitivity, genre_table.
100-Endings: split_sentences, select_positions, no_rate, story_tension, group_summary.
"""
from wse_platform.metrics.endings import group_summary, no_rate, select_positions, split_sentences, story_tension
from wse_platform.metrics.ncp import (
    auditor_sensitivity,
    correlations,
    genre_table,
    kaplan_meier,
    summary_table,
    survival_table,
)
from wse_platform.metrics.wse import consistency_scores, generation_coverage, pareto, richness

__all__ = [
    "auditor_sensitivity", "consistency_scores", "correlations", "generation_coverage", "genre_table",
    "group_summary", "kaplan_meier", "no_rate", "pareto", "richness", "select_positions", "split_sentences",
    "story_tension", "summary_table", "survival_table",
]
