"""The fact ledger's copy and its rendered-facts memo (issue 24: rendered once per state, copied per turn)."""
from __future__ import annotations

from wse_platform.ncp import ref_format as rf
from wse_platform.ncp import render
from wse_platform.ncp.ledger import FactLedger, LedgerFact
from wse_platform.ncp.schemas import FactDiff


def _ledger() -> FactLedger:
    return FactLedger([LedgerFact("f_0", "The vault is locked."), LedgerFact("f_2", "Lane is a clerk."),
                       LedgerFact("x", "A note.", active=False, negated_turn=0)])


def test_copy_is_independent_and_equal():
    a = _ledger()
    a.apply(FactDiff(add_facts=["A lamp burns."], negate_facts=[], reason="r"), 1)   # fills the duplicate-check cache
    b = a.copy()
    assert b.snapshot() == a.snapshot() and b.next_id() == a.next_id() == "f_4"
    b.apply(FactDiff(add_facts=["a lamp  burns"], negate_facts=["f_0"], reason="r"), 2)   # a duplicate, a negation
    assert a.get("f_0").active and b.get("f_0").negated_turn == 2 and "f_4" not in b
    assert a.snapshot() == _applied_once().snapshot()


def _applied_once() -> FactLedger:
    a = _ledger()
    a.apply(FactDiff(add_facts=["A lamp burns."], negate_facts=[], reason="r"), 1)
    return a


def test_rendered_facts_follow_every_apply_and_never_leak_between_copies():
    a = _ledger()
    before = render.facts(a)
    assert before == "- f_0: The vault is locked.\n- f_2: Lane is a clerk."
    assert rf.facts(a) == before and rf.facts(a, "(nothing)") == before
    assert rf.checker_facts(a) == before
    b = a.copy()
    b.apply(FactDiff(add_facts=["A lamp burns."], negate_facts=["f_0"], reason="r"), 1)
    assert render.facts(b) == "- f_2: Lane is a clerk.\n- f_3: A lamp burns."
    assert rf.facts(b) == rf.checker_facts(b) == render.facts(b)
    assert render.facts(a) == before
    a.apply(FactDiff(add_facts=[], negate_facts=["f_0", "f_2"], reason="r"), 2)
    assert render.facts(a) == "(none)" and rf.facts(a, "(nothing)") == "(nothing)"
    assert rf.checker_facts(a) == "(No explicit fact data available)"


def test_prompt_blocks_memoized_per_run_follow_the_statuses_and_the_node():
    """The commitments and trajectory blocks a turn's requests share are rendered once per state of the run:
    a changed status or node renders anew (the same text as render.commitments / render.trajectory)."""
    from tests.ncp._ncp_helpers import make_spec
    from wse_platform.ncp import prompter
    from wse_platform.ncp.state import EpisodeRun
    run = EpisodeRun.start(make_spec(), "m", "baseline+adversarial", "a")
    for violation in (True, False):
        assert prompter._commitments(run, violation) == render.commitments(run.spec, run.statuses, violation)
    first = prompter._commitments(run)
    cid = run.spec.commitments[0].id
    run.statuses = {**run.statuses, cid: {"status": "SATISFIED", "reason": "done", "turn": 1}}
    assert prompter._commitments(run) == render.commitments(run.spec, run.statuses) != first
    run.statuses[cid] = {"status": "PENDING", "reason": None, "turn": None}   # even changed in place
    assert prompter._commitments(run) == first
    for detail in (True, False):
        t0 = prompter._trajectory(run, detail)
        run.node_idx += 1
        assert prompter._trajectory(run, detail) == render.trajectory(run.spec, run.node_idx, detail) != t0
        run.node_idx -= 1
        assert prompter._trajectory(run, detail) == t0
