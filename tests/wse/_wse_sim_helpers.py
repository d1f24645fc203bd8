"""Shared fixtures of the WSE simulation/judging tests: a synthetic seed and a scripted model.

The scripted model answers every WSE role with valid JSON derived from the prompt
(step number, seed marker, actor id), so a test can inject an invalid answer for one
(role, seed, step) and check what the simulation records.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable

from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.wse.world import EpisodeSeed, Fact, Relationship, SeedCharacter, WorldTime

MODEL = "fake"


def make_seed(tag: str, family: str = "dracor", schedule: list[int] | None = None) -> EpisodeSeed:
    """A five-character seed; `tag` ("A", "B") marks every description so prompts reveal the seed."""
    ids = ["pia", "nora", "olaf", "rune", "sara"]
    cast = [SeedCharacter(id=cid, name=cid.capitalize(), description=f"[seed {tag}] {cid} lives in the valley.",
                          condition="well", location="farmhouse", role="player" if i == 0 else "npc")
            for i, cid in enumerate(ids)]
    rels = [Relationship(a="nora", b="pia", description="sisters"),
            Relationship(a="olaf", b="rune", description="rivals"),
            Relationship(a="pia", b="sara", description="old friends")]
    return EpisodeSeed(
        seed_id=f"seed-{tag}", world_id=f"world-{tag}", world_title=f"The Valley {tag}", source_family=family,
        language="en", player_id="pia", npc_ids=ids[1:], cast=cast, relationships=rels,
        facts=[Fact(id="f1", text="The river floods every spring.")], locations=["farmhouse", "river"],
        setting=f"A farm by a river [seed {tag}].", time=WorldTime(day=0, label="Spring morning"),
        opening=f"Opening of seed {tag}: the rain has stopped.",
        initial_actions=[f"INIT-{tag}-0", f"INIT-{tag}-1", f"INIT-{tag}-2"],
        choice_schedule=schedule or ([2, 0, 1] * 7),
    )


def make_settings(tmp_path, **wse: object):
    return settings_from_dict({
        "models": {MODEL: {"backend": "embedded", "model_id": "fake.gguf"},
                   "judge": {"backend": "embedded", "model_id": "judge.gguf"}},
        "cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb"),
        "wse": {"models": [MODEL], "consistency_judge": {"model": "judge", "count": 3},
                "richness_judge": {"model": "judge", "count": 3}, **wse},
    })


def prompt_text(call) -> str:
    return "\n".join(m["content"] for m in call.messages)


def seed_tag(text: str) -> str:
    m = re.search(r"\[seed (\w+)\]", text)
    return m.group(1) if m else "?"


def gen_step(call) -> int:
    """Step of a generation call: explicit for the memory agent, else 1 + narrated history steps."""
    text = prompt_text(call)
    m = re.search(r"New passage \(step (\d+)\)", text)
    if m:
        return int(m.group(1))
    return len(re.findall(r"^Step \d+ \(day \d+\)\. Player:", text, re.M)) + 1


def default_answer(role: str, call, tag: str, step: int) -> str:
    text = prompt_text(call)
    if role == "wse.character_agent_centralized":
        ids = re.search(r"Give one intention for each of: (.*)\.", text).group(1).split(", ")
        return json.dumps({"intents": [{"character_id": i, "intent": f"INTENT {tag} {i} s{step}"} for i in ids]})
    if role == "wse.character_agent_distributed":
        actor = re.search(r"\(id (\w+)\)", call.messages[0]["content"]).group(1)
        return json.dumps({"intent": f"INTENT {tag} {actor} s{step}"})
    if role == "wse.world_model":
        return json.dumps({"beats": [
            {"beat_id": "b1", "depends_on": [], "source_intent_ids": ["player"], "content": f"PLANBEAT {tag} s{step}"},
        ]})
    if role == "wse.story_agent":
        return json.dumps({"narrative": f"NARRATIVE {tag} s{step}",
                           "options": [f"OPT-{tag}-s{step + 1}-{i}" for i in range(3)],
                           "new_day": step == 2, "ending": "continues"})
    if role == "wse.world_memory_agent":
        return json.dumps({"operations": [{"op": "set_condition", "character_id": "nora",
                                           "condition": f"tired after step {step}"}]})
    raise AssertionError(f"unexpected role {role}")


class FakeGenerationModel:
    """Callable script: valid answers by default; `overrides[(role, tag, step)]` replaces one answer."""

    def __init__(self, overrides: dict[tuple[str, str, int], str | Callable] | None = None):
        self.overrides = overrides or {}
        self.log: list[tuple[str, str, int, str]] = []   # (role, seed tag, step, prompt text)

    def __call__(self, call) -> str:
        text = prompt_text(call)
        tag, step = seed_tag(text), gen_step(call)
        self.log.append((call.role, tag, step, text))
        key = (call.role, tag, step)
        if key in self.overrides:
            ov = self.overrides[key]
            return ov(call) if callable(ov) else ov
        return default_answer(call.role, call, tag, step)

    def calls(self, role: str, tag: str | None = None, step: int | None = None) -> list[str]:
        return [t for r, g, s, t in self.log if r == role and (tag is None or g == tag) and (step is None or s == step)]


class BatchLoggingBackend(ScriptedBackend):
    """ScriptedBackend that also remembers each batch it received (roles, size)."""

    def __init__(self, script):
        super().__init__(script)
        self.batches: list[list[str]] = []

    def generate(self, calls, on_result=None):
        self.batches.append([c.role for c in calls])
        return super().generate(calls, on_result)


def make_client(settings, script, model: str = MODEL) -> tuple[LLMClient, BatchLoggingBackend]:
    backend = BatchLoggingBackend(script)
    return LLMClient(settings, backends={model: backend}, use_cache=False, progress=False), backend
