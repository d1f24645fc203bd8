"""Issue 21: the legends of the `endings_corpus_tension` bar plots (Figs. 8-10) were drawn over the
bars (matplotlib's "best" place inside the axes, which has no free corner when bars reach the top)."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from wse_platform.endings import plots


def _table(n_sets: int) -> pl.DataFrame:
    cols = {"set_key": [f"corpus:set_{i}" for i in range(n_sets)], "judge_config_id": ["judge-v1"] * n_sets}
    for _, _, columns, _ in plots.BAR_PLOTS:
        for col, _ in columns:
            cols[col] = [0.9 - 0.05 * i for i in range(n_sets)]  # tall bars with CIs up to 1.0
            cols[f"{col}_ci_low"] = [v - 0.1 for v in cols[col]]
            cols[f"{col}_ci_high"] = [min(1.0, v + 0.1) for v in cols[col]]
    return pl.DataFrame(cols)


@pytest.mark.parametrize("n_sets", [2, 3])
def test_corpus_bar_legends_are_whole_and_cover_no_bar(tmp_path, monkeypatch, n_sets):
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: (figures.append(fig), save(fig, path))[1])
    plots.plot_corpus_bars(_table(n_sets), tmp_path)
    assert len(figures) == len(plots.BAR_PLOTS)
    for fig in figures:
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
        assert len(legends) == 1
        box = legends[0].get_window_extent(renderer)
        page = fig.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1  # not cut off
        drawn = [p.get_window_extent(renderer) for p in ax.patches]
        drawn += [c.get_window_extent(renderer) for c in ax.collections]  # the CI whiskers
        drawn = [d for d in drawn if np.isfinite(d.get_points()).all()]  # empty collections have no extent
        assert drawn and not any(box.overlaps(d) for d in drawn)
