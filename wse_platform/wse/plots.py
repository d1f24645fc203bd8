"""WSE-bench figures (matplotlib, headless Agg): heatmaps, Pareto scatter, Kaplan–Meier curves.

Each function returns PNG bytes so assets can both save files and attach them as metadata.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import polars as pl

from wse_platform.config import WSE_ARCHITECTURES
from wse_platform.metrics.wse import consistency_curve, pareto
from wse_platform.plotting import new_figure, whole_number_ticks
from wse_platform.plotting import no_data_note as _no_data


def _subplots(*grid, figsize, **kw):
    """A standalone Figure (`plotting.new_figure`) and its axes, like `plt.subplots`."""
    fig = new_figure(figsize=figsize)
    return fig, fig.subplots(*grid, **kw)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def heatmap_png(cells: pl.DataFrame, metric: str) -> bytes:
    """Models (rows) × architectures (columns, canonical order) coloured by `metric` (0–100)."""
    models = sorted(cells["model"].unique().to_list())
    archs = [a for a in WSE_ARCHITECTURES if a in set(cells["arch"].to_list())]
    grid = np.full((len(models), len(archs)), np.nan)
    for m, a, v in cells.select("model", "arch", metric).iter_rows():
        if v is not None:
            grid[models.index(m), archs.index(a)] = v
    fig, ax = _subplots(figsize=(max(4.0, 1.0 + 0.75 * len(archs)), max(2.0, 1.2 + 0.45 * len(models))))
    if not models or not archs or np.isnan(grid).all():
        _no_data(ax, f"no cell has a {metric} value")
        return _png(fig)
    im = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(archs)), archs, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    for i in range(len(models)):
        for j in range(len(archs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] < 60 else "black")
    ax.set_title(f"{metric} by model × architecture")
    fig.colorbar(im, ax=ax, fraction=0.03)
    return _png(fig)


def pareto_png(cells: pl.DataFrame, axis: str = "C_adj") -> bytes:
    """Cells on (consistency, R); supported points joined by the upper concave envelope."""
    ok = cells.filter(pl.col(axis).is_not_null() & pl.col("R").is_not_null())
    pts = list(zip(ok[axis].to_list(), ok["R"].to_list()))
    status = pareto(pts)
    fig, ax = _subplots(figsize=(6.5, 5))
    if not pts:
        _no_data(ax, f"no cell has both {axis} and R")
        return _png(fig)
    for p, (model, arch) in zip(status, ok.select("model", "arch").iter_rows()):
        style = ("o", "tab:red") if p.supported else ("s", "tab:orange") if p.non_dominated else (".", "tab:gray")
        ax.plot(p.consistency, p.richness, style[0], color=style[1], ms=6 if p.non_dominated else 4)
        if p.non_dominated:
            ax.annotate(f"{model} {arch}", (p.consistency, p.richness), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
    env = sorted({(p.consistency, p.richness) for p in status if p.supported})
    if env:
        ax.plot([x for x, _ in env], [y for _, y in env], "-", color="tab:red", lw=1, label="upper concave envelope")
        ax.legend(fontsize=7, loc="lower left")
    ax.set_xlabel(axis)
    ax.set_ylabel("R")
    ax.set_title(f"Pareto frontier on ({axis}, R): red supported, orange unsupported non-dominated")
    return _png(fig)


def km_curves_png(frame: pl.DataFrame, horizon: int) -> bytes:
    """Kaplan–Meier S(t) per model, pooling the model's trajectories over architectures."""
    fig, ax = _subplots(figsize=(6.5, 4.5))
    if frame.is_empty():
        _no_data(ax, "no judged trajectory")
        return _png(fig)
    steps = np.arange(0, horizon + 1)
    for model in sorted(frame["model"].unique().to_list()):
        g = frame.filter(pl.col("model") == model)
        y, _, s = consistency_curve(g["length"].to_list(), g["first_contradiction"].to_list(), horizon,
                                    g["censored_at"].to_list())
        ax.step(steps, np.concatenate([[1.0], s]), where="post", label=model)
    ax.set_xlabel("step t")
    whole_number_ticks(ax.xaxis)  # steps are whole numbers
    ax.set_ylabel("S(t): no contradiction yet")
    ax.set_ylim(0, 1.02)
    ax.set_title("Kaplan–Meier consistency survival per model")
    ax.legend(fontsize=7, ncol=2)
    return _png(fig)


