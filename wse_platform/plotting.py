"""Small figure conventions shared by every benchmark's plots (issue 13): a visible "no data" note
instead of empty axes, and whole-number ticks on axes that count things (turns, steps, positions).

Nothing from matplotlib is imported at module load: the asset definitions import the plot
modules, and `wse status` should not pay ~1.5 s for a library it does not use. `new_figure` gives
the standalone (pyplot-free, thread-safe) Figure the WSE-bench and 100-Endings modules draw on.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def new_figure(**kw) -> Figure:
    """A standalone Figure (no pyplot state: nothing to close); matplotlib imported on first use."""
    from matplotlib.figure import Figure

    return Figure(**kw)


def no_data_note(ax, what: str, hide_axes: bool = True) -> None:
    """Write "no data yet: <what>" in the middle of `ax`; hide the empty frame unless asked not to
    (a panel among drawn panels keeps its frame so the grid stays aligned). The title is kept."""
    if hide_axes:
        ax.set_axis_off()
    ax.text(0.5, 0.5, f"no data yet: {what}", ha="center", va="center", fontsize=10, color="0.4",
            transform=ax.transAxes)


def whole_number_ticks(axis) -> None:
    """Ticks only at whole numbers on `axis` (e.g. `ax.xaxis`): never "2.5 turns"."""
    from matplotlib.ticker import MaxNLocator  # lazy: importing this module stays cheap (NCP imports it)

    axis.set_major_locator(MaxNLocator(integer=True))
