"""`wse ncp play`: a human plays the narrator (paper Table 5) or the player in the terminal.

The human is a backend of the one LLM client (model name `human`): each time the loop asks
the human's role for an output, the terminal shows what that role sees (the narrator: its
whole prompt input, i.e. node, trajectory, commitments, facts, history and the player's
input; the player: the visible story) and reads the answer (end it with a line holding only
"." or with end of input). Everything else is the configured loop: player model (or narrator
model) and the in-loop auditor. The episode is written to the warehouse like any other, as
architecture `human+adversarial` (model `human`) or `human-player` (model = the narrator).

Resume after Ctrl-C: every answer, the human's included, goes through the response cache, so
running the same command again replays the finished turns from the cache (no model is asked
again, the human is not asked again) and continues where the session stopped. `--session`
names a fresh session for another human on the same spec.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TextIO

from wse_platform.llm.backends.base import Backend, BackendCall, BackendResponse, OnResult
from wse_platform.ncp.episode import (AuditorSetup, Architecture, EpisodeBatchResult, EpisodeSetup, episode_frame,
                                      run_episodes, turn_frame)
from wse_platform.ncp.spec import NCP_DATASET_DIR, NarrativeSpec, load_spec_file
from wse_platform.ncp.state import PLAY_VERSION

HUMAN = "human"
ARCH = {"narrator": "human+adversarial", "player": "human-player"}


class HumanBackend(Backend):
    """Reads each requested output from `stdin`; end of input means the human stopped (Ctrl-D /
    Ctrl-C): `KeyboardInterrupt`, after which the finished turns are in the cache."""

    name = "human"

    def __init__(self, stdin: TextIO, stdout: TextIO, session: str):
        self.stdin, self.stdout, self.session = stdin, stdout, session
        self.asked = 0

    def cache_namespace(self) -> str:
        return f"human:{self.session}"

    def _read(self) -> str:
        lines: list[str] = []
        while True:
            line = self.stdin.readline()
            if line == "":  # end of input
                if lines and "".join(lines).strip():
                    break
                raise KeyboardInterrupt
            if line.strip() == ".":
                if "".join(lines).strip():
                    break
                self.stdout.write("(empty answer; type your text, end with a line '.')\n")
                continue
            lines.append(line)
        return " ".join(" ".join(lines).split())

    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        out = []
        for i, call in enumerate(calls):
            shown = next((m["content"] for m in reversed(call.messages) if m["role"] == "user"), "")
            self.stdout.write(f"\n===== {call.role} =====\n{shown}\n----- your answer (end with '.') -----\n")
            self.stdout.flush()
            text = self._read()
            self.asked += 1
            raw = json.dumps({"text": text}) if call.json_schema is not None else text
            resp = BackendResponse(texts=[raw] * call.n)
            out.append(resp)
            if on_result is not None:
                on_result(i, resp)
        return out


@dataclass
class PlayOutcome:
    result: EpisodeBatchResult | None   # None: interrupted (rerun to resume)
    human_answers: int


def load_play_spec(spec_id: str) -> NarrativeSpec:
    spec, problems = load_spec_file(NCP_DATASET_DIR / "specs" / f"{spec_id}.yaml")
    if spec is None:
        raise ValueError(f"spec {spec_id!r}: " + "; ".join(p.line() for p in problems))
    return spec


def play(settings: Any, spec: NarrativeSpec, as_: str, stdin: TextIO, stdout: TextIO,
         narrator_model: str | None = None, session: str | None = None,
         backends: dict[str, Backend] | None = None, warehouse: Any = None) -> PlayOutcome:
    """Run one episode with a human in role `as_` ("narrator" or "player"); write it when it ends."""
    from wse_platform.llm import LLMClient

    if as_ not in ARCH:
        raise ValueError(f"--as must be narrator or player, not {as_!r}")
    ncp = settings.ncp
    if ncp.auditor is None or ncp.t_max is None:
        raise ValueError("wse ncp play needs ncp.auditor and ncp.t_max in the configuration")
    if as_ == "narrator":
        narrator, player = HUMAN, ncp.player_model
    else:
        narrator, player = narrator_model or (ncp.narrators[0] if ncp.narrators else None), HUMAN
    if narrator is None or player is None:
        raise ValueError("wse ncp play needs ncp.player_model (human narrator) or a narrator model")
    human = HumanBackend(stdin, stdout, session or f"{spec.spec_id}-{as_}")
    client = LLMClient(settings, use_cache=True, backends={**(backends or {}), HUMAN: human}, progress=False)
    setup = EpisodeSetup(narrator_model=narrator, arch=Architecture.parse(ARCH[as_]), player_model=player,
                         auditor=AuditorSetup.from_judge(ncp.auditor), t_max=int(ncp.t_max), sampling=ncp.sampling,
                         prompts_dir=settings.prompts_dir, generation_version=f"{PLAY_VERSION}{human.session}")
    try:
        result = run_episodes(client, [spec], setup)
    except KeyboardInterrupt:
        stdout.write("\nStopped. The finished turns are saved; run the same command again to resume.\n")
        return PlayOutcome(None, human.asked)
    if not result.episode_rows():  # a call still failed after retries: no result, as in the reference
        (f,) = result.failed_rows()
        stdout.write(f"\nNo result: {f['role']} failed at turn {f['turn']} ({f['message']}); run the same "
                     "command again to retry.\n")
        return PlayOutcome(result, human.asked)
    (ep,) = result.episode_rows()
    stdout.write(f"\nEpisode over: {ep['termination']} after {ep['turns']} turns; nodes {ep['nodes_completed']}/"
                 f"{ep['nodes_total']}, commitments satisfied {ep['commitments_satisfied']}/"
                 f"{ep['commitments_total']}.\n")
    if warehouse is not None:
        key = {"model": ep["model"], "arch": ep["arch"], "spec_id": ep["spec_id"]}
        # one episode row and one transcript per session: two humans' sessions on a spec (Table 5's
        # resolve-all and max-survival) coexist; rerunning a session replaces only its own rows
        turns = turn_frame([{**r, "session": human.session} for r in result.turn_rows()])
        warehouse.replace_partition("ncp_episodes", episode_frame(result.episode_rows()),
                                    {**key, "generation_version": ep["generation_version"]})
        warehouse.replace_partition("ncp_turns", turns, {**key, "session": human.session})
    return PlayOutcome(result, human.asked)


def main(settings: Any, spec_id: str, as_: str, narrator_model: str | None = None,
         session: str | None = None) -> int:
    """Entry point of `wse ncp play` (terminal stdin/stdout, the configured warehouse)."""
    import sys

    from wse_platform.warehouse import Warehouse

    spec = load_play_spec(spec_id)
    out = play(settings, spec, as_, sys.stdin, sys.stdout, narrator_model=narrator_model, session=session,
               warehouse=Warehouse(settings.warehouse))
    return 0 if out.result is not None else 130
