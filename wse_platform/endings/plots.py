"""No-rate curve plots (PNG). Uses matplotlib's Agg canvas directly (no pyplot state), so
plots can be drawn from worker threads and headless runs.

Each story plot shows the raw no-rate per kept position, the smoothed curve the
inflection rates are computed on, and the smoothed curve's peaks (▲) and valleys (▼)
whose vertex angle is at most 60°, labelled with the angle.
"""
from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from wse_platform.metrics.endings import StoryTension, story_tension
from wse_platform.plotting import new_figure, no_data_note, whole_number_ticks

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MARK_MAX_ANGLE = 60.0
NO_CURVE = "no forecasting positions with verdicts (no no-rate curve)"
GRID_TITLE_WIDTH = 40   # characters per line of a grid panel title: wrapped so neighbours never overlap


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "x"


def draw_no_rate_curve(ax: Axes, pcts: Sequence[float], no_rates: Sequence[float],
                       tension: StoryTension | None = None, title: str = "",
                       max_angle: float = MARK_MAX_ANGLE) -> StoryTension | None:
    """Draw one curve on `ax`; returns the tension it marked (computed if not given), or None and a
    "no data" note when the curve has no position."""
    if len(pcts) == 0:
        ax.set_title(title, fontsize=9)
        no_data_note(ax, NO_CURVE)
        return None
    tension = tension or story_tension(pcts, no_rates)
    xs = [100 * p for p in pcts]
    ax.plot(xs, no_rates, "o-", color="0.6", markersize=3, linewidth=1, label="no-rate")
    ax.plot(xs, tension.smoothed, "-", color="tab:purple", linewidth=1.8, label="smoothed")
    sharp = [e for e in tension.extrema if e.angle <= max_angle]
    for kind, marker, color in (("peak", "^", "tab:red"), ("valley", "v", "tab:blue")):
        pts = [e for e in sharp if e.kind == kind]
        if pts:
            ax.scatter([100 * e.pct for e in pts], [e.smoothed for e in pts], marker=marker, s=60,
                       color=color, zorder=3, label=f"{kind} ≤ {max_angle:g}°")
            for e in pts:
                ax.annotate(f"{e.angle:.0f}°", (100 * e.pct, e.smoothed), textcoords="offset points",
                            xytext=(0, 7 if kind == "peak" else -12), ha="center", fontsize=7, color=color)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("story revealed (%)")
    whole_number_ticks(ax.xaxis)  # whole percentages, never 10.5 %
    ax.set_ylabel("no-rate")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    return tension


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=110)
    return path


def plot_no_rate_curve(pcts: Sequence[float], no_rates: Sequence[float], path: str | Path,
                       title: str = "", tension: StoryTension | None = None) -> Path:
    """One story's no-rate curve as a PNG at `path`."""
    fig = new_figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.add_subplot()
    if draw_no_rate_curve(ax, pcts, no_rates, tension, title) is not None:
        ax.legend(fontsize=7, loc="best")
    return _save(fig, Path(path))


def _curves(no_rate: pl.DataFrame) -> list[tuple[tuple[str, str, str], pl.DataFrame]]:
    ok = no_rate.filter(pl.col("no_rate").is_not_null())
    if "repeat" in ok.columns:   # curves of the main run (repeats are compared in endings_stability)
        ok = ok.filter(pl.col("repeat").fill_null(0) == 0)
    groups = ok.partition_by(["set_key", "story_id", "judge_config_id"], as_dict=True)
    return [(k, g.sort("position")) for k, g in sorted(groups.items())]


def plot_story_curves(no_rate: pl.DataFrame, out_dir: str | Path) -> list[Path]:
    """One PNG per story and judge configuration from `endings_no_rate` rows:
    ``<out_dir>/<set_key>/<story_id>__<judge_config_id>.png``."""
    paths = []
    for (set_key, story_id, judge), g in _curves(no_rate):
        path = Path(out_dir) / _safe(set_key) / f"{_safe(story_id)}__{_safe(judge)}.png"
        paths.append(plot_no_rate_curve(g["revealed_share"].to_list(), g["no_rate"].to_list(), path,
                                        title=f"{set_key} · {story_id}"))
    return paths


