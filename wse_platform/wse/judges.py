"""WSE-bench judges: blinded views, consistency and richness requests, verdict aggregation.

Judges only ever see `blinded_view(...)`: the seed's start world, opening,
language and the canon narratives with the player's actions — never the model,
architecture, source family, internal agent outputs, memory, failures or costs.

A judge is a panel (`wse.consistency_judges` / `wse.richness_judges`): members of
any models, prompt versions and samplings; every verdict row names its member.
Consistency is judged step by step, each trajectory of a cell on its own
(`wse_platform.flow`: its next step is asked as soon as its panel has voted).
A step's verdict is the valid majority of the
panel (2 of 3) among consistent/inconsistent votes; uncertain votes are kept but
never form a majority. A step whose panel is incomplete (a member's output stayed
invalid) gives no binary verdict either, as in the paper ("missing judge"). The
first majority-inconsistent step is the trajectory's first contradiction T_inc
(judging of that trajectory stops there); a step without a binary verdict censors
the trajectory at the previous step (k - 1), reason missing_judge or no_majority.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

import polars as pl

from wse_platform import flow
from wse_platform.config import JudgePanel, Settings
from wse_platform.llm.types import LLMRequest, LLMResult
from wse_platform.prompts import get_prompt
from wse_platform.wse.agents import language_name, role_sampling
from wse_platform.wse.schemas import ConsistencyVerdict, consistency_verdict_model, richness_verdict_model
from wse_platform.wse.simulate import CompletesMany
from wse_platform.wse.world import EpisodeSeed

CONSISTENCY_ROLE = "wse.consistency_judge"
RICHNESS_ROLE = "wse.richness_judge"
CATEGORY_AGREEMENT = 2  # judges that must agree on a violation's category / commitment source


# ---- blinded input ----------------------------------------------------------------------
@dataclass(frozen=True)
class NarratedStep:
    step: int
    player_action: str
    narrative: str
    day: int | None = None     # the story day of the step, as the generation roles saw it ("Step k (day d)")


@dataclass(frozen=True)
class JudgedTrajectory:
    """A stored trajectory as the judging code needs it. `model`/`arch`/`generation_version`
    are bookkeeping for the output rows and are never rendered into a prompt."""

    model: str
    arch: str
    seed: EpisodeSeed
    steps: tuple[NarratedStep, ...]     # canon narratives 1..L
    generation_version: str = ""

    @property
    def length(self) -> int:
        return len(self.steps)


# Source-revealing names a judge must not see (besides each world's own title): the source
# collections and games, and the authors of the adapted plays (Latin and native spellings).
SOURCE_TERMS: tuple[str, ...] = (
    "DraCor", "Smallville", "The Ville", "Into the Painting", "Into-the-Painting", "ITP", "Generative Agents",
    "Henrik Ibsen", "Ibsen", "Anton Chekhov", "Chekhov", "Чехов", "William Shakespeare", "Shakespeare",
    "August Strindberg", "Strindberg",
)


def neutral_world_label(seed: EpisodeSeed) -> str:
    """The name judges see for the seed's world: stable per world, reveals nothing of its source."""
    return "World " + hashlib.sha256(seed.world_id.encode()).hexdigest()[:4].upper()


# Our own world-construction wording that tells a play (stage, scenes) or a simulation apart, per
# language: judges get the same content in neutral words (the scene lists, which name acts and
# scenes, are dropped). Keys are those of `worlds.PHRASES`; "{title}" is the play's title.
NEUTRAL_PHRASES: dict[str, dict[str, str]] = {
    "en": {"on_stage": "present here", "off_stage": "not here at the moment", "offstage_loc": "elsewhere nearby",
           "shared": "{a} and {b} have already met (occasions: {n})", "character": "a character of this world",
           "setting": "The story takes place here: "},
    "nb": {"on_stage": "til stede her", "off_stage": "ikke her akkurat nå", "offstage_loc": "et annet sted i nærheten",
           "shared": "{a} og {b} har allerede møtt hverandre (ganger: {n})", "character": "en person i denne verden",
           "setting": "Handlingen foregår her: "},
    "ru": {"on_stage": "присутствует здесь", "off_stage": "сейчас не здесь", "offstage_loc": "где-то поблизости",
           "shared": "{a} и {b} уже встречались (раз: {n})", "character": "действующее лицо этого мира",
           "setting": "Место действия: "},
    "sv": {"on_stage": "närvarande här", "off_stage": "inte här just nu", "offstage_loc": "någon annanstans i närheten",
           "shared": "{a} och {b} har redan träffats (gånger: {n})", "character": "en person i denna värld",
           "setting": "Handlingen utspelar sig här: "},
}
SIMULATION_WORDING = (("The simulation starts", "The story starts"),)
# A play's time label names its act and scene ("ACT 1, Scene 1"): judges get "the start" instead.
NEUTRAL_START = {"en": "The start", "nb": "Begynnelsen", "ru": "Начало", "sv": "Början"}


