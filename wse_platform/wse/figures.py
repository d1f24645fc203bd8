"""WSE-bench appendix figures (issue 22): Fig. 7 (C_obs vs C_adj), Fig. 9 (horizon sensitivity),
Fig. 11 bars (within-model % changes), Fig. 12 (generation outcomes), Fig. 13 (finite-horizon
survival), Fig. 14 (scaling), Fig. 15 (leave one DraCor play out). Each returns PNG bytes; the
assets attach them (`assets/wse/tables.py`). Pure functions of the stored tables.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from wse_platform.config import WSE_ARCHITECTURES
from wse_platform.metrics.wse import consistency_curve, pareto
from wse_platform.plotting import no_data_note as _no_data
from wse_platform.plotting import whole_number_ticks
from wse_platform.wse.architecture import FAILURE_COMPONENTS
from wse_platform.wse.plots import _png, _subplots

MIN_AT_RISK = 30   # Figs. 13 / 14: fewer trajectories at risk are drawn dotted / as open markers


def _num(v) -> float:
    """A table value for plotting: NULL becomes NaN (a gap, not an error)."""
    return float("nan") if v is None else float(v)


def _pareto_counts(cells: pl.DataFrame, axis: str) -> tuple[set, set]:
    ok = cells.filter(pl.col(axis).is_not_null() & pl.col("R").is_not_null() & pl.col(axis).is_not_nan())
    keys = list(ok.select("model", "arch").iter_rows())
    status = pareto(list(zip(ok[axis].to_list(), ok["R"].to_list())))
    return ({k for k, p in zip(keys, status) if p.non_dominated}, {k for k, p in zip(keys, status) if p.supported})


def fig7_png(cells: pl.DataFrame) -> bytes:
    """Fig. 7: (a) C_obs against C_adj per cell, (b) their difference by architecture, (c) the
    difference against G; the title gives how many cells coincide and the non-dominated /
    supported cell counts under each axis (the paper's "same six-cell set, two supported")."""
    fig, axes = _subplots(1, 3, figsize=(13, 4))
    ok = cells.filter(pl.col("C_obs").is_not_null() & pl.col("C_adj").is_not_null())
    if ok.is_empty():
        for ax in axes:
            _no_data(ax, "no cell has both C_obs and C_adj")
        return _png(fig)
    diff = (ok["C_obs"] - ok["C_adj"]).to_numpy()
    axes[0].scatter(ok["C_adj"].to_list(), ok["C_obs"].to_list(), s=14)
    axes[0].plot([0, 100], [0, 100], "--", color="gray", lw=0.8)
    axes[0].set_xlabel("C_adj")
    axes[0].set_ylabel("C_obs")
    archs = [a for a in WSE_ARCHITECTURES if a in set(ok["arch"].to_list())]
    axes[1].boxplot([diff[(ok["arch"] == a).to_numpy()] for a in archs])
    axes[1].set_xticks(range(1, len(archs) + 1), archs, rotation=60, fontsize=7)
    axes[1].set_ylabel("C_obs − C_adj")
    axes[2].scatter(ok["G"].to_list(), diff, s=14)
    axes[2].set_xlabel("G (%)")
    axes[2].set_ylabel("C_obs − C_adj")
    nd_a, sup_a = _pareto_counts(cells, "C_adj")
    nd_o, sup_o = _pareto_counts(cells, "C_obs")
    same = "same" if nd_a == nd_o else "different"
    fig.suptitle(f"C_obs = C_adj in {int(np.isclose(diff, 0).sum())} of {ok.height} cells; non-dominated: "
                 f"{len(nd_a)} on C_adj, {len(nd_o)} on C_obs ({same} set); supported: {len(sup_a)} / {len(sup_o)}",
                 fontsize=9)
    return _png(fig)


def _survival_curves(g: pl.DataFrame, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P(L ≥ t), KM S(t), Y_t) for t = 1..H of one set of trajectories."""
    lengths = np.array(g["length"].to_list(), float)
    gen = np.array([(lengths >= t).mean() for t in range(1, horizon + 1)]) if len(lengths) else np.full(horizon, np.nan)
    y, _, s = consistency_curve(g["length"].to_list(), g["first_contradiction"].to_list(), horizon,
                                g["censored_at"].to_list())
    return gen, s, y


def fig9_png(frame: pl.DataFrame, horizon: int, groups: Mapping[str, Sequence[str]],
             sensitivity: pl.DataFrame | None = None) -> bytes:
    """Fig. 9: per model group, (a) equal-model mean generation P(L ≥ t), (b) equal-model mean
    contradiction-free survival, (c) timing of the first contradictions observed by H, (d) the
    normalised summaries G_h and C_obs(h) at h = 5, 10, 15, 20 (`wse_horizon_sensitivity`)."""
    fig, axes = _subplots(1, 4, figsize=(16, 3.6))
    if frame.is_empty():
        for ax in axes:
            _no_data(ax, "no judged trajectory")
        return _png(fig)
    t = np.arange(1, horizon + 1)
    for name, models in groups.items():
        curves = [_survival_curves(frame.filter(pl.col("model") == m), horizon) for m in models
                  if frame.filter(pl.col("model") == m).height]
        if not curves:
            continue
        axes[0].step(t, np.nanmean([c[0] for c in curves], axis=0), where="post", label=name)
        axes[1].step(t, np.nanmean([c[1] for c in curves], axis=0), where="post", label=name)
        firsts = frame.filter(pl.col("model").is_in(list(models)) & pl.col("contradiction_observed"))
        axes[2].hist(firsts["first_contradiction"].to_list(), bins=np.arange(0.5, horizon + 1.5), alpha=0.6,
                     label=name)
    if sensitivity is not None and sensitivity.height:
        scope = "group" if (sensitivity["scope"] == "group").any() else "all"
        rows = sensitivity.filter(pl.col("scope") == scope)
        for label in sorted({g or "all" for g in rows["model_group"].to_list()}):
            g = rows.filter(pl.col("model_group").fill_null("all") == label).sort("h")
            axes[3].plot(g["h"].to_list(), [_num(v) for v in g["G_h"].to_list()], "o-", label=f"{label} G_h")
            axes[3].plot(g["h"].to_list(), [_num(v) for v in g["C_obs_h"].to_list()], "s--",
                         label=f"{label} C_obs(h)")
    titles = ("(a) generation P(L ≥ t)", "(b) contradiction-free S(t)", "(c) first contradictions by step",
              "(d) summaries at h")
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=9)
        whole_number_ticks(ax.xaxis)
        ax.legend(fontsize=6)
    axes[0].set_ylim(0, 1.02)
    axes[1].set_ylim(0, 1.02)
    return _png(fig)


def fig11_png(costs: pl.DataFrame) -> bytes:
    """Fig. 11: within-model percentage changes of generation tokens per trajectory and of G per
    architecture contrast, averaged over the models of each group (scope=group rows)."""
    rows = costs.filter((pl.col("row_kind") == "contrast") & (pl.col("scope") == "group"))
    fig, axes = _subplots(1, 2, figsize=(10, 3.2), sharey=True)
    if rows.is_empty():
        for ax in axes:
            _no_data(ax, "no architecture contrast")
        return _png(fig)
    names = list(dict.fromkeys(rows["contrast"].to_list()))
    groups = sorted(rows["model_group"].unique().to_list())
    width = 0.8 / max(len(groups), 1)
    for ax, col, title in zip(axes, ("pct_tokens_per_trajectory", "pct_G"), ("tokens / trajectory", "G")):
        for i, grp in enumerate(groups):
            sub = {r["contrast"]: r[col] for r in rows.filter(pl.col("model_group") == grp).iter_rows(named=True)}
            ax.barh(np.arange(len(names)) + i * width, [sub.get(n) or 0.0 for n in names], width, label=grp)
        ax.set_yticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=8)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(f"% change in {title}", fontsize=9)
    axes[0].legend(fontsize=7)
    return _png(fig)


def fig12_png(frame: pl.DataFrame, horizon: int) -> bytes:
    """Fig. 12: per model, the planned trajectories split into full horizon, accepted story ending,
    and technical failures by component (each bar = all the model's trajectories)."""
    fig, ax = _subplots(figsize=(8, 3.8))
    if frame.is_empty():
        _no_data(ax, "no trajectory")
        return _png(fig)
    models = sorted(frame["model"].unique().to_list())
    parts: dict[str, list[float]] = {k: [] for k in ("full horizon", "story ending", *FAILURE_COMPONENTS, "other")}
    for m in models:
        g = frame.filter(pl.col("model") == m)
        full = g.filter((pl.col("length") == horizon) & pl.col("failure_component").is_null())
        ending = g.filter(pl.col("end_kind").is_not_null() & (pl.col("length") < horizon))
        counts = {"full horizon": full.height, "story ending": ending.height,
                  **{c: g.filter(pl.col("failure_component") == c).height for c in FAILURE_COMPONENTS}}
        counts["other"] = g.height - sum(counts.values())
        for k in parts:
            parts[k].append(100.0 * counts[k] / g.height)
    left = np.zeros(len(models))
    for k, vals in parts.items():
        if any(vals):
            ax.barh(models, vals, left=left, label=k)
            left += np.array(vals)
    ax.set_xlabel("% of planned trajectories")
    ax.legend(fontsize=6, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return _png(fig)


def fig13_png(frame: pl.DataFrame, horizon: int, models: Sequence[str] | None = None) -> bytes:
    """Fig. 13: per model, (a) the probability of generating through step t and (b) contradiction-
    free survival (technical stops right-censored); dotted where fewer than 30 trajectories are at
    risk."""
    fig, axes = _subplots(1, 2, figsize=(11, 3.8), sharey=True)
    models = list(models) if models else sorted(frame["model"].unique().to_list()) if frame.height else []
    t = np.arange(1, horizon + 1)
    for m in models:
        g = frame.filter(pl.col("model") == m)
        if g.is_empty():
            continue
        gen, s, y = _survival_curves(g, horizon)
        at_risk_gen = np.array([(np.array(g["length"].to_list()) >= k).sum() for k in t])
        for ax, curve, risk in ((axes[0], gen, at_risk_gen), (axes[1], s, y)):
            line = ax.step(t, curve, where="post", label=m)[0]
            thin = risk < MIN_AT_RISK
            if thin.any():   # redraw the thin tail dotted
                line.set_data(t[~thin], curve[~thin])
                k0 = max(int(np.argmax(thin)) - 1, 0)
                ax.step(t[k0:], curve[k0:], where="post", ls=":", color=line.get_color())
    if not models:
        for ax in axes:
            _no_data(ax, "no trajectory")
        return _png(fig)
    axes[0].set_title("(a) generating through step t", fontsize=9)
    axes[1].set_title(f"(b) contradiction-free S(t); dotted: < {MIN_AT_RISK} at risk", fontsize=9)
    for ax in axes:
        ax.set_ylim(0, 1.02)
        whole_number_ticks(ax.xaxis)
        ax.set_xlabel("step t")
    axes[0].legend(fontsize=6)
    return _png(fig)


def fig14_png(cells: pl.DataFrame, frame: pl.DataFrame, horizon: int, fits: pl.DataFrame,
              model_params: Mapping[str, tuple[float | None, str | None]]) -> bytes:
    """Fig. 14: model means of G, C_obs and R against log2 parameters with the fitted lines
    (`wse_scaling_fit`, fit=all); open markers where fewer than 30 trajectories are at risk at H."""
    fig, axes = _subplots(1, 3, figsize=(13, 3.6))
    means = cells.group_by("model").agg(pl.col("G").mean(), pl.col("C_obs").mean(), pl.col("R").mean())
    pts = [(r["model"], model_params.get(r["model"], (None, None))[0], r) for r in means.iter_rows(named=True)]
    pts = [(m, p, r) for m, p, r in pts if p]
    if not pts:
        for ax in axes:
            _no_data(ax, "no model with a parameter count (models.<name>.params_b)")
        return _png(fig)
    for ax, metric in zip(axes, ("G", "C_obs", "R")):
        for m, p, r in pts:
            if r[metric] is None or np.isnan(r[metric]):
                continue   # no value for this model (e.g. every richness verdict failed)
            g = frame.filter(pl.col("model") == m)
            y = _survival_curves(g, horizon)[2] if g.height else np.zeros(horizon)
            open_marker = y[-1] < MIN_AT_RISK
            ax.plot(np.log2(p), r[metric], "o", mfc="none" if open_marker else None, color="tab:blue")
            ax.annotate(m, (np.log2(p), r[metric]), fontsize=6, xytext=(2, 2), textcoords="offset points")
        fit = fits.filter((pl.col("metric") == metric) & (pl.col("fit") == "all")) if fits.height else fits
        for row in fit.iter_rows(named=True):
            xs = np.linspace(min(np.log2(p) for _, p, _ in pts), max(np.log2(p) for _, p, _ in pts), 20)
            ax.plot(xs, row["alpha"] + row["beta"] * xs, "-", color="tab:red", lw=1)
        ax.set_xlabel("log2(parameters, billions)")
        ax.set_title(metric, fontsize=9)
    return _png(fig)


def fig15_png(source_family: pl.DataFrame) -> bytes:
    """Fig. 15: the DraCor − ITP and DraCor − Smallville C_obs contrasts (per-model pooled) after
    leaving out each DraCor play, next to the all-plays contrast."""
    rows = source_family.filter((pl.col("row_kind") == "leave_one_play_out_pooled") & pl.col("contrast").is_not_null())
    full = source_family.filter(pl.col("row_kind") == "contrast_pooled")
    fig, ax = _subplots(figsize=(7, 3.6))
    if rows.is_empty():
        _no_data(ax, "fewer than two DraCor plays: no leave-one-play-out rows")
        return _png(fig)
    plays = sorted(rows["dropped_world"].unique().to_list())
    for i, contrast in enumerate(sorted(rows["contrast"].unique().to_list())):
        sub = {r["dropped_world"]: r["C_obs"] for r in rows.filter(pl.col("contrast") == contrast).iter_rows(named=True)}
        ax.plot(np.arange(len(plays)) + 0.15 * i, [_num(sub.get(p)) for p in plays], "o", label=contrast)
        base = full.filter(pl.col("contrast") == contrast)
        if base.height and base["C_obs"][0] is not None:
            ax.axhline(base["C_obs"][0], ls="--", lw=0.8, color=ax.lines[-1].get_color())
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(plays)), [f"without {p}" for p in plays], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("Δ C_obs (DraCor − control)")
    ax.legend(fontsize=7)
    return _png(fig)
