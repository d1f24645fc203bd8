"""Figures the UI shows: whole-number turn/step axes, a "no data" note instead of empty axes, and
panel titles clear of the figure title (issue 13)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import polars as pl

from wse_platform.ncp import plots as ncp_plots
from wse_platform.wse import plots as wse_plots


def _capture_wse(monkeypatch):
    figs = []
    monkeypatch.setattr(wse_plots, "_png", lambda fig: figs.append(fig) or b"")
    return figs


def _frame(lengths):
    n = len(lengths)
    return pl.DataFrame({"model": ["m"] * n, "length": lengths, "first_contradiction": [None] * n,
                         "censored_at": [None] * n})


def test_km_curve_steps_are_whole_numbers(monkeypatch):
    figs = _capture_wse(monkeypatch)
    wse_plots.km_curves_png(_frame([1, 2, 3]), horizon=3)
    ax = figs[0].axes[0]
    figs[0].canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_empty_inputs_say_no_data(monkeypatch):
    figs = _capture_wse(monkeypatch)
    wse_plots.km_curves_png(_frame([]), horizon=3)
    cells = pl.DataFrame(schema={"model": pl.Utf8, "arch": pl.Utf8, "G": pl.Float64, "C_adj": pl.Float64,
                                 "R": pl.Float64})
    wse_plots.heatmap_png(cells, "G")
    wse_plots.pareto_png(cells, "C_adj")
    for fig in figs:
        assert any(t.get_text().startswith("no data") for ax in fig.axes for t in ax.texts)


def test_survival_panel_titles_do_not_overlap_the_figure_title(monkeypatch, tmp_path):
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))
    rows = [{"auditor_id": a, "model": "m", "arch": "x", "turn": t, "survival": 1 - 0.1 * t, "ci_lower": None,
             "ci_upper": None, "raw_share_active": 1 - 0.1 * t} for a in ("a1", "a2") for t in range(4)]
    ncp_plots.plot_survival(pl.DataFrame(rows), tmp_path / "s.png")
    fig = figs[0]
    renderer = fig.canvas.get_renderer()
    top = fig._suptitle.get_window_extent(renderer)
    for ax in fig.axes:
        assert ax.title.get_window_extent(renderer).y1 <= top.y0  # panel title below the figure title
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert all(float(t).is_integer() for t in ticks)
    empty = []
    monkeypatch.setattr(plt, "close", lambda fig=None: empty.append(fig))
    ncp_plots.plot_survival(pl.DataFrame(schema={k: pl.Float64 for k in rows[0]}), tmp_path / "e.png")
    assert any(t.get_text().startswith("no data") for t in empty[0].axes[0].texts)
