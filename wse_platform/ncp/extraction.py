"""Spec extraction from a synopsis with an LLM, in three stages, and comparison with the released spec.

Stages (each one request per movie, batched over movies with `complete_many`):

1. reference trajectory — atomic nodes, each with an external trigger event the player can perceive
   and a concrete key delta; consecutive nodes causally coupled; told from the player role's view;
2. commitments — ordering / invariant gates written with the node ids of stage 1, observable and
   mutually exclusive satisfaction / violation conditions, no static background facts;
3. initial facts — given the whole trajectory and the commitments (as the paper's prompt), what the
   player role knows at t = 0 only, with explicit negative knowledge and an initial value for every
   variable the commitments rely on.

The model writes no ids: ids are assigned here in output order (`s_N`, `c_N`, `f_N`), so the result
is deterministic given the outputs and always validated into the same `NarrativeSpec` as the
released files. Checks a stage can state on its own (node references in range, gates that name a
node, satisfaction ≠ violation) live in the stage's output model, so a bad output is retried by the
client; a stage still invalid after the retries becomes a recorded failure, never a default.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from wse_platform.llm.types import LLMRequest, LLMResult, Sampling
from wse_platform.ncp.spec import (COMMITMENT_TYPES, NODE_MENTION, Commitment, InitialFact, NarrativeSpec,
                                   SpecMeta, Text, TrajectoryNode)
from wse_platform.prompts import get_prompt

STAGES: tuple[str, ...] = ("trajectory", "commitments", "facts")
ROLES = {stage: f"ncp.extract_{stage}" for stage in STAGES}



# ---- stage output models ------------------------------------------------------------------

class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeDraft(_Out):
    description: Text
    trigger_event: Text   # external event the player can perceive
    key_delta: Text       # concrete change of state once the node is done


class TrajectoryDraft(_Out):
    nodes: list[NodeDraft] = Field(min_length=1)


class CommitmentDraft(_Out):
    type: Literal["invariant", "ordering", "achievement"]
    description: Text
    satisfaction_condition: Text
    violation_condition: Text


class CommitmentsDraft(_Out):
    """Commitments; `n_nodes` is set on the per-trajectory subclass so node references are checked."""

    n_nodes: ClassVar[int | None] = None
    commitments: list[CommitmentDraft] = Field(min_length=1)

    @model_validator(mode="after")
    def _gates_reference_nodes(self) -> "CommitmentsDraft":
        for i, c in enumerate(self.commitments):
            texts = (c.description, c.satisfaction_condition, c.violation_condition)
            mentioned = {int(m.group(1)) for t in texts for m in NODE_MENTION.finditer(t)}
            if c.type in ("ordering", "invariant") and not mentioned:
                raise ValueError(f"commitments[{i}]: an {c.type} gate must name the node ids (s_N) it depends on")
            if self.n_nodes is not None and any(n >= self.n_nodes for n in mentioned):
                raise ValueError(f"commitments[{i}]: mentions a node beyond s_{self.n_nodes - 1}")
            if c.satisfaction_condition.strip().lower() == c.violation_condition.strip().lower():
                raise ValueError(f"commitments[{i}]: satisfaction and violation conditions must differ")
        return self


@lru_cache(maxsize=None)
def commitments_model_for(n_nodes: int) -> type[CommitmentsDraft]:
    """The commitments output model for a trajectory of `n_nodes` nodes (one class per size)."""
    return type(f"CommitmentsDraftFor{n_nodes}Nodes", (CommitmentsDraft,), {"n_nodes": n_nodes,
                                                                           "__module__": __name__})


class FactDraft(_Out):
    content: Text
    negated: bool = False  # True: the fact is recorded but starts inactive


class FactsDraft(_Out):
    facts: list[FactDraft] = Field(min_length=1)


# ---- results ------------------------------------------------------------------------------

@dataclass
class ExtractionResult:
    """Outcome for one movie and one extraction model: a spec, or the stage that failed and why."""

    spec_id: str
    model: str
    spec: NarrativeSpec | None = None
    failed_stage: str | None = None        # trajectory | commitments | facts | assemble
    error_kind: str | None = None
    error_message: str | None = None
    call_ids: list[str] = field(default_factory=list)
    prompt_versions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.spec is not None

    def fail(self, stage: str, kind: str, message: str) -> None:
        self.failed_stage, self.error_kind, self.error_message = stage, kind, message


# ---- rendering inputs ---------------------------------------------------------------------

def render_trajectory(nodes: Sequence[TrajectoryNode]) -> str:
    return "\n".join(f"{n.id}: {n.description} | trigger: {n.trigger_event} | change: {n.key_delta}" for n in nodes)


def render_commitments(commitments: Sequence[Commitment]) -> str:
    return "\n".join(f"{c.id} ({c.type}): {c.description} | kept if: {c.satisfaction_condition} | "
                     f"broken if: {c.violation_condition}" for c in commitments)


def _request(stage: str, model: str, version: str, spec_id: str, sampling: Sampling, output_model: type[BaseModel],
             **values: object) -> LLMRequest:
    prompt = get_prompt(ROLES[stage], version)
    return LLMRequest(role=ROLES[stage], model=model, messages=prompt.render(**values), sampling=sampling,
                      output_model=output_model, prompt_version=prompt.id,
                      tags={"spec_id": spec_id, "stage": stage})


def _meta_values(meta: SpecMeta, synopsis: str) -> dict[str, object]:
    return {"title": meta.title, "genres": ", ".join(meta.genres), "player_role": meta.player_role,
            "synopsis": synopsis.strip()}


def _take(result: LLMResult, stage: str, out: ExtractionResult) -> BaseModel | None:
    """The stage output, or record the failure on `out` (never a default)."""
    out.call_ids += list(result.call_ids)
    if not result.ok:
        f = result.failure
        out.fail(stage, f.error_kind, f"{f.message} (after {f.attempts} attempt(s))")
        return None
    return result.outputs[0]


# ---- the three stages ---------------------------------------------------------------------

def extract_specs(client, model: str, sources: Sequence[NarrativeSpec | tuple[SpecMeta, str]],
                  prompt_version: str = "v1", sampling: Sampling | None = None) -> list[ExtractionResult]:
    """Extract a spec for every source (a released spec, of which only meta + synopsis are used, or a
    `(meta, synopsis)` pair); one `complete_many` batch per stage. Same order as `sources`."""
    sampling = sampling or Sampling()
    inputs = [(s.meta, s.synopsis) if isinstance(s, NarrativeSpec) else s for s in sources]
    results = [ExtractionResult(spec_id=meta.id, model=model) for meta, _ in inputs]
    versions = [f"{ROLES[s]}@{prompt_version}" for s in STAGES]
    for r in results:
        r.prompt_versions = list(versions)

    # Stage 1: reference trajectory.
    reqs = [_request("trajectory", model, prompt_version, meta.id, sampling, TrajectoryDraft,
                     **_meta_values(meta, syn)) for meta, syn in inputs]
    trajectories: dict[int, list[TrajectoryNode]] = {}
    for i, res in enumerate(client.complete_many(reqs)):
        draft = _take(res, "trajectory", results[i])
        if draft is not None:
            trajectories[i] = [TrajectoryNode(id=f"s_{k}", **n.model_dump()) for k, n in enumerate(draft.nodes)]

    # Stage 2: commitments, gated on the node ids of stage 1.
    todo = sorted(trajectories)
    reqs = [_request("commitments", model, prompt_version, inputs[i][0].id, sampling,
                     commitments_model_for(len(trajectories[i])), **_meta_values(*inputs[i]),
                     trajectory=render_trajectory(trajectories[i]), last_node=trajectories[i][-1].id)
            for i in todo]
    commitments: dict[int, list[Commitment]] = {}
    for i, res in zip(todo, client.complete_many(reqs)):
        draft = _take(res, "commitments", results[i])
        if draft is not None:
            commitments[i] = [Commitment(id=f"c_{k}", **c.model_dump()) for k, c in enumerate(draft.commitments)]

    # Stage 3: initial facts at t = 0, covering what the commitments rely on.
    todo = sorted(commitments)
    reqs = [_request("facts", model, prompt_version, inputs[i][0].id, sampling, FactsDraft,
                     **_meta_values(*inputs[i]), first_node=render_trajectory(trajectories[i][:1]),
                     trajectory=render_trajectory(trajectories[i]),
                     commitments=render_commitments(commitments[i])) for i in todo]
    for i, res in zip(todo, client.complete_many(reqs)):
        draft = _take(res, "facts", results[i])
        if draft is None:
            continue
        meta, synopsis = inputs[i]
        try:
            results[i].spec = NarrativeSpec(
                meta=meta, synopsis=synopsis,
                initial_facts=[InitialFact(id=f"f_{k}", **f.model_dump()) for k, f in enumerate(draft.facts)],
                commitments=commitments[i], trajectory=trajectories[i])
        except ValueError as err:  # cannot happen with the stage checks above; recorded if it does
            results[i].fail("assemble", "spec_invalid", str(err))
    return results


def extract_spec(client, model: str, source: NarrativeSpec | tuple[SpecMeta, str],
                 prompt_version: str = "v1", sampling: Sampling | None = None) -> ExtractionResult:
    return extract_specs(client, model, [source], prompt_version, sampling)[0]


# ---- tables -------------------------------------------------------------------------------

EXTRACTION_SCHEMA = {
    "extraction_model": pl.Utf8, "spec_id": pl.Utf8, "ok": pl.Boolean, "failed_stage": pl.Utf8,
    "error_kind": pl.Utf8, "error_message": pl.Utf8, "n_facts": pl.Int64, "n_commitments": pl.Int64,
    "n_nodes": pl.Int64, "n_invariant": pl.Int64, "n_ordering": pl.Int64, "n_achievement": pl.Int64,
    "spec_json": pl.Utf8, "prompt_versions": pl.Utf8, "llm_call_ids": pl.List(pl.Utf8),
}


def _counts(spec: NarrativeSpec | None) -> dict[str, int | None]:
    if spec is None:
        return {"facts": None, "commitments": None, "trajectory_nodes": None, **{t: None for t in COMMITMENT_TYPES}}
    return {"facts": len(spec.initial_facts), "commitments": len(spec.commitments),
            "trajectory_nodes": len(spec.trajectory), **spec.commitment_type_counts()}


def extraction_rows(results: Sequence[ExtractionResult]) -> pl.DataFrame:
    """`ncp_spec_extraction`: one row per movie for one extraction model."""
    rows = []
    for r in results:
        c = _counts(r.spec)
        rows.append({
            "extraction_model": r.model, "spec_id": r.spec_id, "ok": r.ok, "failed_stage": r.failed_stage,
            "error_kind": r.error_kind, "error_message": r.error_message, "n_facts": c["facts"],
            "n_commitments": c["commitments"], "n_nodes": c["trajectory_nodes"], "n_invariant": c["invariant"],
            "n_ordering": c["ordering"], "n_achievement": c["achievement"],
            "spec_json": r.spec.model_dump_json() if r.spec is not None else None,
            "prompt_versions": ",".join(r.prompt_versions), "llm_call_ids": list(r.call_ids),
        })
    return pl.DataFrame(rows, schema=EXTRACTION_SCHEMA)


COMPARISON_SCHEMA = {
    "extraction_model": pl.Utf8, "spec_id": pl.Utf8, "ok": pl.Boolean, "quantity": pl.Utf8,
    "released": pl.Int64, "extracted": pl.Int64, "diff": pl.Int64,
    "released_share": pl.Float64, "extracted_share": pl.Float64,
}
COMPARED = ("facts", "commitments", "trajectory_nodes", *COMMITMENT_TYPES)


def compare_extracted(extracted: Sequence[ExtractionResult | tuple[str, str, NarrativeSpec | None]],
                      released: Sequence[NarrativeSpec]) -> pl.DataFrame:
    """`ncp_extraction_comparison`: counts and commitment type mix, extracted vs released, per movie.

    `extracted` items are `ExtractionResult`s or `(model, spec_id, spec | None)` triples. Type rows
    carry the share of the spec's commitments, so a type mix can be compared across sizes.
    """
    by_id = {s.spec_id: s for s in released}
    rows = []
    for item in extracted:
        model, spec_id, spec = ((item.model, item.spec_id, item.spec) if isinstance(item, ExtractionResult)
                                else item)
        if spec_id not in by_id:
            raise KeyError(f"extracted spec {spec_id!r} ({model}) has no released spec to compare with")
        rel, ext = _counts(by_id[spec_id]), _counts(spec)
        for q in COMPARED:
            is_type = q in COMMITMENT_TYPES
            rel_share = rel[q] / rel["commitments"] if is_type and rel["commitments"] else None
            ext_share = (ext[q] / ext["commitments"]) if is_type and ext["commitments"] else None
            rows.append({"extraction_model": model, "spec_id": spec_id, "ok": spec is not None, "quantity": q,
                         "released": rel[q], "extracted": ext[q],
                         "diff": None if ext[q] is None else ext[q] - rel[q],
                         "released_share": rel_share, "extracted_share": ext_share})
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA)

