"""Log-linear scaling fits Y = α + β·log2(P) within one dense model family (statsmodels OLS).

β is the change in Y per doubling of the parameter count P (given in billions, so α is
the value extrapolated to a 1B-parameter model). Leave-one-out refits show whether a
single model drives the slope.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_MODELS = 3


@dataclass(frozen=True)
class ScalingFit:
    alpha: float
    beta: float
    r2: float
    n: int
    dropped: str | None = None  # model left out (leave-one-out rows)


def fit_log2(params_b: Sequence[float], values: Sequence[float]) -> ScalingFit:
    """OLS of `values` on log2(params_b) with an intercept."""
    p = np.asarray(params_b, dtype=float)
    y = np.asarray(values, dtype=float)
    if p.shape != y.shape or p.ndim != 1:
        raise ValueError(f"fit_log2: params_b and values must be 1-D of equal length ({p.shape} vs {y.shape})")
    if (p <= 0).any() or not np.isfinite(p).all():
        raise ValueError(f"fit_log2: parameter counts must be positive and finite, got {p.tolist()}")
    if len(p) < 2 or len(np.unique(p)) < 2:
        raise ValueError("fit_log2: need at least two distinct parameter counts")
    import statsmodels.api as sm  # imported on use: it dominates the import time of every `wse` command

    x = sm.add_constant(np.log2(p), has_constant="add")
    res = sm.OLS(y, x).fit()
    r2 = float(res.rsquared) if np.ptp(y) > 0 else float("nan")  # constant Y: R² undefined, not -inf
    return ScalingFit(float(res.params[0]), float(res.params[1]), r2, int(res.nobs))


def fit_with_leave_one_out(models: Sequence[str], params_b: Sequence[float], values: Sequence[float]
                           ) -> list[ScalingFit]:
    """The fit on all models, then one refit per left-out model (requires ≥ MIN_MODELS models)."""
    if len(models) < MIN_MODELS:
        return []
    fits = [fit_log2(params_b, values)]
    for i, m in enumerate(models):
        keep = [j for j in range(len(models)) if j != i]
        f = fit_log2([params_b[j] for j in keep], [values[j] for j in keep])
        fits.append(ScalingFit(f.alpha, f.beta, f.r2, f.n, dropped=m))
    return fits
