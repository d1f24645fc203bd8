"""Narrator methods as plug-ins: `ncp.narrator_methods: {name: "package.module:Class"}`.

A method follows the reference's narrator contract (NLP2CT/NCP-Bench `narrator.py`): it is built
with one argument, its model client: an object with `complete(messages, *, stage) -> str` (the
reference's `TextGenerationClient`), itself callable the same way, and implements
`open(OpeningRequest) -> response` and `respond(NarratorRequest) -> response`, a response being
any object with a non-empty `text`; `start_episode(EpisodeContext)` and `close_episode()` are
optional. It never sees the auditors. The requests carry what the reference's runner gives a
narrator (its field names and shapes; turn ids from 0, the opening at -1). `complete` goes through
the platform's one LLM call path with the cell's narrator model (cache, retries, accounting), so
a method is evaluated like the built-in architectures: architecture `<name>+adversarial` or
`<name>+natural`, its own cells, the same audit.

A method that raises, or whose model call still fails after retries, leaves the episode without a
result (as in the reference, where the exception stops the run).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wse_platform.llm.errors import LLMInfrastructureError
from wse_platform.llm.types import LLMRequest, LLMResult

ROLE_METHOD = "ncp.narrator_method"  # the role of a plug-in narrator's own model calls


@dataclass(frozen=True)
class Fact:
    id: str
    text: str
    active: bool = True


@dataclass(frozen=True)
class Commitment:
    id: str
    kind: str
    description: str
    satisfaction_condition: str
    violation_condition: str
    status: str = "pending"


@dataclass(frozen=True)
class TrajectoryNode:
    id: str
    description: str
    trigger_event: str
    key_delta: str
    occurred: bool = False


@dataclass(frozen=True)
class StoryTurn:
    turn_id: int
    player_input: str | None
    narrator_response: str | None


@dataclass(frozen=True)
class PendingFactUpdates:
    add_facts: tuple[str, ...] = ()
    negate_fact_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class EpisodeContext:
    episode_id: str
    player_role: str
    trajectory: tuple[TrajectoryNode, ...]


@dataclass(frozen=True)
class OpeningRequest:
    player_role: str
    active_facts: tuple[Fact, ...]
    commitments: tuple[Commitment, ...]
    trajectory: tuple[TrajectoryNode, ...]


@dataclass(frozen=True)
class NarratorRequest:
    turn_id: int
    player_role: str
    player_input: str
    history: tuple[StoryTurn, ...]
    active_facts: tuple[Fact, ...]
    commitments: tuple[Commitment, ...]
    trajectory: tuple[TrajectoryNode, ...]
    current_node_id: str | None
    pending_fact_updates: PendingFactUpdates = PendingFactUpdates()


@dataclass(frozen=True)
class NarratorResponse:
    text: str


class MethodCallFailed(RuntimeError):
    """`complete` failed after the client's retries (the episode gets no result)."""

    def __init__(self, result: LLMResult):
        assert result.failure is not None
        super().__init__(f"{result.failure.error_kind}: {result.failure.message}")
        self.result = result


def load_method(name: str, target: str) -> type:
    """The class named by "package.module:Class" (config `ncp.narrator_methods.<name>`)."""
    module_name, sep, cls_name = target.partition(":")
    where = f"ncp.narrator_methods.{name}"
    if not sep or not module_name or not cls_name:
        raise ValueError(f"{where}: {target!r} must look like 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"{where}: cannot import {module_name!r} ({err}); install the package or fix the "
                         "path") from None
    cls = getattr(module, cls_name, None)
    if cls is None or not callable(cls):
        raise ValueError(f"{where}: {module_name!r} has no class {cls_name!r}")
    for method in ("open", "respond"):
        if not callable(getattr(cls, method, None)):
            raise ValueError(f"{where}: {target} lacks the narrator method {method}(request)")
    return cls


def _facts(run: Any) -> tuple[Fact, ...]:
    return tuple(Fact(f.id, f.content) for f in run.ledger.active())


def _commitments(run: Any) -> tuple[Commitment, ...]:
    return tuple(Commitment(c.id, c.type, c.description, c.satisfaction_condition, c.violation_condition,
                            str(run.statuses[c.id]["status"]).lower()) for c in run.spec.commitments)