def _phrase_regex(template: str, title: str) -> re.Pattern[str]:
    """A construction template as a regex: {n}/{seg}/{segs} become groups, {title} the play's title,
    a trailing {text} is left in place; a placeholder matches up to the next literal character."""
    template = template.replace("{title}", title)
    if template.endswith("{text}"):
        template = template[: -len("{text}")]
    out, pos = "", 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out += re.escape(template[pos:m.start()])
        nxt = template[m.end():m.end() + 1]
        stop = re.escape(nxt) if nxt else r"."
        out += f"(?P<{m.group(1)}>[^{stop}\n]*)"
        pos = m.end()
    return re.compile(out + re.escape(template[pos:]))


def _neutral_rewriter(seed: EpisodeSeed):
    from wse_platform.wse.worlds import PHRASES
    rules = []
    for lang, phrases in PHRASES.items():
        neutral = NEUTRAL_PHRASES.get(lang)
        if neutral is None:
            continue
        for key in ("shared", "off_stage", "offstage_loc", "on_stage", "character", "setting"):
            src, dst = phrases[key], neutral[key]
            if key == "shared":   # the two names stay as they are: rewrite what follows "{b}"
                src, dst = src[src.index("{b}") + 3:], dst[dst.index("{b}") + 3:]
            rules.append((_phrase_regex(src, seed.world_title), dst))

    label = seed.time.label
    start = NEUTRAL_START.get(seed.language.split("-")[0], NEUTRAL_START["en"]) \
        if seed.source_family == "dracor" and label else None

    def rewrite(text: str) -> str:
        if start is not None:
            text = text.replace(label, start)
        for pattern, repl in rules:
            text = pattern.sub(lambda m: repl.format(**{k: v for k, v in m.groupdict().items()}), text)
        for old, new in SIMULATION_WORDING:
            text = text.replace(old, new)
        return text
    return rewrite


def _apply(obj: Any, fn) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _apply(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_apply(v, fn) for v in obj]
    return obj


_TITLE_WORD = re.compile(r"\w{4,}")   # "Lear", "Ваня"; not "The"


def title_names_a_character(seed: EpisodeSeed, view: dict[str, Any] | None = None) -> bool:
    """The title is (or contains) a character's name: "Hamlet" with Hamlet in the cast, "King Lear"
    when "Lear" names someone in the world's own text (a daughter "Lear's youngest daughter", "Enter
    King Lear") even if Lear is not in the cast. Then the title stays: where it occurs it names the
    character (the construction phrase that named the play is rewritten first). `view`: the seed's
    neutrally rewritten judge view (`_neutral_view`) when the caller has it."""
    title = seed.world_title
    if not title:
        return False
    names = [c.name.casefold() for c in seed.cast]
    if any(title.casefold() in n or n in title.casefold() for n in names):
        return True
    if view is None:
        view = _neutral_view(seed)
    text = re.sub(re.escape(title), " ", json.dumps(view, ensure_ascii=False), flags=re.IGNORECASE)
    words = [w for w in _TITLE_WORD.findall(title) if w[:1].isupper()]
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text) for w in words)


def blinding_terms(seed: EpisodeSeed, view: dict[str, Any] | None = None) -> list[str]:
    """The world title and SOURCE_TERMS, minus any that is (part of) a cast member's name, and minus
    the title when it names a character (`title_names_a_character`): a judge must see the
    characters' names, so "Hamlet" and "King Lear" stay where they name the character."""
    names = [c.name.casefold() for c in seed.cast]
    terms = [t for t in SOURCE_TERMS if not any(t.casefold() in n for n in names)]
    if not title_names_a_character(seed, view):
        terms.append(seed.world_title)
    return sorted({t for t in terms if t}, key=len, reverse=True)


def _blinding_pattern(terms: list[str]) -> re.Pattern[str] | None:
    parts = [rf"(?<!\w){re.escape(t)}(?!\w)" if re.match(r"\w", t) else re.escape(t) for t in terms]
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def _scrub(obj: Any, pattern: re.Pattern[str] | None, label: str) -> Any:
    if pattern is None:
        return obj
    if isinstance(obj, str):
        return pattern.sub(label, obj)
    if isinstance(obj, dict):
        return {k: _scrub(v, pattern, label) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v, pattern, label) for v in obj]
    return obj


def _neutral_view(seed: EpisodeSeed) -> dict[str, Any]:
    """The seed's judge view in neutral wording (issue 22): a new object each call."""
    return _apply(seed.judge_view(), _neutral_rewriter(seed))


