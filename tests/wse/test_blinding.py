"""Judges never see a source-revealing identifier: no title, author or source name of any of the 9 worlds."""
from __future__ import annotations

import re

import pytest

from tests.wse._wse_sim_helpers import prompt_text
from wse_platform.config import settings_from_dict
from wse_platform.wse.judges import (
    JudgedTrajectory,
    NarratedStep,
    consistency_request,
    neutral_world_label,
    richness_request,
)
from wse_platform.wse.seeds import build_episode_seeds
from wse_platform.wse.worlds import load_initial_worlds

AUTHORS = ("Ibsen", "Chekhov", "Чехов", "Shakespeare", "Strindberg")
SOURCES = ("DraCor", "Smallville", "Into the Painting", "ITP", "The Ville")


@pytest.fixture(scope="module")
def worlds_and_seeds():
    worlds = load_initial_worlds()
    return worlds, build_episode_seeds(worlds)


def _settings():
    return settings_from_dict({"models": {"j": {"backend": "embedded", "model_id": "j.gguf"}},
                               "wse": {"consistency_judges": [{"model": "j"}, {"model": "j", "label": "b"}],
                                       "richness_judge": {"model": "j"}}})


def _found(term: str, text: str) -> bool:
    if re.match(r"\w", term) and term.isascii():
        return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.I) is not None
    return term.casefold() in text.casefold()


def test_no_judge_request_names_a_title_author_or_source(worlds_and_seeds):
    worlds, seeds = worlds_and_seeds
    titles = [w.title for w in worlds]
    assert len(titles) == 9
    s = _settings()
    labels = {}
    for seed in seeds:
        # the model's narratives may name the source too: the judges' view scrubs them as well
        steps = tuple(NarratedStep(k, f"Go to {seed.world_title}", f"As in {seed.world_title} by Shakespeare, "
                                   f"a DraCor play.") for k in (1, 2))
        t = JudgedTrajectory(model="m", arch="B1", seed=seed, steps=steps)
        text = "\n".join(prompt_text(r) for r in (consistency_request(s, s.wse.consistency_judges, t, 2, 0),
                                                  consistency_request(s, s.wse.consistency_judges, t, 2, 1),
                                                  richness_request(s, s.wse.richness_judge, t, 0)))
        cast = [c.name.casefold() for c in seed.cast]
        for term in (*titles, *AUTHORS, *SOURCES):
            if any(term.casefold() in n for n in cast):
                continue        # a character's own name (e.g. Hamlet) must stay visible
            assert not _found(term, text), (seed.seed_id, term)
        label = neutral_world_label(seed)
        assert f"World: {label}" in text
        labels.setdefault(seed.world_id, label)
    assert len(set(labels.values())) == 9          # one distinct neutral label per world


def test_a_title_that_is_a_cast_name_stays_a_name(worlds_and_seeds):
    _, seeds = worlds_and_seeds
    s = _settings()
    for seed in seeds:
        names = [c.name for c in seed.cast]
        t = JudgedTrajectory(model="m", arch="B1", seed=seed, steps=(NarratedStep(1, "a", "b"),))
        text = prompt_text(consistency_request(s, s.wse.consistency_judges, t, 1, 0))
        assert all(n in text for n in names), seed.seed_id
