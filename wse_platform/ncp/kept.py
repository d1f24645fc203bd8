"""The in-loop auditor's answers, kept in this process for the re-audit of the same run (`wse_platform.kept_answers`).

`ncp_reaudit_episodes` replays a cell's stored transcripts under the in-loop auditor first (the
replay baseline): every request it builds is one the live episodes of `ncp_episodes` asked, so
each was answered from the response cache (~1,300 cache hits per cell at 100 specs, T_max 3, all
after the cell's last answer). When both steps run in the same process and run (one `wse
materialize` run of the cell, executed in process), `ncp_episodes` keeps the auditor's valid
answers here (`keeping`) and the re-audit takes them (`answered`) instead of replaying them
through the client. Only answers given at the first attempt are kept: the cache replays a later
valid attempt only within the re-audit's attempt budget, which may be smaller than the live one
(a retry round), so those go through the client as before; so does every failed or differing
request, another process or run, and `--no-cache`. The answers are the cache's, so the rows are
the same; `llm_call_ids` then name the live calls' `llm_calls` rows instead of cache-hit rows
of their own. The answers' parsed outputs are only read by the audit (`audit.py`), never changed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from wse_platform.kept_answers import AnsweredClient, EarlyAnswers, KeepingClient, KeptOnlyClient, KeptSets
from wse_platform.ncp.roles import AUDITOR_ROLES

ANSWERS = EarlyAnswers()

# re-audit replays made while the live episodes ran, per (run id, cell), until the re-audit takes them:
# transcript key -> (transcript, `reaudit.replay_params`, spec, runs) (the `early` of `reaudit.reaudit`)
REPLAYS = KeptSets()


def _auditor_answer(req: Any, result: Any) -> bool:
    return req.role in AUDITOR_ROLES and getattr(result, "attempts", 1) == 1


def _on(client: Any) -> bool:
    return getattr(client, "use_cache", False) and getattr(client, "run_id", None) is not None


def keeping(client: Any, cell: str, answers: EarlyAnswers = ANSWERS) -> Any:
    """`client` for the live episodes of `cell`, keeping the auditor's valid first-attempt answers
    for the re-audit of this run (the client itself without the cache)."""
    return KeepingClient(client, answers, cell, _auditor_answer) if _on(client) else client


def answered(client: Any, cell: str, answers: EarlyAnswers = ANSWERS) -> Any:
    """`client` for the re-audit of `cell`, answering the requests the live episodes of this run
    asked from their kept answers (the client itself when there are none, or without the cache)."""
    if not _on(client):
        return client
    kept = answers.take(client.run_id, cell)
    return AnsweredClient(client, kept) if kept else client


def replaying(client: Any, cell: str, specs: Mapping[str, Any], auditor: Any, *, t_max: int | None,
              prompts_dir: str | None, sampling: Any, answers: EarlyAnswers = ANSWERS,
              replays: KeptSets = REPLAYS) -> Callable[[list], None] | None:
    """`run_episodes(on_episode=...)` for the live episodes of `cell` (`client` as `keeping` got it): each
    episode, as soon as it has ended, replayed under `auditor` (the in-loop one) from the answers kept
    for it, kept in `replays` for the re-audit of this run (`early_replays`), which then only writes
    rows after the cell's last answer. An episode with an answer not kept (a retried or failed call) is
    left to the re-audit, as is everything without the cache (None then)."""
    if not _on(client):
        return None
    from wse_platform.ncp.reaudit import reaudit, replay_params, transcripts_from_rows
    run_id = client.run_id
    params = replay_params(auditor, t_max, prompts_dir, sampling)

    def done(runs: list) -> None:
        for run in runs:
            if run.failed:   # no rows stored: nothing to replay
                continue
            try:
                trs = transcripts_from_rows(run.turn_rows)
                if len(trs) != 1 or trs[0].spec_id not in specs:
                    continue
                tr, spec = trs[0], specs[trs[0].spec_id]
                res = reaudit(KeptOnlyClient(client, answers.peek(run_id, cell)), {tr.spec_id: spec}, [tr], auditor,
                              t_max=t_max, prompts_dir=prompts_dir, sampling=sampling)
            except Exception:  # noqa: BLE001 - an answer not kept (NotKept) or anything else: the re-audit replays it
                continue
            replays.add(run_id, cell, {tr.key: (tr, params, spec, res.runs)})
    return done


def early_replays(client: Any, cell: str, replays: KeptSets = REPLAYS) -> dict[tuple, tuple]:
    """The replays `replaying` made for `cell` in this run (taken once; empty without the cache)."""
    return replays.take(client.run_id, cell) if _on(client) else {}
