"""Survival curves (paper Figure 4): KM step curve with CI band + raw share still active."""
from __future__ import annotations

from pathlib import Path

import polars as pl


def plot_survival(survival: pl.DataFrame, path: str | Path, title: str = "NCP-Bench: episodes without a confirmed conflict") -> Path:
    """One panel per auditor; one colour per model × arch. Returns the PNG path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    auditors = sorted(set(survival["auditor_id"].to_list())) if not survival.is_empty() else ["(none)"]
    fig, axes = plt.subplots(1, len(auditors), figsize=(6 * len(auditors), 4), squeeze=False)
    for ax, auditor in zip(axes[0], auditors):
        sub = survival.filter(pl.col("auditor_id") == auditor) if not survival.is_empty() else survival
        for (model, arch), g in (sub.group_by(["model", "arch"], maintain_order=True) if not sub.is_empty() else []):
            g = g.sort("turn")
            line, = ax.step(g["turn"], g["survival"], where="post", label=f"{model} / {arch}")
            lo = g["ci_lower"].fill_null(g["survival"])
            hi = g["ci_upper"].fill_null(g["survival"])
            ax.fill_between(g["turn"].to_list(), lo.to_list(), hi.to_list(), step="post", alpha=0.15,
                            color=line.get_color())
            ax.plot(g["turn"], g["raw_share_active"], linestyle=":", color=line.get_color(), alpha=0.8)
        ax.set_title(auditor, fontsize=9)
        ax.set_xlabel("turn")
        ax.set_ylabel("survival (KM, solid) / raw share active (dotted)")
        ax.set_ylim(-0.02, 1.02)
        if not sub.is_empty():
            ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
