"""One NCP-Bench episode's setup (architecture, auditor, models, scale) and its mutable state.

Imported by the prompter, the audit and the loop; it imports none of them (no import cycle).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from wse_platform.llm.types import LLMResult, Sampling
from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.memory import HiAgentMemory
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.roles import ROLE_PLAYER
from wse_platform.ncp.schemas import NARRATOR_MAX_WORDS, PLAYER_MAX_WORDS, FactDiff, word_count
from wse_platform.ncp.spec import NarrativeSpec, TrajectoryNode

LOOP_VERSION = "ncp-loop-2"
PLAY_VERSION = "ncp-play:"  # generation_version of a `wse ncp play` episode: PLAY_VERSION + its session name
AUDITOR_ID_ROLE = "ncp.auditor"  # JudgeConfig.judge_id(role) of an auditor configuration

Termination = Literal["CONFLICT", "SUCCESS", "SURVIVAL", "FAILED", "CENSORED"]  # FAILED: no result


def play_session(generation_version: str | None) -> str | None:
    """The `wse ncp play` session of an episode row (None for the model cells' episodes)."""
    v = generation_version or ""
    return v[len(PLAY_VERSION):] if v.startswith(PLAY_VERSION) else None


# ---- configuration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Architecture:
    """`<narrator>+<player>`: narrator `baseline` (full history), `memory` (HiAgent), `human` or the
    name of a plug-in narrator method (`ncp.narrator_methods`); player mode `adversarial` / `natural`.
    `human-player` is a human typing the player's turns."""

    key: str
    narrator: str  # baseline | memory | human | a narrator method's name
    player: Literal["adversarial", "natural", "human"]

    @classmethod
    def parse(cls, key: str, methods: Any = ()) -> "Architecture":
        if key == "human-player":
            return cls(key, "baseline", "human")
        narrator, sep, player = key.partition("+")
        if not sep or narrator not in ("baseline", "memory", "human", *methods) or player not in ROLE_PLAYER:
            raise ValueError(f"unknown NCP architecture {key!r}: expected '<baseline|memory|human>+"
                             "<adversarial|natural>' or 'human-player'")
        return cls(key, narrator, player)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AuditorSetup:
    model: str
    prompt_version: str = "v1"
    count: int = 1  # independent reviews of a flagged report; a strict majority keeps a conflict

    @property
    def auditor_id(self) -> str:
        return f"{AUDITOR_ID_ROLE}:{self.model}:{self.prompt_version}:x{self.count}"

    @classmethod
    def from_judge(cls, judge: Any) -> "AuditorSetup":
        return cls(judge.model, judge.prompt_version, judge.count)


@dataclass(frozen=True)
class EpisodeSetup:
    narrator_model: str
    arch: Architecture
    player_model: str
    auditor: AuditorSetup
    t_max: int
    sampling: Sampling = field(default_factory=Sampling)
    prompts_dir: str | None = None
    generation_version: str = LOOP_VERSION
    reference: str | None = None  # ncp.reference: a checkout of NLP2CT/NCP-Bench whose prompts are sent
    narrator_trajectory: str = "current_node"  # ncp.narrator_trajectory: "full" also shows the whole R
    method: str | None = None  # "package.module:Class" when the narrator is a plug-in (ncp.narrator_methods)

    @classmethod
    def from_settings(cls, settings: Any, narrator_model: str, arch: str,
                      generation_version: str | None = None, auditor: Any = None) -> "EpisodeSetup":
        ncp = settings.ncp
        auditor = auditor if auditor is not None else ncp.auditor
        missing = [k for k, v in (("ncp.player_model", ncp.player_model), ("ncp.auditor", auditor),
                                  ("ncp.t_max", ncp.t_max)) if v is None]
        if missing:
            raise ValueError(f"NCP episodes need {', '.join(missing)} in the configuration")
        aud = AuditorSetup.from_judge(auditor)
        ref = getattr(ncp, "reference", None)
        if ref:  # the checkout's prompt version is part of the auditor's identity
            from wse_platform.ncp.reference import load
            aud = AuditorSetup(aud.model, load(ref).version, aud.count)
        methods = dict(getattr(ncp, "narrator_methods", None) or {})
        parsed = Architecture.parse(arch, methods)
        return cls(narrator_model=narrator_model, arch=parsed, player_model=ncp.player_model,
                   auditor=aud, t_max=int(ncp.t_max), sampling=ncp.sampling,
                   prompts_dir=settings.prompts_dir, generation_version=generation_version or LOOP_VERSION,
                   reference=ref, narrator_trajectory=getattr(ncp, "narrator_trajectory", "current_node"),
                   method=methods.get(parsed.narrator))


# ---- per-episode state -----------------------------------------------------------------------

@dataclass
class EpisodeRun:
    """Mutable state of one episode (live or replayed)."""

    spec: NarrativeSpec
    model: str
    arch: str
    auditor_id: str
    ledger: FactLedger
    statuses: dict[str, dict[str, Any]]
    node_idx: int = 0
    history: list[Exchange] = field(default_factory=list)
    pending: FactDiff | None = None       # opening updates, applied together with turn 1
    memory: HiAgentMemory | None = None
    turn_rows: list[dict[str, Any]] = field(default_factory=list)
    termination: str | None = None
    last_turn: int = 0                    # last completed turn
    conflict_kinds: list[str] = field(default_factory=list)
    invalid_role: str | None = None
    invalid_message: str | None = None
    failed_turn: int | None = None
    failed_kind: str | None = None
    # prompt blocks rendered from the spec and a state that repeats within a turn (`prompter.py`), by that state
    render_memo: dict[Any, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def start(cls, spec: NarrativeSpec, model: str, arch: str, auditor_id: str,
              memory: HiAgentMemory | None = None) -> "EpisodeRun":
        statuses = {c.id: {"status": "PENDING", "reason": None, "turn": None} for c in spec.commitments}
        return cls(spec, model, arch, auditor_id, FactLedger.from_initial(spec.initial_facts), statuses,
                   memory=memory)

    @property
    def done(self) -> bool:
        return self.termination is not None

    @property
    def current_node(self) -> TrajectoryNode | None:
        return self.spec.trajectory[self.node_idx] if self.node_idx < len(self.spec.trajectory) else None

    def achievements_satisfied(self) -> bool:
        ach = [c.id for c in self.spec.commitments if c.type == "achievement"]
        return bool(ach) and all(self.statuses[c]["status"] == "SATISFIED" for c in ach)

    def end(self, termination: str, turn: int) -> None:
        self.termination = termination
        self.last_turn = turn

    @property
    def failed(self) -> bool:
        return self.termination == "FAILED"

    def fail(self, result: LLMResult, turn: int, row: dict[str, Any] | None,
             last_completed: int | None = None) -> None:
        """No result: a call still failed after the client's retries."""
        assert result.failure is not None
        self.fail_with(result.failure.role, f"{result.failure.error_kind}: {result.failure.message}", turn, row,
                       last_completed, kind=result.failure.error_kind)

    def fail_with(self, role: str, message: str, turn: int, row: dict[str, Any] | None,
                  last_completed: int | None = None, kind: str = "invalid_output") -> None:
        """No result for this episode (FAILED): the role, the turn and the reason are kept for
        `ncp_failed_episodes`; the episode is played again by the next run."""
        self.invalid_role = role
        self.invalid_message = message
        self.failed_turn = turn
        self.failed_kind = kind
        if row is not None:
            row["outcome"] = "FAILED"
            row["invalid_role"] = role
        self.end("FAILED", last_completed if last_completed is not None else max(turn - 1, 0))

    def failure_row(self, generation_version: str) -> dict[str, Any]:
        return {"model": self.model, "arch": self.arch, "spec_id": self.spec.spec_id,
                "eval_order": self.spec.eval_order, "auditor_id": self.auditor_id, "turn": self.failed_turn,
                "role": self.invalid_role, "error_kind": self.failed_kind, "message": self.invalid_message,
                "generation_version": generation_version}

    def word_stats(self) -> dict[str, Any]:
        return word_stats(self.turn_rows)

    def episode_row(self, generation_version: str) -> dict[str, Any]:
        n_nodes = len(self.spec.trajectory)
        n_comm = len(self.spec.commitments)
        satisfied = sum(s["status"] == "SATISFIED" for s in self.statuses.values())
        return {
            "model": self.model, "arch": self.arch, "spec_id": self.spec.spec_id,
            "eval_order": self.spec.eval_order, "auditor_id": self.auditor_id, "turns": self.last_turn,
            "termination": self.termination, "conflict_kinds": list(self.conflict_kinds),
            "nodes_completed": self.node_idx, "nodes_total": n_nodes,
            "trajectory_progress": self.node_idx / n_nodes if n_nodes else 0.0,
            "commitments_satisfied": satisfied, "commitments_total": n_comm,
            "commitments_satisfied_share": satisfied / n_comm if n_comm else 0.0,
            "invalid_role": self.invalid_role, "invalid_message": self.invalid_message,
            **self.word_stats(), "generation_version": generation_version,
        }


def word_stats(turn_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Words per response of an episode's turn rows (the opening included): the `ncp_episodes` columns."""
    narr = [r["narrator_words"] for r in turn_rows if r.get("narrator_text")]
    play = [r["player_words"] for r in turn_rows if r.get("player_input")]
    return {"narrator_responses": len(narr), "narrator_words_mean": sum(narr) / len(narr) if narr else None,
            "narrator_over_limit": sum(w > NARRATOR_MAX_WORDS for w in narr),
            "player_inputs": len(play), "player_words_mean": sum(play) / len(play) if play else None,
            "player_over_limit": sum(w > PLAYER_MAX_WORDS for w in play)}


def new_turn_row(run: EpisodeRun, turn: int, player_input: str | None, narrator_text: str | None) -> dict[str, Any]:
    return {
        "model": run.model, "arch": run.arch, "spec_id": run.spec.spec_id, "auditor_id": run.auditor_id,
        "turn": turn, "node_before": run.current_node.id if run.current_node else None, "node_after": None,
        "player_input": player_input, "narrator_text": narrator_text, "fact_diff_json": None,
        "conflict_report_json": None, "node_assessment_json": None, "commitment_status_json": None,
        "ledger_snapshot_json": None, "memory_json": None, "outcome": None, "invalid_role": None,
        "player_words": word_count(player_input) if player_input else None,
        "narrator_words": word_count(narrator_text) if narrator_text else None, "llm_call_ids": [],
    }


def set_text(row: dict[str, Any], column: str, text: str) -> None:
    row[column] = text
    row["narrator_words" if column == "narrator_text" else "player_words"] = word_count(text)
