"""Figures 3 and 6 from the released specs (and the spec assets that attach them)."""
from __future__ import annotations

import pytest

from tests.ncp._ncp_helpers import released_specs
from wse_platform.ncp.plots import genre_shares, plot_count_histograms, plot_genre_distribution
from wse_platform.ncp.stats import QUANTITIES, spec_breakdown

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def specs():
    return list(released_specs())


def test_figure3_genre_distribution_matches_the_paper(specs, tmp_path):
    shares = genre_shares(spec_breakdown(specs))
    assert shares.height == 18
    top = [(r["category"], round(r["pct"])) for r in shares.head(6).iter_rows(named=True)]
    assert top == [("Action", 13), ("Sci-Fi", 12), ("Comedy", 11), ("Western", 9), ("Fantasy", 8), ("Crime", 7)]
    path = plot_genre_distribution(spec_breakdown(specs), tmp_path / "fig3.png")
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5_000


def test_figure6_histograms_of_per_spec_counts(specs, tmp_path):
    counts = {q: [len(getattr(s, attr)) for s in specs] for q, attr in QUANTITIES.items()}
    assert (min(counts["facts"]), max(counts["facts"])) == (8, 31)  # the x-ranges of Figure 6 (Table 6)
    path = plot_count_histograms(counts, tmp_path / "fig6.png")
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5_000


def test_empty_figures_say_no_data_instead_of_empty_axes(tmp_path, monkeypatch):
    """Issue 13: no spec yet -> a "no data yet" note on every panel, not blank axes."""
    import wse_platform.ncp.plots as plots
    from wse_platform.ncp.stats import spec_breakdown as breakdown

    notes: list[str] = []
    real = plots.no_data_note
    monkeypatch.setattr(plots, "no_data_note", lambda ax, what, **kw: (notes.append(what), real(ax, what, **kw)))
    fig3 = plots.plot_genre_distribution(breakdown([]), tmp_path / "fig3.png")
    assert notes == ["no spec with a primary genre"] and fig3.read_bytes()[:8] == PNG
    fig6 = plots.plot_count_histograms({q: [] for q in QUANTITIES}, tmp_path / "fig6.png")
    assert notes[1:] == ["no spec"] * len(QUANTITIES) and fig6.read_bytes()[:8] == PNG
