"""NCP-Bench figures: survival curves (paper Figure 4), primary-genre distribution (Figure 3)
and per-spec count histograms (Figure 6)."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from wse_platform.plotting import no_data_note, whole_number_ticks


def plot_survival(survival: pl.DataFrame, path: str | Path, title: str = "NCP-Bench: episodes without a confirmed conflict") -> Path:
    """One panel per auditor; one colour per model × arch: the headline survival (share of episodes whose
    turn count is >= t, solid) and the secondary Kaplan–Meier estimate with its CI (dotted). Returns the PNG path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    auditors = sorted(set(survival["auditor_id"].to_list())) if not survival.is_empty() else ["(none)"]
    fig, axes = plt.subplots(1, len(auditors), figsize=(6 * len(auditors), 4), squeeze=False)
    for ax, auditor in zip(axes[0], auditors):
        sub = survival.filter(pl.col("auditor_id") == auditor) if not survival.is_empty() else survival
        for (model, arch), g in (sub.group_by(["model", "arch"], maintain_order=True) if not sub.is_empty() else []):
            g = g.sort("turn")
            line, = ax.step(g["turn"], g["survival"], where="post", label=f"{model} / {arch}")
            km = g["km_survival"] if "km_survival" in g.columns else None
            if km is not None and km.drop_nulls().len():
                lo, hi = g["ci_lower"].fill_null(km), g["ci_upper"].fill_null(km)
                ax.fill_between(g["turn"].to_list(), lo.to_list(), hi.to_list(), step="post", alpha=0.12,
                                color=line.get_color())
                ax.step(g["turn"], km, where="post", linestyle=":", color=line.get_color(), alpha=0.8)
        if sub.is_empty():
            no_data_note(ax, "no audited episode", hide_axes=False)
        ax.set_title(auditor, fontsize=9)
        ax.set_xlabel("turn")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # turns are whole numbers
        ax.set_ylabel("survival: share with turns >= t (solid) / Kaplan–Meier (dotted)")
        ax.set_ylim(-0.02, 1.02)
        if not sub.is_empty():
            ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))  # keep the panel titles clear of the figure title
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def genre_shares(breakdown: pl.DataFrame) -> pl.DataFrame:
    """What Figure 3 draws: primary genre, number of specs and % of specs, largest first."""
    g = breakdown.filter(pl.col("dimension") == "primary_genre").sort(["n", "category"], descending=[True, False])
    return g.select("category", "n", (100.0 * pl.col("share")).alias("pct"))


def plot_genre_distribution(breakdown: pl.DataFrame, path: str | Path) -> Path:
    """Figure 3: share of specs per primary genre (from `ncp_spec_breakdown`), largest first."""
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    g = genre_shares(breakdown)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    shares = g["pct"].to_list()
    bars = ax.bar(g["category"].to_list(), shares, color="#4C72B0")
    for b, v in zip(bars, shares):
        ax.annotate(f"{v:.0f}%", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    fontsize=7)
    if g.is_empty():
        no_data_note(ax, "no spec with a primary genre")
    ax.set_ylabel("% of specs")
    ax.set_title(f"Primary genre of the {int(g['n'].sum()) if g.height else 0} NCP-Bench specs", fontsize=10)
    ax.tick_params(axis="x", labelrotation=60, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_count_histograms(counts: dict[str, list[int]], path: str | Path) -> Path:
    """Figure 6: histograms of the per-spec numbers of facts, commitments and trajectory nodes."""
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(counts), figsize=(4 * len(counts), 3.2), squeeze=False)
    for ax, (name, values) in zip(axes[0], counts.items()):
        if values:
            ax.hist(values, bins=range(min(values), max(values) + 2), color="#55A868", edgecolor="white",
                    align="left")
            whole_number_ticks(ax.xaxis)  # counts of facts / commitments / nodes
            whole_number_ticks(ax.yaxis)  # counts of specs
        else:
            no_data_note(ax, "no spec")
        ax.set_title(f"{name.replace('_', ' ')} per movie", fontsize=10)
        ax.set_xlabel(f"number of {name.replace('_', ' ')}")
        ax.set_ylabel("count of specs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
