"""Bar plot of per-criterion rubric scores by set (paper Fig. 7), from `endings_rubric_criteria`
rows. Kept apart from `plots.py` (no-rate curves and tension bars); same Agg canvas, no pyplot.
"""
from __future__ import annotations

from pathlib import Path

import polars as pl
from wse_platform.endings.plots import _save
from wse_platform.plotting import new_figure, no_data_note


def _no_data(path: Path, title: str, what: str) -> Path:
    fig = new_figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=8)
    no_data_note(ax, what)
    return _save(fig, path)


def plot_rubric_criteria(criteria: pl.DataFrame, path: str | Path) -> Path:
    """Grouped bars: one group per tension-related criterion (every criterion if the rubric marks
    none), one bar per set with its 95 % CI; 0-100, faults inverted. First rubric configuration
    in id order. A "no data" figure when the table is empty or no criterion has a mean score."""
    title = "Rubric criteria by set (Fig. 7)"
    configs = sorted(criteria["rubric_config_id"].drop_nulls().unique().to_list()) if criteria.height else []
    if not configs:
        return _no_data(Path(path), title, "no story has rubric scores")
    config = configs[0]
    df = criteria.filter(pl.col("rubric_config_id") == config)
    if df["tension"].any():
        df = df.filter(pl.col("tension"))
    if df["mean_score"].null_count() == df.height:
        return _no_data(Path(path), f"{title} · {config}", "no shown criterion has a mean score")
    df = df.sort(["criterion_order", "set_key"])
    crits = df.unique("criterion", maintain_order=True)["criterion_name"].to_list()
    sets = sorted(df["set_key"].unique().to_list())
    width = 0.8 / len(sets)
    fig = new_figure(figsize=(max(6.0, 0.35 * len(crits) * len(sets) + 2), 4.0), layout="constrained")
    ax = fig.add_subplot()
    for j, set_key in enumerate(sets):
        g = df.filter(pl.col("set_key") == set_key)
        by = {r["criterion_name"]: r for r in g.iter_rows(named=True)}
        xs, vals, lo, hi = [], [], [], []
        for i, name in enumerate(crits):
            r = by.get(name)
            if r is None or r["mean_score"] is None:
                continue
            xs.append(i + (j - (len(sets) - 1) / 2) * width)
            vals.append(r["mean_score"])
            lo.append(r["mean_score"] - r["mean_score_ci_low"] if r["mean_score_ci_low"] is not None else 0.0)
            hi.append(r["mean_score_ci_high"] - r["mean_score"] if r["mean_score_ci_high"] is not None else 0.0)
        ax.bar(xs, vals, width=width, label=set_key, yerr=[lo, hi], capsize=2)
    ax.set_xticks(range(len(crits)), crits, rotation=25, ha="right", fontsize=7)
    ax.set_ylim(0, 105)
    ax.set_ylabel("score (0-100, faults inverted)")
    ax.set_title(f"{title} · {config}", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, Path(path))