def _blinded_view_uncached(seed: EpisodeSeed, steps: tuple[NarratedStep, ...] | list[NarratedStep],
                           pattern: re.Pattern[str] | None | bool = False,
                           view: dict[str, Any] | None = None) -> dict[str, Any]:
    """`blinded_view` computed from scratch (the definition `_SeedBlinding` caches; tests compare the two).
    `pattern`: the seed's `_blinding_pattern(blinding_terms(seed))` when the caller has it; `view`: the
    seed's `_neutral_view`, when the caller made it (it becomes part of the result: not to be reused)."""
    if view is None:
        view = _neutral_view(seed)   # neutral wording first (issue 22)
    if pattern is False:   # the title check reads the view before it is blinded (and changed) below
        pattern = _blinding_pattern(blinding_terms(seed, view))
    label = neutral_world_label(seed)
    out = _scrub({
        "language": view["language"],
        "initial_world": view["initial_world"],
        "opening": view["opening"],
        "steps": [{"step": s.step, "day": s.day, "player_action": s.player_action, "narrative": s.narrative}
                  for s in steps],
    }, pattern, label)
    out["initial_world"]["title"] = label
    return out


class _SeedBlinding:
    """What a judge sees of one seed's world, computed once per seed and process (issue 24: the
    rewriting and scrubbing ran for every judge request, ~16 % of a fleet run's CPU): the blinded
    start world (and its rendered text), the opening, and each narrated step blinded and rendered
    once. Steps are scrubbed one by one, as `_scrub` does it to the whole view, so the text is the
    same; `tests/wse/test_blinding.py` compares it with `_blinded_view_uncached`."""

    MAX_STEPS = 4096   # blinded steps kept per seed (cells x horizon a worker process judges; then cleared)

    def __init__(self, seed: EpisodeSeed):
        self.label = neutral_world_label(seed)
        view = _neutral_view(seed)   # rewritten once for the title check and the view (was twice)
        self.pattern = _blinding_pattern(blinding_terms(seed, view))
        whole = _blinded_view_uncached(seed, [], self.pattern, view)
        self.language: str = whole["language"]
        self.opening: str = whole["opening"]
        self.world: dict[str, Any] = whole["initial_world"]
        self.world_text = _render_world(whole)
        self._steps: dict[NarratedStep, tuple[dict[str, Any], str]] = {}

    def step(self, s: NarratedStep) -> tuple[dict[str, Any], str]:
        """The blinded step as a dict (shared: do not mutate) and its rendered text."""
        hit = self._steps.get(s)
        if hit is None:
            d = {"step": s.step, "day": s.day, "player_action": s.player_action, "narrative": s.narrative}
            if self.pattern is not None:
                d["player_action"] = self.pattern.sub(self.label, s.player_action)
                d["narrative"] = self.pattern.sub(self.label, s.narrative)
            hit = (d, _render_step(d))
            if len(self._steps) >= self.MAX_STEPS:
                self._steps.clear()
            self._steps[s] = hit
        return hit

    def render_steps(self, steps: tuple[NarratedStep, ...] | list[NarratedStep]) -> str:
        """`_render_steps` of these steps' blinded views."""
        return "\n\n".join(self.step(s)[1] for s in steps) or "(none)"


_BLINDINGS: OrderedDict[str, _SeedBlinding] = OrderedDict()
_BLINDINGS_LOCK = threading.Lock()
_MAX_SEEDS = 512


def _seed_blinding(seed: EpisodeSeed) -> _SeedBlinding:
    """The seed's `_SeedBlinding`, keyed by the seed's content (a seed read again from the warehouse,
    or an edited one, finds its own entry)."""
    key = seed.model_dump_json()
    with _BLINDINGS_LOCK:
        hit = _BLINDINGS.get(key)
        if hit is not None:
            _BLINDINGS.move_to_end(key)
            return hit
    made = _SeedBlinding(seed)
    with _BLINDINGS_LOCK:
        hit = _BLINDINGS.setdefault(key, made)
        while len(_BLINDINGS) > _MAX_SEEDS:
            _BLINDINGS.popitem(last=False)
    return hit


def _copy(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy(v) for v in obj]
    return obj


def blinded_view(seed: EpisodeSeed, steps: tuple[NarratedStep, ...] | list[NarratedStep]) -> dict[str, Any]:
    """Everything a judge may see, as plain data (start world, opening, language, trajectory).

    The world is shown under a neutral label, and its title and the source/author names are
    replaced by that label everywhere in the view (descriptions, opening, narratives), so no
    source-revealing identifier reaches a judge — except a title that names a character, which
    stays where it names the character. Our own construction wording that gives the source family
    away (stage, scenes, "the simulation") is rewritten into neutral words with the same content.
    The view is the caller's own (a copy of the per-seed cache, `_SeedBlinding`)."""
    b = _seed_blinding(seed)
    return {"language": b.language, "initial_world": _copy(b.world), "opening": b.opening,
            "steps": [dict(b.step(s)[0]) for s in steps]}


