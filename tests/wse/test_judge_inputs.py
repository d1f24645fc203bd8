"""Judges see what the paper's judges see (issue 22): the day markers of the trajectory
("Step k (day d)", as the generation roles saw it — temporal conflicts are the largest category),
the consistency rules of §3.3 (style, plausibility, repetition are not contradictions; the
contradicted commitment may be in the current narrative, Table 6), and the richness rule
(consequential developments only; length and stylistic elaboration do not count)."""
from __future__ import annotations

import polars as pl

from tests.wse._wse_sim_helpers import make_seed, make_settings, prompt_text
from wse_platform.wse.judges import consistency_request, judged_trajectories, richness_request
from wse_platform.wse.schemas import consistency_verdict_model


def _trajectory():
    seed = make_seed("A")                        # starts on day 0
    steps = pl.DataFrame({"seed_id": ["seed-A"] * 4, "step": [1, 2, 3, 4],
                          "player_option": ["p1", "p2", "p3", "p4"], "narrative": ["n1", "n2", "n3", "n4"],
                          "new_day": [False, True, False, True]})
    trajs = pl.DataFrame({"model": ["m"], "arch": ["B1"], "seed_id": ["seed-A"], "length": [4],
                          "generation_version": ["g"]})
    (t,) = judged_trajectories(steps, trajs, {"seed-A": seed})
    return t


def test_judges_see_the_day_of_every_step(tmp_path):
    settings = make_settings(tmp_path)
    t = _trajectory()
    assert [s.day for s in t.steps] == [0, 1, 1, 2]       # the new-day flag moves its own step to the next day
    cons = prompt_text(consistency_request(settings, settings.wse.consistency_judge, t, 4, 0))
    for head in ("Step 1 (day 0). Player: p1", "Step 2 (day 1). Player: p2", "Step 3 (day 1). Player: p3",
                 "Step 4 (day 2). Player: p4"):
        assert head in cons
    rich = prompt_text(richness_request(settings, settings.wse.richness_judge, t, 0))
    assert "Step 2 (day 1). Player: p2" in rich and "Step 4 (day 2). Player: p4" in rich
    assert "(day d)" in cons                              # the prompt says what the marker means


def test_consistency_prompt_states_what_is_not_a_contradiction_and_allows_the_current_step(tmp_path):
    settings = make_settings(tmp_path)
    system = consistency_request(settings, settings.wse.consistency_judge, _trajectory(), 2, 0).messages[0]["content"]
    low = system.lower()
    assert "style, plausibility, repetition and progress" in low and "none of them is a contradiction" in low
    assert "what the current step itself has already established" in low
    assert "this may be the current step" in low
    # the verdict schema accepts the current step as the contradicted commitment's step
    v = consistency_verdict_model(3)(verdict="inconsistent", prior_fact="x", prior_source="narrative", prior_step=3,
                                     conflicting_claim="y", exclusion_reason="z", missing_transition="w",
                                     category="temporal")
    assert v.prior_step == 3


def test_richness_prompt_counts_only_consequential_developments(tmp_path):
    settings = make_settings(tmp_path)
    system = richness_request(settings, settings.wse.richness_judge, _trajectory(), 0).messages[0]["content"]
    low = system.lower()
    assert "consequential development only" in low
    assert "repetition, stylistic elaboration and the length of the text do not count" in low
