"""The appendix figures the paper shows (Figs. 7, 9, 11–15) are drawn from the stored tables: each
is a PNG, and where the figure states a count (Fig. 7: coinciding cells, non-dominated / supported
cells) the count is the table's."""
from __future__ import annotations

import io

import polars as pl

from tests.wse.test_tables import PARAMS, upstream
from tests.wse.test_tables_more import _frame, _two_models
from wse_platform.wse import figures as F
from wse_platform.wse import tables as T

PNG = b"\x89PNG\r\n\x1a\n"


def test_every_appendix_figure_is_drawn_from_the_tables(monkeypatch):
    up = _two_models()
    frame, info = _frame(up)
    h = info["horizon"]
    cells = T.cell_metrics(frame, info)
    titles = []
    real = F._subplots

    def spy(*a, **kw):
        fig, ax = real(*a, **kw)
        titles.append(fig)
        return fig, ax
    monkeypatch.setattr(F, "_subplots", spy)
    figs = {
        "7": F.fig7_png(cells),
        "9": F.fig9_png(frame, h, {"g1": ["m1"], "g2": ["m2"]}, T.horizon_sensitivity(frame, info, PARAMS)),
        "12": F.fig12_png(up["wse_trajectories"], h),
        "13": F.fig13_png(frame, h),
        "14": F.fig14_png(cells, frame, h, pl.DataFrame({"metric": ["G"], "fit": ["all"], "alpha": [1.0],
                                                        "beta": [2.0]}),
                          {"m1": (3.0, "q"), "m2": (7.0, "q")}),
        "15": F.fig15_png(T.source_family_pooled(frame, info, T.TableParams(bootstrap_draws=20))),
    }
    for name, png in figs.items():
        assert png.startswith(PNG), name
    sup = titles[0]._suptitle.get_text()
    nd_a, sup_a = F._pareto_counts(cells, "C_adj")
    coincide = int(((cells["C_obs"] - cells["C_adj"]).abs() < 1e-9).sum())
    assert f"in {coincide} of {cells.height} cells" in sup and f"non-dominated: {len(nd_a)} on C_adj" in sup
    assert f"supported: {len(sup_a)}" in sup


def test_fig11_bars_are_the_within_model_percentage_changes():
    costs = pl.DataFrame({"row_kind": ["contrast"] * 2, "scope": ["group"] * 2, "model_group": ["g"] * 2,
                          "contrast": ["B2-B1", "WMEM on-off"], "pct_tokens_per_trajectory": [50.0, -10.0],
                          "pct_G": [5.0, -20.0]})
    import matplotlib.image as mpimg
    img = mpimg.imread(io.BytesIO(F.fig11_png(costs)), format="png")
    assert img.shape[0] > 100 and img.shape[1] > 300


def test_figures_draw_missing_values_as_gaps():
    """A model without R (every richness verdict failed, as in the demo) or a contrast without a
    value is a gap in the figure, never a failed asset."""
    up = _two_models()
    frame, info = _frame(up)
    h = info["horizon"]
    cells = T.cell_metrics(frame, info).with_columns(
        R=pl.when(pl.col("model") == "m2").then(None).otherwise(pl.col("R")))
    assert F.fig14_png(cells, frame, h, pl.DataFrame(), {"m1": (3.0, "q"), "m2": (7.0, "q")}).startswith(PNG)
    sf = T.source_family_pooled(frame, info, T.TableParams(bootstrap_draws=20)).with_columns(
        C_obs=pl.when(pl.col("dropped_world") == "w1").then(None).otherwise(pl.col("C_obs")))
    assert F.fig15_png(sf).startswith(PNG)
    sens = T.horizon_sensitivity(frame, info, PARAMS).with_columns(G_h=pl.lit(None, pl.Float64))
    assert F.fig9_png(frame, h, {"all": ["m1", "m2"]}, sens).startswith(PNG)