def _render_world(view: dict[str, Any]) -> str:
    w = view["initial_world"]
    names = {c["id"]: c["name"] for c in w["characters"]}
    lines = [f"World: {w['title']}", f"Setting: {w['setting']}", f"Time: {w['time']['label']} (day {w['time']['day']})",
             "Characters:"]
    for c in w["characters"]:
        who = "player character" if c.get("role") == "player" else "NPC"
        lines.append(f"- {c['name']} (id {c['id']}, {who}): {c['description']} Condition: {c['condition']}. "
                     f"Location: {c['location']}.")
    if w["relationships"]:
        lines.append("Relationships:")
        lines += [f"- {names.get(r['a'], r['a'])} – {names.get(r['b'], r['b'])}: {r['description']}"
                  for r in w["relationships"]]
    if w["facts"]:
        lines.append("Facts:")
        lines += [f"- {f['text']}" for f in w["facts"]]
    if w["locations"]:
        lines.append("Places: " + "; ".join(w["locations"]))
    return "\n".join(lines)


def _step_head(s: dict[str, Any]) -> str:
    """`Step k (day d)`: the day marker the generation roles saw (temporal conflicts need it)."""
    return f"Step {s['step']}" + (f" (day {s['day']})" if s.get("day") is not None else "")


def _render_step(s: dict[str, Any]) -> str:
    return f"{_step_head(s)}. Player: {s['player_action']}\n{s['narrative']}"


def _render_steps(steps: list[dict[str, Any]]) -> str:
    return "\n\n".join(_render_step(s) for s in steps) or "(none)"


# ---- requests ---------------------------------------------------------------------------
def judge_seed(settings: Settings, judge: JudgePanel, judge_index: int) -> int:
    """Distinct, reproducible sampling seed per panel member (a member's own sampling seed wins)."""
    base = settings.wse.sampling.seed
    if base is None:
        base = settings.model(judge.members[judge_index].model).sampling.seed or 0
    return base + 1000 * (judge_index + 1)


def member_sampling(settings: Settings, judge: JudgePanel, judge_index: int, role: str):
    """The role's sampling for this member's model, with the member's own sampling merged over it."""
    member = judge.members[judge_index]
    base = role_sampling(settings, member.model, role, judge_seed(settings, judge, judge_index))
    return member.sampling.merged_over(base) if member.sampling is not None else base


def _member_tags(judge: JudgePanel, judge_index: int) -> dict[str, str]:
    return {"judge_index": str(judge_index), "judge_member": judge.member_label(judge_index)}


def consistency_request(settings: Settings, judge: JudgePanel, traj: JudgedTrajectory, step: int,
                        judge_index: int) -> LLMRequest:
    """Member `judge_index` judges `step` against the start world, opening and steps < `step`
    (no later steps: no hindsight)."""
    member = judge.members[judge_index]
    b = _seed_blinding(traj.seed)
    seen = traj.steps[:step]
    prompt = get_prompt(CONSISTENCY_ROLE, member.prompt_version, settings.prompts_dir)
    messages = prompt.render(
        language=language_name(b.language), world=b.world_text, opening=b.opening,
        history=b.render_steps(seen[:-1]), step=step, current=b.render_steps(seen[-1:]),
    )
    return LLMRequest(
        role=CONSISTENCY_ROLE, model=member.model, messages=messages,
        sampling=member_sampling(settings, judge, judge_index, CONSISTENCY_ROLE),
        output_model=consistency_verdict_model(step), prompt_version=prompt.id,
        tags={"seed_id": traj.seed.seed_id, "step": str(step), **_member_tags(judge, judge_index)},
    )


def richness_request(settings: Settings, judge: JudgePanel, traj: JudgedTrajectory, judge_index: int) -> LLMRequest:
    member = judge.members[judge_index]
    b = _seed_blinding(traj.seed)
    prompt = get_prompt(RICHNESS_ROLE, member.prompt_version, settings.prompts_dir)
    messages = prompt.render(
        language=language_name(b.language), world=b.world_text, opening=b.opening,
        n_steps=traj.length, trajectory=b.render_steps(traj.steps),
    )
    return LLMRequest(
        role=RICHNESS_ROLE, model=member.model, messages=messages,
        sampling=member_sampling(settings, judge, judge_index, RICHNESS_ROLE),
        output_model=richness_verdict_model(traj.length), prompt_version=prompt.id,
        tags={"seed_id": traj.seed.seed_id, **_member_tags(judge, judge_index)},
    )


