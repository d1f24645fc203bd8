"""Builds the request of every NCP-Bench role with the inputs the paper lists for it (App. H).

| role | inputs |
|---|---|
| opening | player role, current node, commitments, pre-turn facts |
| player | player role, interaction history (visible transcript only) |
| narrator | player role, current node (the full trajectory R only with `ncp.narrator_trajectory: full`), commitments with conditions, pre-turn facts, pending fact updates, system response history, player input |
| HiAgent narrator | the narrator's inputs (the whole system response history included) plus its working memory |
| fact update | player role, pre-turn facts, the narration |
| conflict check | player role, system response history, player input, narration, candidate fact updates, trajectory progress (full R), current node, pre-turn facts, commitments with conditions |
| double-check | the conflict check's inputs plus the initial report |
| node update | player role, facts after the turn, interaction history through this turn, current node's trigger and key delta (no description) |
| commitment status | player role, facts after the turn, interaction history, trajectory progress, all commitments with satisfaction conditions (no violation conditions) |
"""
from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from wse_platform.llm.types import LLMRequest, Sampling
from wse_platform.ncp import ref_format as rf
from wse_platform.ncp import reference, render
from wse_platform.ncp.hiagent_ref import RefHiAgentStep, RefSummaryLine
from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.memory import OWN_TEXTS, MemoryTexts
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.ref_schemas import (RefConflictReport, RefConflictReview, RefFactUpdate, RefNodeAssessment,
                                          RefText, ref_status_model)
from wse_platform.ncp.roles import (AUDITOR_ROLES, ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK,  # noqa: F401
                                    ROLE_CONFLICT_CONFIRM, ROLE_DOUBLE_CHECK, ROLE_FACT_UPDATE, ROLE_HIAGENT,
                                    ROLE_MEMORY, ROLE_NARRATOR, ROLE_NODE_UPDATE, ROLE_OPENING, ROLE_PLAYER)
from wse_platform.ncp.schemas import (ConflictReport, ConflictReview, FactDiff, HiAgentStep, NarratorResponse,
                                      NodeAssessment, SubgoalSummary, status_update_model)
from wse_platform.prompts import get_prompt

if TYPE_CHECKING:
    from wse_platform.ncp.memory import SummaryJob
    from wse_platform.ncp.state import EpisodeRun, EpisodeSetup


REF_PLAYER = {"adversarial": "adversarial_input", "natural": "natural_input"}


