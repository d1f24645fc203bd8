"""Paper scale is one switch: the shipped wse.yaml holds models and roles, the quick demo's scale
lives in its profile file, and `below_scale` names every key that keeps a run smaller."""
from __future__ import annotations

import yaml

from wse_platform.config import (DEFAULT_CONFIG, NCP_ARCHITECTURES, WSE_ARCHITECTURES, WSE_ROLE_BUDGETS,
                                 settings_from_dict)
from wse_platform.scale import below_scale, scale_note


def _shipped(**top) -> dict:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    raw.update(top)
    return raw


def test_switching_the_shipped_config_to_paper_gives_the_papers_scale():
    s = settings_from_dict(_shipped(profile="paper"), str(DEFAULT_CONFIG))
    assert s.wse.architectures == list(WSE_ARCHITECTURES) and s.wse.seed_ids is None
    assert (s.wse.n_seeds, s.wse.horizon, s.wse.budgets) == (42, 20, WSE_ROLE_BUDGETS)
    assert s.ncp.architectures == list(NCP_ARCHITECTURES) and s.ncp.spec_ids is None
    assert (s.ncp.n_specs, s.ncp.sampling.max_tokens, s.ncp.extraction_sampling.max_tokens) == (100, 8092, 8092)
    assert (s.endings.k, s.endings.position_stride, s.endings.max_positions_per_story) == (100, 1, None)
    assert (s.endings.min_words, s.endings.max_words, s.endings.story_sampling.max_tokens) == (500, 5000, 4000)
    assert len(s.endings.pipelines) == 3
    # what stays below the paper is a model choice the profile cannot make: the judge panels
    assert below_scale(s) == [
        "wse.consistency_judges: a panel of 1 (paper: 3 judge models; list them in the config)",
        "wse.richness_judges: a panel of 1 (paper: 3 judge models; list them in the config)"]


def test_the_shipped_config_runs_the_quick_demo_scale_from_its_profile():
    s = settings_from_dict(_shipped(), str(DEFAULT_CONFIG))
    assert s.profile == "quick" and below_scale(s) == [] and scale_note(s) is None
    assert (s.wse.architectures, s.wse.seed_ids, s.wse.horizon) == (["B1"], ["dracor_hamlet-01"], 2)
    assert (s.ncp.architectures, s.ncp.spec_ids, s.ncp.t_max) == (["baseline+adversarial"], ["movie26"], 1)
    assert (s.endings.k, s.endings.max_positions_per_story, s.endings.pipelines) == (2, 1, ["vanilla", "beats"])
    assert s.wse.budgets["story_agent"] == 500 and s.ncp.sampling.max_tokens == 256
    # the demo profile's values the quick file does not set still apply
    assert s.wse.bootstrap_draws == 200 and s.endings.position_stride == 4


def test_a_count_set_in_the_config_drops_the_profiles_id_list():
    raw = _shipped()
    raw["wse"]["n_seeds"] = 3
    raw["ncp"]["n_specs"] = 2
    s = settings_from_dict(raw, str(DEFAULT_CONFIG))
    assert (s.wse.n_seeds, s.wse.seed_ids, s.ncp.n_specs, s.ncp.spec_ids) == (3, None, 2, None)


def test_explicit_demo_values_under_the_paper_profile_are_named():
    raw = _shipped(profile="paper")
    raw["wse"].update(horizon=2, architectures=["B1"], budgets={"story_agent": 500})
    raw["ncp"].update(t_max=1, spec_ids=["movie26"])
    raw["endings"].update(k=2, min_words=100)
    note = scale_note(settings_from_dict(raw, "/x/wse.yaml"))
    for line in ("wse.horizon = 2 (paper: 20)", "wse.architectures = [B1] (paper: all 12, missing 11)",
                 "wse.budgets.story_agent = 500 tokens (paper: 2048)", "ncp.t_max = 1 (paper: 100)",
                 "ncp.spec_ids = [movie26] (runs 1; paper: the first 100 by ncp.n_specs)", "endings.k = 2 (paper: 100)",
                 "endings.min_words..max_words = 100..5000 (paper: 500..5000)"):
        assert line in note, line
    assert note.startswith("below paper scale: ") and "/x/wse.yaml" in note