# ---- aggregation ------------------------------------------------------------------------
def commitment_source(vote: ConsistencyVerdict, step: int) -> str | None:
    """Where the contradicted commitment was made: initial_world / opening / earlier_narrative / current_narrative."""
    if vote.prior_source is None:
        return None
    if vote.prior_source == "narrative":
        return "current_narrative" if vote.prior_step == step else "earlier_narrative"
    return vote.prior_source


def aggregate_step(votes: list[ConsistencyVerdict | None], judge_count: int, step: int) -> dict[str, Any]:
    """Majority of `judge_count` judges (more than half, i.e. 2 of 3) among consistent/inconsistent votes.

    `None` is a judge whose output stayed invalid: the panel is incomplete and the step
    has no binary verdict, whatever the other votes say (the paper excludes steps with a
    missing judge). Uncertain votes count as valid votes but support neither side.
    category/prior-source majorities are taken over the inconsistent votes of a
    majority-inconsistent step. `no_verdict_reason`: missing_judge | no_majority | None.
    """
    valid = [v for v in votes if v is not None]
    n = Counter(v.verdict for v in valid)
    need = judge_count // 2 + 1
    complete = len(valid) == judge_count
    majority = None
    if complete:
        majority = ("consistent" if n["consistent"] >= need else "inconsistent" if n["inconsistent"] >= need
                    else None)
    agree = min(CATEGORY_AGREEMENT, judge_count)
    category = source = None
    if majority == "inconsistent":
        bad = [v for v in valid if v.verdict == "inconsistent"]
        category = _agreed([v.category for v in bad], agree)
        source = _agreed([commitment_source(v, step) for v in bad], agree)
    return {
        "step": step, "n_valid_votes": len(valid), "n_consistent": n["consistent"],
        "n_inconsistent": n["inconsistent"], "n_uncertain": n["uncertain"], "majority": majority,
        "category_majority": category, "prior_source_majority": source,
        "no_verdict_reason": None if majority else ("no_majority" if complete else "missing_judge"),
    }


def _agreed(values: list[str | None], agree: int) -> str | None:
    counts = Counter(v for v in values if v is not None)
    top = [v for v, c in counts.items() if c >= agree]
    return top[0] if len(top) == 1 else None


def first_contradiction(step_majorities: list[str | None], length: int,
                        reasons: list[str | None] | None = None) -> dict[str, Any]:
    """T_inc and censoring from the per-step majorities of steps 1, 2, ... (judging order).

    Returns first_contradiction (None when none), censored_at (k - 1 for the first step k
    without a binary verdict: the trajectory leaves the KM risk set after its last binary
    verdict) and censor_reason (`reasons[k-1]`: missing_judge / no_majority; default no_majority).
    """
    for k, m in enumerate(step_majorities, start=1):
        if m == "inconsistent":
            return {"length": length, "first_contradiction": k, "censored_at": None, "censor_reason": None}
        if m is None:
            why = (reasons[k - 1] if reasons and reasons[k - 1] else "no_majority")
            return {"length": length, "first_contradiction": None, "censored_at": k - 1, "censor_reason": why}
    return {"length": length, "first_contradiction": None, "censored_at": None, "censor_reason": None}


# ---- cell runners -----------------------------------------------------------------------
@dataclass
class ConsistencyTables:
    verdicts: pl.DataFrame
    steps: pl.DataFrame
    trajectories: pl.DataFrame


VERDICT_SCHEMA = {
    "judge_config_id": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "step": pl.Int64,
    "judge_index": pl.Int64, "judge_member": pl.Utf8, "judge_model": pl.Utf8, "verdict": pl.Utf8,
    "category": pl.Utf8, "prior_fact": pl.Utf8,
    "prior_source": pl.Utf8, "prior_step": pl.Int64, "conflicting_claim": pl.Utf8, "exclusion_reason": pl.Utf8,
    "missing_transition": pl.Utf8, "failure_json": pl.Utf8, "vote_json": pl.Utf8,
    "llm_call_ids": pl.List(pl.Utf8), "generation_version": pl.Utf8,
}
STEP_SCHEMA = {
    "judge_config_id": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "step": pl.Int64,
    "n_valid_votes": pl.Int64, "n_consistent": pl.Int64, "n_inconsistent": pl.Int64, "n_uncertain": pl.Int64,
    "majority": pl.Utf8, "category_majority": pl.Utf8, "prior_source_majority": pl.Utf8,
    "no_verdict_reason": pl.Utf8,
}
TRAJECTORY_CONSISTENCY_SCHEMA = {
    "judge_config_id": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "length": pl.Int64,
    "first_contradiction": pl.Int64, "censored_at": pl.Int64, "censor_reason": pl.Utf8,
    "judged_steps": pl.Int64, "generation_version": pl.Utf8,
}
RICHNESS_SCHEMA = {
    "judge_config_id": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "judge_index": pl.Int64,
    "judge_member": pl.Utf8, "judge_model": pl.Utf8, "units_json": pl.Utf8, "n_units_non_repetitive": pl.Int64,
    "observed_steps": pl.Int64,
    "rating_event_diversity": pl.Int64, "rating_character_change": pl.Int64, "rating_world_expansion": pl.Int64,
    "failure_json": pl.Utf8, "llm_call_ids": pl.List(pl.Utf8), "generation_version": pl.Utf8,
}


