"""The rubric judge: scores each story on an EQ-Bench-style creative-writing rubric.

The paper contrasts the EQ-Bench rubric score (22 criteria, 0-100 overall) with tension. The
criteria and scale live in a replaceable file (`rubric.yaml` next to this module, or
`endings.rubric.rubric_file`); the judge answers JSON validated against a model built from that
file (every criterion, an integer in 0..scale_max). Stories outside the rubric's length band
(the paper's 2,000-3,000 words for human corpora) get a row with `in_length_band = false` and
no call; by default (`band_applies_to: human`) the band restricts human corpora only, as the paper
scores generated stories at all lengths. A failed judgement is a row with `failure_json`.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, create_model

from wse_platform.inputs import InputFileError, load_yaml, read_input_bytes
from wse_platform.llm.types import LLMRequest, LLMResult
from wse_platform.prompts import get_prompt

ROLE = "endings.rubric"
SHIPPED_RUBRIC = Path(__file__).resolve().parent / "rubric.yaml"


class RubricError(ValueError):
    pass


@dataclass(frozen=True)
class Criterion:
    id: str
    name: str
    description: str
    negative: bool = False
    tension: bool = False


@dataclass(frozen=True)
class Rubric:
    scale_max: int
    criteria: tuple[Criterion, ...]
    sha: str

    def output_model(self) -> type[BaseModel]:
        fields = {c.id: (int, Field(ge=0, le=self.scale_max)) for c in self.criteria}
        scores = create_model("RubricScores", __config__=ConfigDict(extra="forbid"), **fields)
        return create_model("RubricAnswer", scores=(scores, ...))

    def render_criteria(self) -> str:
        return "\n".join(f"- {c.id} ({c.name}{', fault' if c.negative else ''}): {c.description}"
                         for c in self.criteria)

    def normalised(self, c: Criterion, score: float) -> float:
        """A raw score on 0-100, faults inverted (higher = better)."""
        v = score / self.scale_max
        return 100.0 * (1.0 - v if c.negative else v)

    def overall(self, scores: dict[str, int]) -> float:
        """Mean over all criteria of the 0-100 score, faults inverted."""
        return sum(self.normalised(c, scores[c.id]) for c in self.criteria) / len(self.criteria)

    def tension8(self, scores: dict[str, int]) -> float | None:
        sel = [c for c in self.criteria if c.tension]
        return sum(self.normalised(c, scores[c.id]) for c in sel) / len(sel) if sel else None


def load_rubric(path: str | Path | None = None) -> Rubric:
    path = Path(path) if path else SHIPPED_RUBRIC
    try:
        data = read_input_bytes(path, what="rubric file")
        raw = load_yaml(data.decode("utf-8"))
    except (OSError, yaml.YAMLError, InputFileError) as err:
        raise RubricError(f"{path}: cannot read rubric: {err}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("scale_max"), int) or raw["scale_max"] < 1:
        raise RubricError(f"{path}: scale_max must be a positive integer")
    items = raw.get("criteria")
    if not isinstance(items, list) or not items:
        raise RubricError(f"{path}: criteria must be a non-empty list")
    crits, seen = [], set()
    for i, c in enumerate(items):
        if not isinstance(c, dict) or not all(str(c.get(k) or "").strip() for k in ("id", "name", "description")):
            raise RubricError(f"{path}: criteria[{i}]: needs id, name and description")
        if not str(c["id"]).isidentifier() or c["id"] in seen:
            raise RubricError(f"{path}: criteria[{i}].id: {c['id']!r} must be a unique identifier")
        seen.add(c["id"])
        crits.append(Criterion(str(c["id"]), str(c["name"]), str(c["description"]), bool(c.get("negative")),
                               bool(c.get("tension"))))
    sha = hashlib.sha256(data).hexdigest()[:12]
    return Rubric(raw["scale_max"], tuple(crits), sha)


def rubric_config_id(model: str, prompt_version: str, rubric: Rubric) -> str:
    return f"{ROLE}:{model}:{prompt_version}:{rubric.sha}"


def rubric_request(rubric: Rubric, story_id: str, text: str, instructions: str | None, model: str,
                   cfg: Any, prompts_dir: str | None = None) -> LLMRequest:
    prompt = get_prompt(ROLE, cfg.prompt_version, prompts_dir)
    messages = prompt.render(instructions=instructions or "(none: this story was not written to a prompt)",
                             story=text, scale_max=rubric.scale_max, criteria=rubric.render_criteria())
    return LLMRequest(role=ROLE, model=model, messages=messages, sampling=cfg.sampling,
                      output_model=rubric.output_model(), prompt_version=prompt.id, tags={"story_id": story_id})


def score_rows(client: Any, stories: Sequence[dict[str, Any]], ideas: dict[str, str], rubric: Rubric, cfg: Any,
               prompts_dir: str | None = None) -> list[dict[str, Any]]:
    """`endings_rubric_scores` rows for the included stories of one set."""
    config_id = rubric_config_id(cfg.model, cfg.prompt_version, rubric)
    rows, todo = [], []
    for st in stories:
        n = int(st["n_words"] or 0)
        band = n >= cfg.min_words and (cfg.max_words is None or n <= cfg.max_words)
        if cfg.band_applies_to == "human" and not str(st["set_key"]).startswith("human:"):
            band = True   # the paper scores generated stories at all lengths (Appendix B)
        row = {"story_id": st["story_id"], "set_key": st["set_key"], "rubric_config_id": config_id,
               "rubric_model": cfg.model, "n_words": n, "in_length_band": band, "scores_json": None,
               "overall": None, "tension8": None, "llm_call_id": None, "failure_json": None}
        rows.append(row)
        if band:
            todo.append((row, rubric_request(rubric, st["story_id"], st["text"], ideas.get(st.get("idea_id") or ""),
                                             cfg.model, cfg, prompts_dir)))
    results: list[LLMResult] = client.complete_many([r for _, r in todo]) if todo else []
    for (row, _), res in zip(todo, results):
        row["llm_call_id"] = res.call_ids[-1] if res.call_ids else None
        if not res.ok:
            row["failure_json"] = json.dumps(res.failure.model_dump())
            continue
        scores = res.output.scores.model_dump()
        row |= {"scores_json": json.dumps(scores), "overall": rubric.overall(scores),
                "tension8": rubric.tension8(scores)}
    return rows
