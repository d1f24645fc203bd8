"""Is a configuration below its profile's scale, and which keys make it so?

`profile: paper` is meant to be the papers' designs; a key set explicitly in the config file wins
over the profile, so a leftover demo value (2 steps instead of 20, K = 2 instead of 100, a token
budget that truncates a real model) silently shrinks the experiment. `below_scale` compares the
effective settings with what the profile alone gives (the profile's values over the config classes'
defaults) and names every key that keeps the run smaller, e.g.
`wse.horizon = 2 (paper: 20)`. `wse plan` and `wse status` print it.
"""
from __future__ import annotations

from typing import Any

from wse_platform.config import EndingsConfig, NCPConfig, Settings, WSEConfig, profile_scale

# The papers' judge panels: three judge models per WSE-bench verdict.
PAPER_PANEL_SIZE = 3


def _target(section_cls: type, profile: str, section: str) -> Any:
    values = dict((profile_scale(profile) or {}).get(section, {}))
    return section_cls(**values)


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return "all" if v is None else str(v)


def _at_least(key: str, have: int | None, want: int | None, profile: str, out: list[str]) -> None:
    """`None` means unlimited (all): below when the target is unlimited and we are not."""
    if want is None:
        if have is not None:
            out.append(f"{key} = {have} ({profile}: all)")
    elif have is not None and have < want:
        out.append(f"{key} = {have} ({profile}: {want})")


def _superset(key: str, have: list[str], want: list[str], profile: str, out: list[str]) -> None:
    missing = [x for x in want if x not in have]
    if missing:
        out.append(f"{key} = {_fmt(have)} ({profile}: all {len(want)}, missing {len(missing)})")


def _ids(key: str, count_key: str, have: list[str] | None, want_n: int | None, profile: str,
         out: list[str]) -> None:
    if have is not None and (want_n is None or len(have) < want_n):
        out.append(f"{key} = {_fmt(have)} (runs {len(have)}; {profile}: the first {_fmt(want_n)} by {count_key})")


def below_scale(settings: Settings) -> list[str]:
    """One entry per key that keeps `settings` below its profile's scale (empty: at scale)."""
    profile = settings.profile
    out: list[str] = []
    w, tw = settings.wse, _target(WSEConfig, profile, "wse")
    if w.models:
        _superset("wse.architectures", w.architectures, tw.architectures, profile, out)
        _at_least("wse.n_seeds", w.n_seeds, tw.n_seeds, profile, out)
        _ids("wse.seed_ids", "wse.n_seeds", w.seed_ids, tw.n_seeds, profile, out)
        _at_least("wse.horizon", w.horizon, tw.horizon, profile, out)
        _at_least("wse.bootstrap_draws", w.bootstrap_draws, tw.bootstrap_draws, profile, out)
        for role, want in tw.budgets.items():
            have = w.budgets.get(role, want)
            if have < want:
                out.append(f"wse.budgets.{role} = {have} tokens ({profile}: {want})")
        if profile == "paper":
            for name, panel in (("consistency", w.consistency_judges), ("richness", w.richness_judges)):
                if panel is not None and panel.count < PAPER_PANEL_SIZE:
                    out.append(f"wse.{name}_judges: a panel of {panel.count} (paper: {PAPER_PANEL_SIZE} judge models; "
                               "list them in the config)")
    n, tn = settings.ncp, _target(NCPConfig, profile, "ncp")
    if n.narrators:
        _superset("ncp.architectures", n.architectures, tn.architectures, profile, out)
        _at_least("ncp.t_max", n.t_max, tn.t_max, profile, out)
        _at_least("ncp.n_specs", n.n_specs, tn.n_specs, profile, out)
        _ids("ncp.spec_ids", "ncp.n_specs", n.spec_ids, tn.n_specs, profile, out)
        _at_least("ncp.n_extraction_specs", n.n_extraction_specs, tn.n_extraction_specs, profile, out)
        _at_least("ncp.sampling.max_tokens", n.sampling.max_tokens, tn.sampling.max_tokens, profile, out)
        if n.extraction_models:
            _at_least("ncp.extraction_sampling.max_tokens", n.extraction_sampling.max_tokens,
                      tn.extraction_sampling.max_tokens, profile, out)
    e, te = settings.endings, _target(EndingsConfig, profile, "endings")
    if e.forecaster:
        _at_least("endings.k", e.k, te.k, profile, out)
        if e.position_stride is not None and te.position_stride is not None and e.position_stride > te.position_stride:
            out.append(f"endings.position_stride = {e.position_stride} ({profile}: {te.position_stride})")
        _at_least("endings.max_positions_per_story", e.max_positions_per_story, te.max_positions_per_story,
                  profile, out)
        _at_least("endings.max_human_stories", e.max_human_stories, te.max_human_stories, profile, out)
        if e.generators:
            _superset("endings.pipelines", e.pipelines, te.pipelines, profile, out)
            _at_least("endings.n_ideas", e.n_ideas, te.n_ideas, profile, out)
            _at_least("endings.story_sampling.max_tokens", e.story_sampling.max_tokens,
                      te.story_sampling.max_tokens, profile, out)
        if (e.min_words, e.max_words) != (te.min_words, te.max_words):
            out.append(f"endings.min_words..max_words = {e.min_words}..{e.max_words} "
                       f"({profile}: {te.min_words}..{te.max_words})")
    return out


def scale_note(settings: Settings) -> str | None:
    """A short paragraph for `wse plan` / `wse status`, or None when at the profile's scale."""
    keys = below_scale(settings)
    if not keys:
        return None
    where = settings.source_file or "the config"
    return (f"below {settings.profile} scale: {len(keys)} key(s) in {where} keep this run smaller than "
            f"profile {settings.profile}:\n" + "\n".join(f"  {k}" for k in keys)
            + "\n  (delete a key from the config to get the profile's value)")