def _failure_json(res: LLMResult) -> str | None:
    return None if res.ok else res.failure.model_dump_json()


def _verdict_row(judge: JudgePanel, judge_id: str, traj: JudgedTrajectory, step: int, judge_index: int,
                 res: LLMResult) -> dict:
    v: ConsistencyVerdict | None = res.output if res.ok else None
    bad = v is not None and v.verdict == "inconsistent"   # details are only meaningful for inconsistent votes
    return {
        "judge_config_id": judge_id, "model": traj.model, "arch": traj.arch, "seed_id": traj.seed.seed_id,
        "step": step, "judge_index": judge_index, "judge_member": judge.member_label(judge_index),
        "judge_model": judge.members[judge_index].model, "verdict": v.verdict if v else None,
        "category": v.category if bad else None, "prior_fact": v.prior_fact if bad else None,
        "prior_source": v.prior_source if bad else None, "prior_step": v.prior_step if bad else None,
        "conflicting_claim": v.conflicting_claim if bad else None,
        "exclusion_reason": v.exclusion_reason if bad else None,
        "missing_transition": v.missing_transition if bad else None,
        "failure_json": _failure_json(res), "vote_json": v.model_dump_json() if v else None,
        "llm_call_ids": list(res.call_ids), "generation_version": traj.generation_version,
    }


def judge_consistency(client: CompletesMany, settings: Settings, judge: JudgePanel,
                      trajectories: list[JudgedTrajectory]) -> ConsistencyTables:
    """Step-by-step consistency judging of a cell's trajectories, each trajectory on its own (`flow.each`)."""
    judge_id = judge.judge_id(CONSISTENCY_ROLE)
    count = judge.count
    verdict_rows: list[dict] = []
    step_rows: list[dict] = []
    majorities: dict[int, list[str | None]] = {i: [] for i in range(len(trajectories))}
    reasons: dict[int, list[str | None]] = {i: [] for i in range(len(trajectories))}

    def judge_one(client: CompletesMany, i: int) -> tuple[list[dict], list[dict]]:
        """One trajectory, step by step (its next step is asked as soon as this one's votes are in)."""
        traj, votes, steps, step = trajectories[i], [], [], 1
        while traj.length >= step:
            chunk = client.complete_many([consistency_request(settings, judge, traj, step, j)
                                          for j in range(count)])
            for j, res in enumerate(chunk):
                votes.append(_verdict_row(judge, judge_id, traj, step, j, res))
            agg = aggregate_step([r.output if r.ok else None for r in chunk], count, step)
            steps.append({"judge_config_id": judge_id, "model": traj.model, "arch": traj.arch,
                          "seed_id": traj.seed.seed_id, **agg})
            majorities[i].append(agg["majority"])
            reasons[i].append(agg["no_verdict_reason"])
            if agg["majority"] != "consistent":
                break
            step += 1
        return votes, steps

    models = [m.model for m in judge.members]
    for votes, steps in flow.each(client, list(range(len(trajectories))), judge_one, models=models,
                                  batched=_replaying(client, settings, judge, trajectories)):
        verdict_rows += votes
        step_rows += steps
    traj_rows = []
    for i, traj in enumerate(trajectories):
        res = first_contradiction(majorities[i], traj.length, reasons[i])
        traj_rows.append({"judge_config_id": judge_id, "model": traj.model, "arch": traj.arch,
                          "seed_id": traj.seed.seed_id, **res, "judged_steps": len(majorities[i]),
                          "generation_version": traj.generation_version})
    return ConsistencyTables(
        verdicts=pl.DataFrame(verdict_rows, schema=VERDICT_SCHEMA),
        steps=pl.DataFrame(step_rows, schema=STEP_SCHEMA),
        trajectories=pl.DataFrame(traj_rows, schema=TRAJECTORY_CONSISTENCY_SCHEMA),
    )


