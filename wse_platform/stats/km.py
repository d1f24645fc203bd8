"""Discrete-step Kaplan–Meier helpers for WSE-bench consistency.

Time is the narrative step k = 1..H. A trajectory is *at risk* at step k while it
is still observed (effective length E_i ≥ k) and has not yet contradicted itself
(T_i ≥ k); it has its *event* at k when T_i = k and k is observed. Everything is
written with optional non-negative weights (a bootstrap draw's resampling counts)
and broadcasts over leading axes, so one call handles thousands of draws at once.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NO_EVENT = np.inf  # T_i when a trajectory never has a majority-inconsistent step


def as_event_times(first_contradiction: Sequence[float | int | None] | np.ndarray) -> np.ndarray:
    """None/NaN (no contradiction) -> +inf, so comparisons with step numbers just work."""
    arr = np.array(first_contradiction, dtype=float)  # None -> nan
    return np.where(np.isnan(arr), NO_EVENT, arr)


def risk_and_event_indicators(eff_lengths: np.ndarray, event_times: np.ndarray, horizon: int
                              ) -> tuple[np.ndarray, np.ndarray]:
    """Per-trajectory indicator matrices (…, n, H): at risk at step k, event at step k."""
    steps = np.arange(1, horizon + 1, dtype=float)
    observed = eff_lengths[..., None] >= steps
    at_risk = observed & (event_times[..., None] >= steps)
    event = observed & (event_times[..., None] == steps)
    return at_risk, event


def risk_and_events(eff_lengths: np.ndarray, event_times: np.ndarray, horizon: int,
                    weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Y_k and D_k (k = 1..H). With `weights` of shape (B, n) the result is (B, H)."""
    at_risk, event = risk_and_event_indicators(np.asarray(eff_lengths, float), event_times, horizon)
    if weights is None:
        return at_risk.sum(axis=0).astype(float), event.sum(axis=0).astype(float)
    w = np.asarray(weights, dtype=float)
    return w @ at_risk.astype(float), w @ event.astype(float)


def survival(at_risk: np.ndarray, events: np.ndarray) -> np.ndarray:
    """S(t) = Π_{k ≤ t, Y_k > 0} (1 − D_k / Y_k); steps without support leave S unchanged."""
    hazard = np.divide(events, at_risk, out=np.zeros(np.broadcast_shapes(events.shape, at_risk.shape)),
                       where=at_risk > 0)
    return np.cumprod(1.0 - hazard, axis=-1)


def c_obs_c_adj(at_risk: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C_obs, C_adj) from Y_k, D_k over the last axis (length H).

    C_obs averages S(t) over all H steps, carrying the last estimable value forward;
    C_adj only credits steps that still have trajectories at risk. With no support at
    all (Y_1 = 0: no trajectory has an observed step) nothing is estimable, so C_obs
    is NaN (not the empty-product 100) and C_adj is 0.
    """
    horizon = at_risk.shape[-1]
    s = survival(at_risk, events)
    supported = at_risk > 0
    c_obs = 100.0 / horizon * s.sum(axis=-1)
    c_obs = np.where(supported[..., 0], c_obs, np.nan)
    c_adj = 100.0 / horizon * (s * supported).sum(axis=-1)
    return c_obs, c_adj
