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

from typing import Any

from wse_platform.kept_answers import AnsweredClient, EarlyAnswers, KeepingClient
from wse_platform.ncp.roles import AUDITOR_ROLES

ANSWERS = EarlyAnswers()


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
