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
    blinded_view,
    neutral_world_label,
    richness_request,
    title_names_a_character,
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
            if term == seed.world_title and title_names_a_character(seed):
                continue        # "King Lear" names the king in the world's own text: it stays (below)
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


def test_blinding_keeps_a_title_that_names_a_character_and_neutralises_source_wording(worlds_and_seeds):
    """Issue 22: "King Lear" names the king ("Enter King Lear", "King Lear's palace") even in a seed
    whose cast lacks Lear: it stays; our own wording that gives the source family away (on stage
    together, scenes, the act/scene time label, "a character in <play>", "The simulation starts")
    reaches judges as neutral wording with the same content."""
    import json
    _, seeds = worlds_and_seeds
    lear = next(s for s in seeds if s.world_title == "King Lear" and "Lear" not in [c.name for c in s.cast])
    assert title_names_a_character(lear)
    view = json.dumps(blinded_view(lear, [NarratedStep(1, "Bow.", "King Lear frowns at Cordelia.")]),
                      ensure_ascii=False)
    assert "King Lear frowns at Cordelia." in view and "Enter King Lear" in view
    assert "King Lear's palace" in view
    giveaways = ("on stage", "scene", "ACT 1", "a character in", "simulation", "på scenen", "på scenen",
                 "сцене вместе", "scener:", "Akten")
    for seed in seeds:
        text = json.dumps(blinded_view(seed, []), ensure_ascii=False)
        for g in giveaways:
            assert g.casefold() not in text.casefold() or g == "scene" and seed.world_id == "dracor_vishnevyi_sad", \
                (seed.seed_id, g)
        if seed.source_family == "dracor":
            raw = json.dumps(seed.judge_view(), ensure_ascii=False)
            n_met = raw.count("(scenes: ") + raw.count("(scener: ") + raw.count("(opptrinn: ") + raw.count("(сцен: ")
            assert text.count("(occasions: ") + text.count("(gånger: ") + text.count("(ganger: ") \
                + text.count("(раз: ") == n_met                      # the content (how often they met) stays
    ville = next(s for s in seeds if s.world_id == "smallville")
    assert "The story starts on" in json.dumps(blinded_view(ville, []))
    assert not title_names_a_character(ville)                       # a place name, scrubbed as before


def test_cached_blinding_gives_the_same_view_and_requests_as_computing_it_afresh(worlds_and_seeds):
    """Issue 24: the blinding of a seed's world and of each step is computed once per process
    (`_SeedBlinding`); the views and the judges' prompts are those computed from scratch, for every
    world (narratives naming the title, an author, a source), a returned view is the caller's own,
    and a seed whose content changed gets its own blinding."""
    from wse_platform.prompts import get_prompt
    from wse_platform.wse.agents import language_name
    from wse_platform.wse.judges import _blinded_view_uncached, _render_steps, _render_world
    _, seeds = worlds_and_seeds
    s = _settings()
    panel = s.wse.consistency_judges
    for seed in seeds:
        steps = tuple(NarratedStep(k, f"Go to {seed.world_title} ({k})", f"As in {seed.world_title} by Shakespeare,"
                                   f" a DraCor play; Ibsen smiles.", day=k if k > 1 else None) for k in (1, 2, 3))
        for upto in (0, 2, 3):
            assert blinded_view(seed, steps[:upto]) == _blinded_view_uncached(seed, steps[:upto]), seed.seed_id
        t = JudgedTrajectory(model="m", arch="B1", seed=seed, steps=steps)
        view = _blinded_view_uncached(seed, steps[:2])
        prompt = get_prompt("wse.consistency_judge", panel.members[0].prompt_version, s.prompts_dir)
        expected = prompt.render(language=language_name(view["language"]), world=_render_world(view),
                                 opening=view["opening"], history=_render_steps(view["steps"][:-1]), step=2,
                                 current=_render_steps(view["steps"][-1:]))
        assert consistency_request(s, panel, t, 2, 0).messages == expected
        full = _blinded_view_uncached(seed, steps)
        prompt = get_prompt("wse.richness_judge", s.wse.richness_judge.members[0].prompt_version, s.prompts_dir)
        assert richness_request(s, s.wse.richness_judge, t, 0).messages == prompt.render(
            language=language_name(full["language"]), world=_render_world(full), opening=full["opening"],
            n_steps=3, trajectory=_render_steps(full["steps"]))
    seed = seeds[0]
    mine = blinded_view(seed, [NarratedStep(1, "a", "b")])
    mine["initial_world"]["characters"][0]["name"] = "changed"
    mine["steps"][0]["narrative"] = "changed"
    assert blinded_view(seed, [NarratedStep(1, "a", "b")]) == _blinded_view_uncached(seed, [NarratedStep(1, "a", "b")])
    edited = seed.model_copy(update={"opening": seed.opening + f" {seed.world_title} by Chekhov."})
    assert blinded_view(edited, []) == _blinded_view_uncached(edited, [])
    assert blinded_view(edited, [])["opening"] != blinded_view(seed, [])["opening"]


def test_the_blinding_is_computed_once_per_seed_not_per_judge_request(worlds_and_seeds, monkeypatch):
    """Issue 24: the neutral rewriting of a seed's world ran for every judge request (three members
    per step, every step, the richness panel, the replay): now once per seed and process."""
    from wse_platform.wse import judges
    _, seeds = worlds_and_seeds
    seed = seeds[3].model_copy(update={"opening": seeds[3].opening + " (a fresh copy)"})   # not cached yet
    calls = []
    real = judges._neutral_rewriter
    monkeypatch.setattr(judges, "_neutral_rewriter", lambda s: calls.append(s.seed_id) or real(s))
    s = _settings()
    steps = tuple(NarratedStep(k, f"act {k}", f"In {seed.world_title}, step {k}.") for k in (1, 2, 3))
    t = JudgedTrajectory(model="m", arch="B1", seed=seed, steps=steps)
    for k in (1, 2, 3):
        for j in (0, 1):
            consistency_request(s, s.wse.consistency_judges, t, k, j)
    richness_request(s, s.wse.richness_judge, t, 0)
    assert calls == [seed.seed_id], calls   # was 2 per request (the view and the title check): 14;
    # then 2 per seed (the title check and the view each rewrote it): once now
