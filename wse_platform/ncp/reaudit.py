"""Re-audit stored NCP transcripts with another auditor configuration (paper Table 2).

This is the *second, cheaper* analysis of auditor sensitivity ("re-audit"): the paper's
Table 2 runs live episodes with each auditor in the loop (`ablation.py`). Only the auditor
stages run (opening fact extraction, then per turn fact update, conflict check,
double-check, node update, commitment status) over the stored player inputs and narrator
responses, turn by turn and in lockstep across episodes; the narrator and the player are
never called. The
replayed ledger, node and commitment state start again from the spec. The first
confirmed conflict ends the replayed episode as CONFLICT; a transcript that runs out
without one is censored at its last stored turn (CENSORED, or SURVIVAL when the stored
transcript reached T_max); a replay whose auditor call still fails after retries has no result
(FAILED: left out of the replay rows, as a failed live episode is, and listed in
`ncp_failed_episodes` with analysis `ncp_reaudit_episodes`). Each transcript is replayed on its
own (`failures.each_episode`), so a transport failure ends only its replay, unless every replay
that reached the server failed so (then the run fails: the server is down).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from wse_platform.ncp.audit import PendingTurn, audit_openings, audit_turns, dump
from wse_platform.ncp.episode import (LOOP_VERSION, Architecture, AuditorSetup, EpisodeBatchResult, EpisodeRun,
                                      EpisodeSetup, new_turn_row)
from wse_platform.ncp.failures import each_episode
from wse_platform.ncp.prompter import Prompter
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.spec import NarrativeSpec


class TranscriptError(ValueError):
    """A stored transcript cannot be replayed (names the episode and the turn)."""


@dataclass(frozen=True)
class StoredTurn:
    turn: int
    player_input: str | None
    narrator_text: str | None


@dataclass
class Transcript:
    model: str
    arch: str
    spec_id: str
    turns: list[StoredTurn]  # turn 0 (opening) first

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.model, self.arch, self.spec_id)

    def replayable(self) -> list[StoredTurn]:
        """Turns 1.. with both a player input and a narrator response, up to the first gap."""
        out = []
        for st in self.turns:
            if st.turn == 0:
                continue
            if st.player_input is None or st.narrator_text is None or st.turn != len(out) + 1:
                break
            out.append(st)
        return out


def transcripts_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Transcript]:
    """Group `ncp_turns` rows (model, arch, spec_id, turn, player_input, narrator_text) per episode."""
    by_key: dict[tuple[str, str, str], list[StoredTurn]] = {}
    for r in rows:
        for col in ("model", "arch", "spec_id", "turn"):
            if r.get(col) is None:
                raise TranscriptError(f"ncp_turns row {dict(r)!r}: missing {col}")
        key = (r["model"], r["arch"], r["spec_id"])
        by_key.setdefault(key, []).append(StoredTurn(int(r["turn"]), r.get("player_input"), r.get("narrator_text")))
    out = []
    for key, turns in sorted(by_key.items()):
        turns.sort(key=lambda s: s.turn)
        seen = [s.turn for s in turns]
        if len(set(seen)) != len(seen):
            raise TranscriptError(f"episode {key}: duplicate turn numbers {seen}")
        out.append(Transcript(*key, turns))
    return out


def replay_params(auditor: AuditorSetup, t_max: int | None, prompts_dir: str | None, sampling: Any) -> tuple:
    """What a replay's result depends on besides its transcript, its spec and the auditor's answers."""
    return (auditor, t_max, prompts_dir, sampling)


def reaudit(client: Any, specs: Mapping[str, NarrativeSpec], transcripts: list[Transcript],
            auditor: AuditorSetup, t_max: int | None = None, prompts_dir: str | None = None,
            sampling: Any = None, early: Mapping[tuple, tuple] | None = None) -> EpisodeBatchResult:
    """Replay `transcripts` under `auditor`; one result per transcript (rows carry auditor_id), each
    transcript on its own (`failures.each_episode`: a transport failure ends only its replay).
    `early`: transcript key -> (transcript, `replay_params`, spec, runs) of replays already made (`ncp/kept.py`:
    while the live episodes ran); a transcript whose entry has the same transcript, parameters and spec
    takes its runs, the others are replayed here. Every replay is one transcript's own, so the result is
    the one replaying them all here gives."""
    params = replay_params(auditor, t_max, prompts_dir, sampling)
    done: dict[tuple, list[EpisodeRun]] = {}
    for tr in transcripts:
        e = (early or {}).get(tr.key)
        if e is not None and e[0] == tr and e[1] == params and tr.spec_id in specs and e[2] == specs[tr.spec_id]:
            done[tr.key] = e[3]
    if done:
        rest = [tr for tr in transcripts if tr.key not in done]
        runs = iter(reaudit(client, specs, rest, auditor, t_max, prompts_dir, sampling).runs if rest else [])
        merged = [r for tr in transcripts for r in (done[tr.key] if tr.key in done else [next(runs)])]
        return EpisodeBatchResult(merged, f"{LOOP_VERSION}:reaudit")
    kwargs = {"sampling": sampling} if sampling is not None else {}
    # Narrator/player fields are placeholders: the prompter is only asked for auditor requests.
    setup = EpisodeSetup(narrator_model="(replay)", arch=Architecture.parse("baseline+adversarial"),
                         player_model="(replay)", auditor=auditor, t_max=t_max or 0, prompts_dir=prompts_dir,
                         generation_version=f"{LOOP_VERSION}:reaudit", **kwargs)
    for tr in transcripts:
        if tr.spec_id not in specs:
            raise TranscriptError(f"episode {tr.key}: spec {tr.spec_id!r} is not among the loaded specs")
    runs = each_episode(client, transcripts, lambda c, tr: _replay(c, Prompter(setup), specs, [tr], auditor, t_max),
                        lambda tr: EpisodeRun.start(specs[tr.spec_id], tr.model, tr.arch, auditor.auditor_id),
                        models=[auditor.model])
    return EpisodeBatchResult(runs, setup.generation_version)


def _replay(client: Any, prompter: Prompter, specs: Mapping[str, NarrativeSpec], transcripts: list[Transcript],
            auditor: AuditorSetup, t_max: int | None) -> list[EpisodeRun]:
    """Replay `transcripts` in lockstep (each auditor stage one `complete_many` over the active replays)."""
    runs: list[EpisodeRun] = []
    plans: dict[int, list[StoredTurn]] = {}
    for tr in transcripts:
        run = EpisodeRun.start(specs[tr.spec_id], tr.model, tr.arch, auditor.auditor_id)
        opening = next((s for s in tr.turns if s.turn == 0 and s.narrator_text is not None), None)
        row0 = new_turn_row(run, 0, None, opening.narrator_text if opening else None)
        row0["ledger_snapshot_json"] = dump(run.ledger.snapshot())
        run.turn_rows.append(row0)
        if opening is not None:
            run.history.append(Exchange(0, None, opening.narrator_text))
        runs.append(run)
        plans[id(run)] = tr.replayable()
    audit_openings(client, prompter, [(run, run.turn_rows[0]) for run in runs])

    horizon = max((len(p) for p in plans.values()), default=0)
    for t in range(1, horizon + 1):
        pending = []
        for run in runs:
            if run.done:
                continue
            plan = plans[id(run)]
            if t > len(plan):  # the stored transcript ran out without a confirmed conflict
                run.end("SURVIVAL" if t_max is not None and len(plan) >= t_max else "CENSORED", len(plan))
                continue
            st = plan[t - 1]
            row = new_turn_row(run, t, st.player_input, st.narrator_text)
            run.turn_rows.append(row)
            pending.append(PendingTurn(run, t, st.player_input, st.narrator_text, row))
        if not pending:
            break
        audit_turns(client, prompter, pending)
    for run in runs:
        if not run.done:
            n = len(plans[id(run)])
            run.end("SURVIVAL" if t_max is not None and n >= t_max else "CENSORED", n)
    return runs
