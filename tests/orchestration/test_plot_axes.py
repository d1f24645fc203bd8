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


# ---- 100-Endings: no-rate curves, tension bars (Figs. 8-10) and rubric criteria (Fig. 7) ----------------------

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from wse_platform.endings import plots as endings_plots  # noqa: E402
from wse_platform.endings import rubric_plots  # noqa: E402
from wse_platform.warehouse import Warehouse  # noqa: E402


def _capture_endings(monkeypatch):
    figs = []

    def save(fig, path):
        FigureCanvasAgg(fig)
        figs.append(fig)
        return Path(path)
    monkeypatch.setattr(endings_plots, "_save", save)
    monkeypatch.setattr(rubric_plots, "_save", save)
    return figs


@pytest.fixture(scope="module")
def empty_endings(tmp_path_factory):
    """The tables the Endings assets plot, as a fresh warehouse returns them: DDL schema, no rows."""
    wh = Warehouse(tmp_path_factory.mktemp("wh") / "w.duckdb")
    return {t: wh.table(t) for t in ("endings_no_rate", "endings_corpus_tension", "endings_rubric_criteria")}


def _rows(empty: pl.DataFrame, rows: list[dict]) -> pl.DataFrame:
    """Rows with the table's schema; columns a row leaves out are NULL."""
    return pl.DataFrame([{c: r.get(c) for c in empty.columns} for r in rows], schema=empty.schema)