def _trajectory(run: Any) -> tuple[TrajectoryNode, ...]:
    return tuple(TrajectoryNode(n.id, n.description, n.trigger_event, n.key_delta, i < run.node_idx)
                 for i, n in enumerate(run.spec.trajectory))


def _history(run: Any) -> tuple[StoryTurn, ...]:
    return tuple(StoryTurn(-1 if ex.player is None else ex.turn - 1, ex.player, ex.narrator) for ex in run.history)


class _Client:
    """The model client handed to a method: `client.complete(...)` (the reference's protocol) or `client(...)`."""

    def __init__(self, complete: Callable[..., str]):
        self.complete = complete

    def __call__(self, messages: Sequence[Mapping[str, str]], *, stage: str = "method") -> str:
        return self.complete(messages, stage=stage)


class MethodNarrators:
    """One plug-in instance per episode; its `complete` calls go through the one client."""

    def __init__(self, client: Any, setup: Any, cls: type):
        self.client, self.setup, self.cls = client, setup, cls
        self._instances: dict[int, Any] = {}
        self._at: dict[int, tuple[int, dict[str, Any]]] = {}

    def _complete_for(self, run: Any) -> Callable[..., str]:
        def complete(messages: Sequence[Mapping[str, str]], *, stage: str = "method") -> str:
            turn, row = self._at[id(run)]
            req = LLMRequest(role=ROLE_METHOD, model=self.setup.narrator_model,
                             messages=[dict(m) for m in messages], sampling=self.setup.sampling,
                             tags={"spec_id": run.spec.spec_id, "arch": run.arch, "turn": str(turn),
                                   "stage": stage})
            (res,) = self.client.complete_many([req])
            row["llm_call_ids"].extend(res.call_ids)
            if not res.ok:
                raise MethodCallFailed(res)
            return res.output
        return complete

    def _call(self, run: Any, turn: int, row: dict[str, Any], act: Callable[[Any], Any]) -> str | None:
        self._at[id(run)] = (turn, row)
        try:
            text = getattr(act(self._instances[id(run)]), "text", None)
        except MethodCallFailed as err:
            assert err.result.failure is not None
            run.fail(err.result, turn, row)
            return None
        except LLMInfrastructureError:  # the environment, not the method: handled like any other episode's
            raise
        except Exception as err:  # noqa: BLE001 - a plug-in's own error ends its episode without a result
            run.fail_with(ROLE_METHOD, f"method_error: {type(err).__name__}: {err}", turn, row, kind="method_error")
            return None
        if not isinstance(text, str) or not text.strip():
            run.fail_with(ROLE_METHOD, "empty_output: the method returned no text", turn, row, kind="empty_output")
            return None
        return text.strip()

    def open(self, run: Any, row: dict[str, Any]) -> str | None:
        self._at[id(run)] = (0, row)
        try:
            inst = self.cls(_Client(self._complete_for(run)))
            if callable(getattr(inst, "start_episode", None)):
                inst.start_episode(EpisodeContext(run.spec.spec_id, run.spec.meta.player_role, _trajectory(run)))
        except LLMInfrastructureError:
            raise
        except Exception as err:  # noqa: BLE001
            run.fail_with(ROLE_METHOD, f"method_error: {type(err).__name__}: {err}", 0, row, kind="method_error")
            return None
        self._instances[id(run)] = inst
        request = OpeningRequest(run.spec.meta.player_role, _facts(run), _commitments(run), _trajectory(run))
        return self._call(run, 0, row, lambda m: m.open(request))

    def respond(self, run: Any, turn: int, player_input: str, row: dict[str, Any]) -> str | None:
        current = run.current_node.id if run.current_node is not None else None
        pending = PendingFactUpdates(tuple(run.pending.add_facts), tuple(run.pending.negate_facts)) \
            if run.pending is not None else PendingFactUpdates()
        request = NarratorRequest(turn - 1, run.spec.meta.player_role, player_input, _history(run), _facts(run),
                                  _commitments(run), _trajectory(run), current, pending)
        return self._call(run, turn, row, lambda m: m.respond(request))

    def close(self) -> None:
        for inst in self._instances.values():
            if callable(getattr(inst, "close_episode", None)):
                try:
                    inst.close_episode()
                except Exception:  # noqa: BLE001 - closing never changes a result
                    pass
