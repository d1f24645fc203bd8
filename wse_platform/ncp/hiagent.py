"""The HiAgent narrator step of a batch of episodes, as the reference method runs it.

Per turn: the previous narration and the player's new input enter the memory; then the control
prompt is built — the baseline narrator's prompt (the whole history) plus the memory window, each
summary it shows requested for this prompt (the reference regenerates them; the response cache
answers identical requests), the window cut from its oldest chunk while the whole request is over
the token budget (counted with tiktoken, `tokens.py`) — and sent. A proposed subgoal enters the
memory; a retrieve adds its ids (an id that names no finished subgoal matches nothing: ignored) and
the prompt is built and sent again, at most `max_retrieve_depth` times; the next retrieve, or a
retrieve without readable ids (reference mode), leaves the episode without a result. A re-ask is a
fresh sample (its own sampling seed), as the reference's new call is, not a replay of the cache.

The prompts are ours (`memory_hiagent`, `memory_summary`) or, with `ncp.reference`, the reference
checkout's (`hiagent_ref.py`); the algorithm is the same.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wse_platform.llm.limiter import expect, hint_left
from wse_platform.llm.types import LLMRequest
from wse_platform.ncp import tokens
from wse_platform.ncp.audit import add_calls, dump
from wse_platform.ncp.memory import MemoryTexts, SummaryJob, cap_summary
from wse_platform.ncp.roles import ROLE_HIAGENT
from wse_platform.ncp.state import set_text

if TYPE_CHECKING:
    from wse_platform.ncp.prompter import Prompter
    from wse_platform.ncp.state import EpisodeRun


def narrate(client: Any, prompter: "Prompter", runs: list["EpisodeRun"], turn: int, inputs: dict[int, str],
            rows: dict[int, dict[str, Any]]) -> dict[int, str]:
    """The narration of each episode of `runs` (every one has a memory); failed episodes are left out."""
    texts = prompter.hiagent_texts()
    count = tokens.counter(texts.tokenizer_model)
    out: dict[int, str] = {}
    steps: dict[int, list[dict[str, Any]]] = {id(r): [] for r in runs}
    for r in runs:
        r.memory.observe(inputs[id(r)], texts)
    todo = list(runs)
    for depth in range(texts.max_retrieve_depth + 1):
        info: dict[int, dict[str, Any]] = {}
        reqs = _prompts(client, prompter, todo, turn, inputs, rows, depth, texts, count, info)
        todo = [r for r in todo if id(r) in reqs]
        if not todo:
            break
        again = []
        for r, res in zip(todo, client.complete_many([reqs[id(r)] for r in todo])):
            row = rows[id(r)]
            add_calls(row, res)
            if not res.ok:
                r.fail(res, turn, row)
                continue
            subgoal, text, ids = res.output.decision()
            steps[id(r)].append({"subgoal": subgoal, "text": text, "retrieve": ids, **info[id(r)]})
            if subgoal is not None:
                r.memory.propose(subgoal)
            if ids is None:
                r.memory.act(text)
                out[id(r)] = text
                set_text(row, "narrator_text", text)
            elif not ids:
                r.fail_with(ROLE_HIAGENT, "invalid_retrieve: a retrieve command without readable subgoal ids",
                            turn, row, kind="invalid_retrieve")
            elif depth == texts.max_retrieve_depth:
                r.fail_with(ROLE_HIAGENT, "invalid_retrieve: retrieve depth exceeded", turn, row,
                            kind="invalid_retrieve")
            else:
                r.memory.retrieve(ids)
                again.append(r)
            row["memory_json"] = dump({"steps": steps[id(r)], **r.memory.as_dict()})
        todo = again
    return out


def _prompts(client: Any, prompter: "Prompter", runs: list["EpisodeRun"], turn: int, inputs: dict[int, str],
             rows: dict[int, dict[str, Any]], depth: int, texts: MemoryTexts, count: tokens.TokenCounter,
             info: dict[int, dict[str, Any]]) -> dict[int, LLMRequest]:
    """The control request of each episode: summaries requested for this prompt, window cut to the budget."""
    drop = {id(r): 0 for r in runs}
    got: dict[int, dict[SummaryJob, str]] = {id(r): {} for r in runs}
    out: dict[int, LLMRequest] = {}
    todo = list(runs)
    while todo:
        jobs = [(r, j) for r in todo
                for j in dict.fromkeys(r.memory.summary_jobs(r.memory.window(texts, drop[id(r)]), texts))
                if j not in got[id(r)]]
        if jobs:
            left = hint_left()
            results = client.complete_many([prompter.subgoal_summary(r, turn, j) for r, j in jobs])
            # the limiter's hint counts server requests: the summaries the cache answered are not among them
            expect(left - sum(1 for res in results if not res.cache_hit))
            for (r, j), res in zip(jobs, results):
                add_calls(rows[id(r)], res)
                if r.done:
                    continue
                if not res.ok:
                    r.fail(res, turn, rows[id(r)])
                    continue
                got[id(r)][j] = cap_summary(res.output.summary, texts.summary_max_chars)
        longer = []
        for r in (r for r in todo if not r.done):
            window = r.memory.window(texts, drop[id(r)])
            req = prompter.hiagent(r, turn, inputs[id(r)], r.memory.render(window, texts, got[id(r)]),
                                   r.memory.ends_with_subgoal(window), depth)
            n = count("\n".join(m["content"] for m in req.messages))
            if n > texts.max_input_tokens and len(window) > 1:
                drop[id(r)] += 1
                longer.append(r)
                continue
            out[id(r)] = req
            info[id(r)] = {"window_chunks": len(window), "prompt_tokens": n, "tokenizer": count.name,
                           "summaries": {j.subgoal: got[id(r)][j] for j in r.memory.summary_jobs(window, texts)}}
        todo = longer
    return out