def _assert_no_data(fig):
    """A visible "no data" note inside the figure, and nothing drawn as if it were data."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    notes = [t for ax in fig.axes for t in ax.texts if t.get_text().startswith("no data")]
    assert notes, [t.get_text() for ax in fig.axes for t in ax.texts]
    for note in notes:
        assert fig.bbox.contains(*note.get_window_extent(renderer).p0)
        assert fig.bbox.contains(*note.get_window_extent(renderer).p1)   # the note is not cut off
    assert not [a for ax in fig.axes for a in (*ax.lines, *ax.collections, *ax.patches, *ax.images)]


def _whole_number_xticks(ax):
    ax.figure.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    return ticks and all(float(t).is_integer() for t in ticks)


def test_endings_curves_without_positions_say_no_data(monkeypatch, tmp_path, empty_endings):
    figs = _capture_endings(monkeypatch)
    fig = Figure()
    FigureCanvasAgg(fig)
    assert endings_plots.draw_no_rate_curve(fig.add_subplot(), [], [], title="s1") is None
    endings_plots.plot_no_rate_curve([], [], tmp_path / "one.png")
    no_rate = empty_endings["endings_no_rate"]
    assert endings_plots.plot_curve_grid(no_rate, tmp_path / "grid.png") == tmp_path / "grid.png"
    judged_none = _rows(no_rate, [{"story_id": "s1", "set_key": "human:ny", "judge_config_id": "j", "position": i,
                                   "revealed_share": 0.2 * (i + 1), "n_samples": 4, "n_valid": 0, "n_failed": 4}
                                  for i in range(3)])                  # every judgement failed: no_rate NULL
    endings_plots.plot_curve_grid(judged_none, tmp_path / "grid2.png")
    assert endings_plots.plot_story_curves(judged_none, tmp_path / "curves") == []  # one PNG per curve: none
    assert len(figs) == 3
    for f in [fig, *figs]:
        _assert_no_data(f)
    assert "forecasting positions with verdicts" in figs[-1].axes[0].texts[0].get_text()


def test_endings_bars_without_values_say_no_data(monkeypatch, tmp_path, empty_endings):
    figs = _capture_endings(monkeypatch)
    corpus = empty_endings["endings_corpus_tension"]
    paths = endings_plots.plot_corpus_bars(corpus, tmp_path)
    assert set(paths) == {name for name, *_ in endings_plots.BAR_PLOTS}
    nulls = _rows(corpus, [{"set_key": k, "judge_config_id": "j", "n": 0} for k in ("human:ny", "gen:m:vanilla")])
    endings_plots.plot_corpus_bars(nulls, tmp_path)                        # rows, but every metric NULL
    criteria = empty_endings["endings_rubric_criteria"]
    assert rubric_plots.plot_rubric_criteria(criteria, tmp_path / "r.png") == tmp_path / "r.png"
    unscored = _rows(criteria, [{"set_key": "human:ny", "rubric_config_id": "r", "criterion": "c1",
                                 "criterion_name": "Engaging", "criterion_order": 1, "tension": True, "n": 0}])
    rubric_plots.plot_rubric_criteria(unscored, tmp_path / "r2.png")
    assert len(figs) == 2 * len(endings_plots.BAR_PLOTS) + 2
    for f in figs:
        _assert_no_data(f)


def test_endings_bars_with_values_still_draw_bars(monkeypatch, tmp_path, empty_endings):
    """The note replaces only empty figures: one set with values keeps its bars."""
    figs = _capture_endings(monkeypatch)
    corpus = _rows(empty_endings["endings_corpus_tension"],
                   [{"set_key": "human:ny", "judge_config_id": "j", "n": 3, "mean_no_rate": 0.5, "late_no_rate": 0.4,
                     "ir30": 0.1, "ir60": 0.2, "ir120": 0.3, "retention": 0.5, "retention_median": 0.6}])
    endings_plots.plot_corpus_bars(corpus, tmp_path)
    criteria = _rows(empty_endings["endings_rubric_criteria"],
                     [{"set_key": "human:ny", "rubric_config_id": "r", "criterion": "c1", "criterion_name": "Engaging",
                       "criterion_order": 1, "tension": True, "n": 2, "mean_score": 70.0}])
    rubric_plots.plot_rubric_criteria(criteria, tmp_path / "r.png")
    for f in figs:
        assert not any(t.get_text().startswith("no data") for ax in f.axes for t in ax.texts)
        assert f.axes[0].patches


def test_no_rate_curve_positions_are_whole_numbers(monkeypatch, tmp_path, empty_endings):
    figs = _capture_endings(monkeypatch)
    pcts, nrs = [0.10, 0.11, 0.12, 0.13], [0.5, 0.7, 0.4, 0.6]     # 10-13 % revealed: default ticks 10.5, 11.5
    endings_plots.plot_no_rate_curve(pcts, nrs, tmp_path / "one.png")
    no_rate = _rows(empty_endings["endings_no_rate"],
                    [{"story_id": f"s{s}", "set_key": "human:ny", "judge_config_id": "j", "position": i,
                      "revealed_share": p, "no_rate": v} for s in range(2) for i, (p, v) in enumerate(zip(pcts, nrs))])
    endings_plots.plot_curve_grid(no_rate, tmp_path / "grid.png")
    axes = [ax for f in figs for ax in f.axes]
    assert len(axes) == 3 and all(_whole_number_xticks(ax) for ax in axes)


def test_curve_grid_panel_titles_do_not_overlap(monkeypatch, tmp_path, empty_endings):
    """Generated sets have long keys (story ids repeat them): titles stay inside their own column."""
    figs = _capture_endings(monkeypatch)
    key = "gen:smollm2-135m-instruct:beats"
    no_rate = _rows(empty_endings["endings_no_rate"],
                    [{"story_id": f"{key}/idea-{s}", "set_key": key, "judge_config_id": "j", "position": i,
                      "revealed_share": 0.2 * (i + 1), "no_rate": (i % 3) / 3} for s in range(6) for i in range(5)])
    endings_plots.plot_curve_grid(no_rate, tmp_path / "grid.png")
    fig = figs[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    assert len(titles) == 6
    for i, t in enumerate(titles):
        assert fig.bbox.x0 <= t.x0 and t.x1 <= fig.bbox.x1           # not cut at the figure edge
        for j, other in enumerate(fig.axes):
            if j != i:
                assert not t.overlaps(titles[j]) and not t.overlaps(other.get_window_extent(renderer))
