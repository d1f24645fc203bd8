"""Paper Table 2 as the paper runs it: live episodes with each auditor configuration in the loop.

The auditor decides when an episode ends, so the transcript itself depends on it: the paper
plays one cell (one narrator, the adversarial player) once per auditor and reports one row per
auditor. This module plays those episodes; `metrics.ncp.auditor_ablation_table` makes the rows.
The replay of stored transcripts under other auditors (`reaudit.py`) is kept as a second,
cheaper analysis (`ncp_auditor_sensitivity`), not as Table 2.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from wse_platform.ncp.episode import AuditorSetup, EpisodeBatchResult, EpisodeSetup, run_episodes
from wse_platform.ncp.spec import NarrativeSpec


def ablation_auditors(settings: Any) -> list[AuditorSetup]:
    """The distinct auditor configurations of `ncp.ablation` (empty when not configured)."""
    ab = settings.ncp.ablation
    out: dict[str, AuditorSetup] = {}
    for j in (ab.auditors if ab is not None else []):
        a = AuditorSetup.from_judge(j)
        out.setdefault(a.auditor_id, a)
    return list(out.values())


def run_auditor_ablation(client: Any, specs: list[NarrativeSpec], setup: EpisodeSetup,
                         auditors: list[AuditorSetup]) -> dict[str, EpisodeBatchResult]:
    """Play the cell of `setup` once per auditor (same narrator, player, specs, sampling);
    returns the results keyed by auditor id. The rows carry that auditor's id."""
    if setup.arch.player != "adversarial":
        raise ValueError(f"the paper's auditor ablation uses the adversarial player, not {setup.arch.key!r}")
    out: dict[str, EpisodeBatchResult] = {}
    for a in auditors:
        out[a.auditor_id] = run_episodes(client, specs, replace(setup, auditor=a,
                                                                 generation_version=f"{setup.generation_version}"
                                                                                    f":{a.auditor_id}"))
    return out