class Prompter:
    """One instance per episode setup; every method returns one `LLMRequest`.

    With `ncp.reference` set (`setup.reference`), the opening, player, baseline narrator and every
    auditor role send the reference checkout's prompt, filled as the reference runner fills it
    (`ref_format.py`), and parse the answer with the reference's field names (`ref_schemas.py`).
    """

    def __init__(self, setup: "EpisodeSetup"):
        self.setup = setup
        self.ref = reference.load(setup.reference) if getattr(setup, "reference", None) else None

    def _ref_req(self, role: str, key: str, model: str, output_model: type[BaseModel] | None, run: "EpisodeRun",
                 turn: int, n: int = 1, stage: str | None = None, **values: str) -> LLMRequest:
        assert self.ref is not None
        tags = {"spec_id": run.spec.spec_id, "arch": run.arch, "turn": str(turn)}
        if stage:
            tags["stage"] = stage
        return LLMRequest(role=role, model=model, messages=self.ref.fill(key, **values), sampling=self.setup.sampling,
                          n=n, output_model=output_model, prompt_version=f"{role}@{self.ref.version}", tags=tags)

    def _ref_aud(self, role: str, key: str, output_model: type[BaseModel], run: "EpisodeRun", turn: int,
                 n: int = 1, stage: str | None = None, **values: str) -> LLMRequest:
        return self._ref_req(role, key, self.setup.auditor.model, output_model, run, turn, n=n, stage=stage, **values)

    def _req(self, role: str, model: str, version: str, output_model: type[BaseModel] | None, run: "EpisodeRun",
             turn: int, n: int = 1, stage: str | None = None, **values: Any) -> LLMRequest:
        prompt = get_prompt(role, version, self.setup.prompts_dir)
        tags = {"spec_id": run.spec.spec_id, "arch": run.arch, "turn": str(turn)}
        if stage:
            tags["stage"] = stage
        return LLMRequest(role=role, model=model, messages=prompt.render(**values), sampling=self.setup.sampling,
                          n=n, output_model=output_model, prompt_version=prompt.id, tags=tags)

    def _aud(self, role: str, output_model: type[BaseModel], run: "EpisodeRun", turn: int, n: int = 1,
             stage: str | None = None, **values: Any) -> LLMRequest:
        a = self.setup.auditor
        return self._req(role, a.model, a.prompt_version, output_model, run, turn, n=n, stage=stage, **values)

    # ---- generation ------------------------------------------------------------------------
    def opening(self, run: "EpisodeRun") -> LLMRequest:
        if self.ref is not None:
            return self._ref_req(ROLE_OPENING, "opening", self.setup.narrator_model, RefText, run, 0,
                                 player_role=rf.role(run.spec, "Player"), current_node=rf.node_block(run.spec, 0),
                                 narrative_commitments=rf.commitments(run.spec, run.statuses, "(None)"),
                                 pre_turn_facts=rf.facts(run.ledger))
        return self._req(ROLE_OPENING, self.setup.narrator_model, "v1", NarratorResponse, run, 0,
                         player_role=run.spec.meta.player_role,
                         current_node=render.current_node(run.spec, run.node_idx),
                         commitments=_commitments(run), facts=render.facts(run.ledger))

    def player(self, run: "EpisodeRun", turn: int) -> LLMRequest:
        """Only the visible transcript: never facts, commitments or trajectory nodes. Plain text; an
        input cut by the token cap is still the input (the reference checks only that it is non-empty)."""
        role = ROLE_PLAYER.get(self.setup.arch.player, ROLE_PLAYER["adversarial"])  # a human sees the same view
        if self.ref is not None:
            key = REF_PLAYER.get(self.setup.arch.player, REF_PLAYER["adversarial"])
            req = self._ref_req(role, key, self.setup.player_model, None, run, turn,
                                player_role=run.spec.meta.player_role, history_text=rf.player_history(run.history))
        else:
            req = self._req(role, self.setup.player_model, "v1", None, run, turn,
                            player_role=run.spec.meta.player_role, history=render.interaction_history(run.history))
        return req.model_copy(update={"allow_truncated": True})

    def _narrator_values(self, run: "EpisodeRun", player_input: str) -> dict[str, Any]:
        return dict(player_role=run.spec.meta.player_role, current_node=render.current_node(run.spec, run.node_idx),
                    trajectory=render.narrator_trajectory(run.spec, run.node_idx, self.setup.narrator_trajectory),
                    commitments=_commitments(run), facts=render.facts(run.ledger),
                    pending_updates=render.fact_diff(run.pending, run.ledger), player_input=player_input)

    def narrator(self, run: "EpisodeRun", turn: int, player_input: str) -> LLMRequest:
        if self.ref is not None:
            return self._ref_req(ROLE_NARRATOR, "baseline_narrator", self.setup.narrator_model, RefText, run, turn,
                                 player_role=rf.role(run.spec, "玩家"),
                                 current_node=rf.node_block(run.spec, run.node_idx),
                                 narrative_commitments=rf.commitments(run.spec, run.statuses, "(无)"),
                                 pre_turn_facts=rf.facts(run.ledger),
                                 pending_fact_updates=rf.fact_updates(run.pending, run.ledger),
                                 system_response_history=rf.narrator_system_history(run.history),
                                 user_input=player_input)
        return self._req(ROLE_NARRATOR, self.setup.narrator_model, "v1", NarratorResponse, run, turn,
                         history=render.system_history(run.history), **self._narrator_values(run, player_input))

    def hiagent_texts(self) -> MemoryTexts:
        """HiAgent's memory texts and limits: the reference checkout's, else ours (same limits)."""
        return self.ref.hiagent.texts if self.ref is not None and self.ref.hiagent is not None else OWN_TEXTS

    def hiagent(self, run: "EpisodeRun", turn: int, player_input: str, memory: str, ends_with_subgoal: bool,
                depth: int = 0) -> LLMRequest:
        """HiAgent's control step: the baseline narrator's inputs (the whole history) plus the memory.
        A re-ask after a retrieve (depth > 0) is a fresh sample: its own seed, so not a cache replay."""
        sampling = self.setup.sampling if depth == 0 else _reask(self.setup.sampling, depth)
        if self.ref is not None and self.ref.hiagent is not None:
            mod = self.ref.hiagent
            filled = self.ref.template("hiagent_narrator").format(
                player_role=rf.role(run.spec, "player"), current_node=rf.node_block(run.spec, run.node_idx),
                narrative_commitments=rf.commitments(run.spec, run.statuses, "(none)"),
                pre_turn_facts=rf.facts(run.ledger), pending_fact_updates=rf.fact_updates(run.pending, run.ledger),
                system_response_history=rf.narrator_system_history(run.history), user_input=player_input)
            messages = [{"role": "system", "content": mod.system_message},
                        {"role": "user", "content": mod.turn_prompt(filled, memory, ends_with_subgoal)}]
            return LLMRequest(role=ROLE_HIAGENT, model=self.setup.narrator_model, messages=messages, sampling=sampling,
                              output_model=RefHiAgentStep, prompt_version=f"{ROLE_HIAGENT}@{self.ref.version}",
                              tags={"spec_id": run.spec.spec_id, "arch": run.arch, "turn": str(turn)})
        req = self._req(ROLE_HIAGENT, self.setup.narrator_model, "v1", HiAgentStep, run, turn,
                        history=render.system_history(run.history), memory=memory,
                        **self._narrator_values(run, player_input))
        return req.model_copy(update={"sampling": sampling})

    def subgoal_summary(self, run: "EpisodeRun", turn: int, job: "SummaryJob") -> LLMRequest:
        if self.ref is not None and self.ref.hiagent is not None:
            return LLMRequest(role=ROLE_MEMORY, model=self.setup.narrator_model,
                              messages=self.ref.hiagent.summary_messages(job.subgoal, job.trajectory),
                              sampling=self.setup.sampling, output_model=RefSummaryLine,
                              prompt_version=f"{ROLE_MEMORY}@{self.ref.version}",
                              tags={"spec_id": run.spec.spec_id, "arch": run.arch, "turn": str(turn)})
        return self._req(ROLE_MEMORY, self.setup.narrator_model, "v1", SubgoalSummary, run, turn,
                         subgoal=job.subgoal, turns=job.trajectory or "(no turns)")

    # ---- audit -------------------------------------------------------------------------------
    def fact_update(self, run: "EpisodeRun", turn: int, facts: FactLedger, narrator_text: str,
                    stage: str = "turn") -> LLMRequest:
        if self.ref is not None:
            return self._ref_aud(ROLE_FACT_UPDATE, "fact_update", RefFactUpdate, run, turn, stage=stage,
                                 player_role=rf.role(run.spec, "player"), pre_turn_facts=rf.facts(facts),
                                 response_text=narrator_text or "(No narrative content available)")
        return self._aud(ROLE_FACT_UPDATE, FactDiff, run, turn, stage=stage, player_role=run.spec.meta.player_role,
                         facts=render.facts(facts), narrator_text=narrator_text)

    def _conflict_values(self, run: "EpisodeRun", facts: FactLedger, player_input: str, narrator_text: str,
                         diff: FactDiff) -> dict[str, Any]:
        return dict(player_role=run.spec.meta.player_role, history=render.system_history(run.history),
                    player_input=player_input, narrator_text=narrator_text,
                    candidate_updates=render.fact_diff(diff, facts),
                    trajectory=_trajectory(run),
                    current_node=render.current_node(run.spec, run.node_idx), facts=render.facts(facts),
                    commitments=_commitments(run))

    def _ref_conflict_values(self, run: "EpisodeRun", facts: FactLedger, player_input: str, narrator_text: str,
                             diff: FactDiff) -> dict[str, str]:
        return dict(player_role=rf.role(run.spec, "player"), system_response_history=rf.system_history(run.history),
                    user_input=player_input or "(None)", response_text=narrator_text,
                    pre_turn_facts=rf.facts(facts), candidate_fact_updates=rf.fact_updates(diff, facts),
                    narrative_commitments=rf.commitments(run.spec, run.statuses, "(无)"),
                    trajectory_progress=rf.trajectory(run.spec, run.node_idx),
                    current_node=rf.node_block(run.spec, run.node_idx))

    def conflict_check(self, run: "EpisodeRun", turn: int, facts: FactLedger, player_input: str,
                       narrator_text: str, diff: FactDiff) -> LLMRequest:
        if self.ref is not None:
            return self._ref_aud(ROLE_CONFLICT_CHECK, "conflict_check", RefConflictReport, run, turn,
                                 **self._ref_conflict_values(run, facts, player_input, narrator_text, diff))
        return self._aud(ROLE_CONFLICT_CHECK, ConflictReport, run, turn,
                         **self._conflict_values(run, facts, player_input, narrator_text, diff))

    def double_check(self, run: "EpisodeRun", turn: int, facts: FactLedger, player_input: str, narrator_text: str,
                     diff: FactDiff, report: ConflictReport) -> LLMRequest:
        """One review of the whole initial report; `count` reviews when the auditor asks for several."""
        if self.ref is not None:
            return self._ref_aud(ROLE_DOUBLE_CHECK, "conflict_double_check", RefConflictReview, run, turn,
                                 n=self.setup.auditor.count,
                                 initial_conflicts_json=rf.initial_conflicts(report.conflicts, run.spec, facts,
                                                                             player_input),
                                 **self._ref_conflict_values(run, facts, player_input, narrator_text, diff))
        initial = {**report.model_dump(), "conflicts": [
            {**c.model_dump(), "target_text": target_text(run, facts, c.target_id, player_input)}
            for c in report.conflicts]}
        return self._aud(ROLE_DOUBLE_CHECK, ConflictReview, run, turn, n=self.setup.auditor.count,
                         initial_report=json.dumps(initial, ensure_ascii=False, indent=1),
                         **self._conflict_values(run, facts, player_input, narrator_text, diff))

    def node_update(self, run: "EpisodeRun", turn: int) -> LLMRequest:
        """After the turn was committed: facts F_{t+1} and the history through this turn."""
        if self.ref is not None:
            return self._ref_aud(ROLE_NODE_UPDATE, "trajectory_check", RefNodeAssessment, run, turn,
                                 player_role=rf.role(run.spec, "player"), facts=rf.checker_facts(run.ledger),
                                 history_text=rf.visible_history(run.history),
                                 current_node=rf.checker_node(run.spec, run.node_idx))
        return self._aud(ROLE_NODE_UPDATE, NodeAssessment, run, turn, player_role=run.spec.meta.player_role,
                         facts=render.facts(run.ledger), history=render.interaction_history(run.history),
                         current_node=render.node_trigger_delta(run.spec, run.node_idx))

    def commitment_status(self, run: "EpisodeRun", turn: int) -> LLMRequest:
        ids = tuple(c.id for c in run.spec.commitments)
        if self.ref is not None:
            return self._ref_aud(ROLE_COMMITMENT_STATUS, "status_check", ref_status_model(ids), run, turn,
                                 player_role=rf.role(run.spec, "player"), facts=rf.checker_facts(run.ledger),
                                 history_text=rf.visible_history(run.history),
                                 trajectory_progress=rf.checker_trajectory(run.spec, run.node_idx),
                                 narrative_commitments=rf.commitments(run.spec, run.statuses, "(No commitments)",
                                                                      violation=False))
        return self._aud(ROLE_COMMITMENT_STATUS, status_update_model(ids), run, turn,
                         player_role=run.spec.meta.player_role, facts=render.facts(run.ledger),
                         history=render.interaction_history(run.history),
                         trajectory=_trajectory(run, detail=False),
                         commitments=_commitments(run, violation=False))