def _replaying(client: CompletesMany, settings: Settings, judge: JudgePanel,
               trajectories: list[JudgedTrajectory]) -> bool | None:
    """True when the cache holds every first-step vote of the cell (its judges were asked while it was generated,
    `wse.early`, or an earlier run judged it): then the trajectories' steps go out together, step k of every
    trajectory still in one `complete_many` (`flow.each(batched=True)`: each trajectory still asks step k + 1 only
    after its step k was found consistent, so the same requests, the same rows). A replay of cached answers
    then costs ~2,500 calls' overhead less at horizon 20 (840 `complete_many` of 3 -> 20 of <= 126: ~0.6 -> ~0.3 ms
    of CPU per vote; the last cell's judging step runs after the fleet's last answer, `bench/fleet.py`). Else
    None (flow's default): live votes keep going out each as soon as its trajectory's previous step is judged,
    not a round at a time."""
    stored = getattr(client, "all_stored", None)
    if stored is None or len(trajectories) < 2:
        return None
    first = [consistency_request(settings, judge, t, 1, j) for t in trajectories if t.length >= 1
             for j in range(judge.count)]
    return True if first and stored(first) else None


def _normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def judge_richness(client: CompletesMany, settings: Settings, judge: JudgePanel,
                   trajectories: list[JudgedTrajectory]) -> pl.DataFrame:
    """One richness verdict per panel member and trajectory with at least one narrated step."""
    judge_id = judge.judge_id(RICHNESS_ROLE)
    todo = [t for t in trajectories if t.length >= 1]
    requests = [richness_request(settings, judge, t, j) for t in todo for j in range(judge.count)]
    results = client.complete_many(requests)
    rows = []
    for pos, res in enumerate(results):
        traj, j = todo[pos // judge.count], pos % judge.count
        row = {"judge_config_id": judge_id, "model": traj.model, "arch": traj.arch, "seed_id": traj.seed.seed_id,
               "judge_index": j, "judge_member": judge.member_label(j), "judge_model": judge.members[j].model,
               "observed_steps": traj.length, "failure_json": _failure_json(res),
               "llm_call_ids": list(res.call_ids), "generation_version": traj.generation_version,
               "units_json": None, "n_units_non_repetitive": None, "rating_event_diversity": None,
               "rating_character_change": None, "rating_world_expansion": None}
        if res.ok:
            v = res.output
            narratives = {s.step: _normalise(s.narrative) for s in traj.steps}
            units = [{**u.model_dump(mode="json"),
                      # text support audit: is the quoted evidence literally in that step's narrative?
                      "evidence_found": _normalise(u.evidence) in narratives.get(u.step, "")} for u in v.units]
            row.update(units_json=json.dumps(units, ensure_ascii=False),
                       n_units_non_repetitive=sum(1 for u in v.units if not u.repetitive),
                       rating_event_diversity=v.rating_event_diversity,
                       rating_character_change=v.rating_character_change,
                       rating_world_expansion=v.rating_world_expansion)
        rows.append(row)
    return pl.DataFrame(rows, schema=RICHNESS_SCHEMA)


# ---- reading stored trajectories --------------------------------------------------------
def step_days(seed: EpisodeSeed, steps: pl.DataFrame) -> list[int | None]:
    """Day of each narrated step as the generation history shows it: the start day plus the new-day
    flags of steps 1..k (the Story Agent's flag moves the story to a new day at that step). None for
    every step when the rows carry no `new_day` column."""
    if "new_day" not in steps.columns:
        return [None] * steps.height
    return _days(seed, steps["new_day"].to_list())


def judged_trajectories(steps: pl.DataFrame, trajectories: pl.DataFrame,
                        seeds: dict[str, EpisodeSeed]) -> list[JudgedTrajectory]:
    """Rebuild the cell's trajectories from `wse_trajectory_steps` + `wse_trajectories` rows.

    Every trajectory (also those with L = 0) is returned so the per-trajectory
    consistency table covers the whole cell. Narratives must form the prefix 1..L.
    The narrated rows are sorted and grouped by seed once (issue 24: a filter and a sort per
    trajectory cost ~0.5 ms each, 42 per cell and judging step).
    """
    by_seed = _rows_by_seed(steps.filter(pl.col("narrative").is_not_null()).sort("seed_id", "step"))
    with_days = "new_day" in steps.columns
    out = []
    for row in trajectories.sort("seed_id").iter_rows(named=True):
        sid = row["seed_id"]
        if sid not in seeds:
            raise ValueError(f"wse_trajectories: seed_id {sid!r} ({row['model']}, {row['arch']}) "
                             "is not in wse_episode_seeds")
        mine = by_seed.get(sid, [])
        days = _days(seeds[sid], [s["new_day"] for s in mine]) if with_days else [None] * len(mine)
        narrated = tuple(NarratedStep(step=s["step"], player_action=s["player_option"], narrative=s["narrative"],
                                      day=d)
                         for s, d in zip(mine, days))
        if [s.step for s in narrated] != list(range(1, len(narrated) + 1)):
            raise ValueError(f"wse_trajectory_steps: seed {sid} ({row['model']}, {row['arch']}) has narrated "
                             f"steps {[s.step for s in narrated]}, expected 1..L")
        if len(narrated) != row["length"]:
            raise ValueError(f"wse_trajectories: seed {sid} ({row['model']}, {row['arch']}) length "
                             f"{row['length']} but {len(narrated)} narrated steps are stored")
        out.append(JudgedTrajectory(model=row["model"], arch=row["arch"], seed=seeds[sid], steps=narrated,
                                    generation_version=row.get("generation_version") or ""))
    return out


def _rows_by_seed(df: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The rows of `df` (as dicts, in its order) per seed id."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in df.iter_rows(named=True):
        out.setdefault(r["seed_id"], []).append(r)
    return out


def _days(seed: EpisodeSeed, new_day: list[bool | None]) -> list[int]:
    """`step_days` of one trajectory's narrated steps, from their new-day flags."""
    day, out = seed.time.day, []
    for flag in new_day:
        day += 1 if flag else 0
        out.append(day)
    return out


def consistency_tables_from_verdicts(verdicts: pl.DataFrame, trajectories: pl.DataFrame,
                                     judge: JudgePanel) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rebuild `wse_consistency_steps` and `wse_trajectory_consistency` of one cell from stored votes.

    Uses the same aggregation as the judging loop, so the derived tables can be rebuilt
    without calling a judge. `verdicts` are this judge configuration's rows of the cell;
    `trajectories` the cell's `wse_trajectories` rows. Missing or stale votes are an error
    (naming the seed), never read as "consistent". The votes are sorted and grouped by seed and
    step once (issue 24: a filter, a sort and a group-by per trajectory were ~3 ms each).
    """
    judge_id = judge.judge_id(CONSISTENCY_ROLE)
    by_seed = _rows_by_seed(verdicts.filter(pl.col("judge_config_id") == judge_id)
                            .sort("seed_id", "step", "judge_index"))
    step_rows: list[dict] = []
    traj_rows: list[dict] = []
    for tr in trajectories.sort("seed_id").iter_rows(named=True):
        sid, length = tr["seed_id"], tr["length"]
        rows = by_seed.get(sid, [])
        where = f"seed {sid} ({tr['model']}, {tr['arch']}, judge {judge_id})"
        stale = {r["generation_version"] for r in rows} - {tr["generation_version"]}
        if stale:
            raise ValueError(f"wse_consistency_verdicts: {where} judged another generation ({sorted(stale)}) "
                             f"than the stored trajectory ({tr['generation_version']}); re-run the judge")
        majorities: list[str | None] = []
        reasons: list[str | None] = []
        for step, grouped in itertools.groupby(rows, key=lambda r: r["step"]):
            group = list(grouped)
            indices = [r["judge_index"] for r in group]
            if len(group) != judge.count or sorted(indices) != list(range(judge.count)):
                raise ValueError(f"wse_consistency_verdicts: {where} step {step} has judge indices "
                                 f"{indices}, expected 0..{judge.count - 1}")
            votes = [None if r["verdict"] is None else ConsistencyVerdict.model_construct(
                verdict=r["verdict"], category=r["category"], prior_source=r["prior_source"],
                prior_step=r["prior_step"]) for r in group]
            agg = aggregate_step(votes, judge.count, step)
            step_rows.append({"judge_config_id": judge_id, "model": tr["model"], "arch": tr["arch"],
                              "seed_id": sid, **agg})
            majorities.append(agg["majority"])
            reasons.append(agg["no_verdict_reason"])
        steps_seen = sorted({r["step"] for r in rows}, key=lambda s: (s is not None, s))   # nulls first, as polars
        if steps_seen != list(range(1, len(steps_seen) + 1)):
            raise ValueError(f"wse_consistency_verdicts: {where} has judged steps {steps_seen}, expected 1..k")
        finished = len(majorities) == length or (majorities and majorities[-1] != "consistent")
        if not finished:
            raise ValueError(f"wse_consistency_verdicts: {where} stops at step {len(majorities)} of L={length} "
                             "without a contradiction or a no-majority step; re-run the judge for this cell")
        res = first_contradiction(majorities, length, reasons)
        traj_rows.append({"judge_config_id": judge_id, "model": tr["model"], "arch": tr["arch"], "seed_id": sid,
                          **res, "judged_steps": len(majorities), "generation_version": tr["generation_version"]})
    return (pl.DataFrame(step_rows, schema=STEP_SCHEMA),
            pl.DataFrame(traj_rows, schema=TRAJECTORY_CONSISTENCY_SCHEMA))