def write_plots(cells: pl.DataFrame, frame: pl.DataFrame, horizon: int, out_dir: str | Path) -> dict[str, Path]:
    """Write every WSE figure as PNG into `out_dir`; returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = {f"heatmap_{m}": heatmap_png(cells, m) for m in ("G", "C_obs", "R")}
    figures["pareto_C_adj"] = pareto_png(cells, "C_adj")
    figures["pareto_C_obs"] = pareto_png(cells, "C_obs")
    figures["km_curves"] = km_curves_png(frame, horizon)
    paths = {}
    for name, png in figures.items():
        path = out / f"wse_{name}.png"
        path.write_bytes(png)
        paths[name] = path
    return paths


def cost_coverage_png(costs: pl.DataFrame) -> bytes:
    """Fig. 11: generation tokens per trajectory (x) against G (y), one point per cell."""
    cells = costs.filter(pl.col("row_kind") == "cell")
    fig, ax = _subplots(figsize=(6, 4))
    for model in sorted(cells["model"].unique().to_list()):
        sub = cells.filter(pl.col("model") == model)
        ax.scatter(sub["tokens_per_trajectory"].to_list(), sub["G"].to_list(), label=model, s=24)
        for a, x, y in sub.select("arch", "tokens_per_trajectory", "G").iter_rows():
            if x is not None and y is not None:
                ax.annotate(a, (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
    ax.set_xlabel("generation tokens per trajectory")
    ax.set_ylabel("G (%)")
    ax.legend(fontsize=7)
    return _png(fig)


def precursor_png(audit: pl.DataFrame) -> bytes:
    """Table 3 (lower): share of first contradictions per possible precursor origin (scope all)."""
    rows = audit.filter((pl.col("row_kind") == "summary") & (pl.col("scope") == "all"))
    fig, ax = _subplots(figsize=(6, 3))
    ax.barh(rows["origin"].to_list(), rows["pct"].fill_null(0).to_list(), color="#4c72b0")
    ax.set_xlabel("% of first contradictions")
    ax.invert_yaxis()
    return _png(fig)


def family_models_png(source_family: pl.DataFrame) -> bytes:
    """Fig. 5: per-model C_obs by source family (KM pooled over architectures) with 95 % intervals."""
    rows = source_family.filter(pl.col("row_kind") == "model_family")
    families = sorted(rows["source_family"].unique().to_list())
    models = sorted(rows["model"].unique().to_list())
    fig, ax = _subplots(figsize=(1.5 + 0.6 * len(models) * max(len(families), 1) / 2, 3.5))
    width = 0.8 / max(len(families), 1)
    for i, fam in enumerate(families):
        sub = {r["model"]: r for r in rows.filter(pl.col("source_family") == fam).iter_rows(named=True)}
        xs = np.arange(len(models)) + i * width
        ys = [sub.get(m, {}).get("C_obs") for m in models]
        lo = [sub.get(m, {}).get("C_obs_lo") for m in models]
        hi = [sub.get(m, {}).get("C_obs_hi") for m in models]
        y = np.array([np.nan if v is None else v for v in ys])
        err = np.array([[0 if (v is None or a is None) else v - a for v, a in zip(ys, lo)],
                        [0 if (v is None or b is None) else b - v for v, b in zip(ys, hi)]])
        ax.bar(xs, y, width, yerr=err, label=fam, capsize=2)
    ax.set_xticks(np.arange(len(models)) + 0.4 - width / 2, models, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("C_obs (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    return _png(fig)


def full_horizon_png(contrasts: pl.DataFrame) -> bytes:
    """Fig. 10: full-horizon paired contrasts (ΔC, ΔR) per model group."""
    rows = contrasts.filter(pl.col("scope") == "group")
    groups = sorted(rows["model_group"].unique().to_list())
    names = list(dict.fromkeys(rows["contrast"].to_list()))
    fig, axes = _subplots(1, 2, figsize=(9, 3), sharey=True)
    for ax, metric in zip(axes, ("delta_C", "delta_R")):
        width = 0.8 / max(len(groups), 1)
        for i, g in enumerate(groups):
            sub = {r["contrast"]: r[metric] for r in rows.filter(pl.col("model_group") == g).iter_rows(named=True)}
            ax.barh(np.arange(len(names)) + i * width, [sub.get(n) or 0.0 for n in names], width, label=g)
        ax.set_yticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=8)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(metric.replace("delta_", "Δ"))
    axes[0].legend(fontsize=7)
    return _png(fig)