def _memo(run: "EpisodeRun", key: tuple, make: Callable[[], str]) -> str:
    got = run.render_memo.get(key)
    if got is None:
        got = run.render_memo[key] = make()
    return got


def _trajectory(run: "EpisodeRun", detail: bool = True) -> str:
    """`render.trajectory` of the run's spec at its node, rendered once per node (a turn's auditors ask it
    several times)."""
    return _memo(run, ("trajectory", run.node_idx, detail),
                 lambda: render.trajectory(run.spec, run.node_idx, detail=detail))


def _commitments(run: "EpisodeRun", violation: bool = True) -> str:
    """`render.commitments` of the run's spec, rendered once per combination of tracked statuses (the key
    holds every status the text shows, so a changed status renders anew)."""
    key = ("commitments", violation, tuple(run.statuses[c.id]["status"] for c in run.spec.commitments))
    return _memo(run, key, lambda: render.commitments(run.spec, run.statuses, violation=violation))


def _reask(sampling: Sampling, depth: int) -> Sampling:
    seed = zlib.crc32(f"hiagent-reask:{sampling.seed}:{depth}".encode()) & 0x7FFFFFFF
    return sampling.model_copy(update={"seed": seed})


def target_text(run: "EpisodeRun", facts: FactLedger, target_id: str, player_input: str) -> str | None:
    """What a conflict's id points at (fact text, commitment text, the player input), or None."""
    if target_id in facts:
        return facts.get(target_id).content
    for c in run.spec.commitments:
        if c.id == target_id:
            return f"{c.description} | violated when: {c.violation_condition}"
    if target_id in ("input", "player_input"):
        return player_input
    return None


def exchange(turn: int, player_input: str | None, narrator_text: str) -> Exchange:
    return Exchange(turn, player_input, narrator_text)