def plot_curve_grid(no_rate: pl.DataFrame, path: str | Path, max_stories: int = 12) -> Path:
    """An overview grid of the first `max_stories` curves (for the asset page); a "no data" figure
    when no story has a curve, so the asset page says so instead of showing nothing."""
    curves = _curves(no_rate)[:max_stories]
    if not curves:
        fig = new_figure(figsize=(6.4, 3.6), layout="constrained")
        ax = fig.add_subplot()
        ax.set_title("No-rate curves", fontsize=9)
        no_data_note(ax, NO_CURVE)
        return _save(fig, Path(path))
    cols = min(3, len(curves))
    rows = -(-len(curves) // cols)
    fig = new_figure(figsize=(4.2 * cols, 2.8 * rows), layout="constrained")
    for i, ((set_key, story_id, _), g) in enumerate(curves):
        ax = fig.add_subplot(rows, cols, i + 1)
        draw_no_rate_curve(ax, g["revealed_share"].to_list(), g["no_rate"].to_list(),
                           title=textwrap.fill(f"{set_key} · {story_id}"[:60], GRID_TITLE_WIDTH))
    return _save(fig, Path(path))


# Per-corpus bar plots of the paper's Figs. 8-10: (file name, title, [(column, label)], percent?)
BAR_PLOTS = (
    ("no_rate_bars", "Mean and late no-rate by set (Fig. 8)", [("mean_no_rate", "mean"), ("late_no_rate", "late (≥ 80 %)")], False),
    ("inflection_bars", "Inflection rate by set (Fig. 9)", [("ir30", "≤ 30°"), ("ir60", "≤ 60°"), ("ir120", "≤ 120°")], False),
    ("retention_bars", "Post-spike retention by set (Fig. 10)", [("retention", "mean"), ("retention_median", "median")], True),
)


def plot_corpus_bars(corpus_tension: pl.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """Grouped bar charts, one bar group per corpus / generated set (first judge configuration
    in id order); mean bars carry their 95 % CI when the table has one. A chart whose values are
    all missing (or an empty table) is a "no data" figure rather than empty axes or zero bars."""
    judges = sorted(corpus_tension["judge_config_id"].drop_nulls().unique().to_list())
    judge = judges[0] if judges else None
    df = corpus_tension.filter(pl.col("judge_config_id") == judge) if judge else corpus_tension.clear()
    df = df.sort("set_key")
    labels = df["set_key"].to_list()
    out = {}
    for name, title, cols, pct in BAR_PLOTS:
        fig = new_figure(figsize=(max(5.0, 1.3 * len(labels) + 2), 3.6), layout="constrained")
        ax = fig.add_subplot()
        if all(df[col].null_count() == df.height for col, _ in cols):
            fig.set_size_inches(6.4, 3.6)
            ax.set_title(title if judge is None else f"{title} · {judge}", fontsize=8)
            no_data_note(ax, f"no set has {' / '.join(c for c, _ in cols)} values"
                             if df.height else "no corpus or generated set with tension metrics")
            out[name] = _save(fig, Path(out_dir) / f"{name}.png")
            continue
        width = 0.8 / len(cols)
        scale = 100.0 if pct else 1.0
        for j, (col, label) in enumerate(cols):
            vals = [scale * v if v is not None else 0.0 for v in df[col].to_list()]
            xs = [i + (j - (len(cols) - 1) / 2) * width for i in range(len(labels))]
            err = None
            if f"{col}_ci_low" in df.columns:
                lo, hi = df[f"{col}_ci_low"].to_list(), df[f"{col}_ci_high"].to_list()
                err = [[(v - scale * a) if a is not None else 0.0 for v, a in zip(vals, lo)],
                       [(scale * b - v) if b is not None else 0.0 for v, b in zip(vals, hi)]]
            ax.bar(xs, vals, width=width, label=label, yerr=err, capsize=3)
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=7)
        ax.set_ylabel("%" if pct else "rate")
        ax.set_title(f"{title} · {judge}", fontsize=8)
        fig.legend(loc="outside right upper", fontsize=7)  # beside the axes: never over a bar or cut off
        ax.grid(axis="y", alpha=0.3)
        out[name] = _save(fig, Path(out_dir) / f"{name}.png")
    return out
