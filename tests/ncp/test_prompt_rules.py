"""Our own NCP prompts carry every rule of the reference prompts (the list: wse_platform/ncp/prompt_rules.py)."""
from __future__ import annotations

import re

import pytest

from wse_platform.ncp.prompt_rules import RULES
from wse_platform.prompts import get_prompt


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def _system(role: str) -> str:
    return _norm("\n".join(t for r, t in get_prompt(role).sections if r == "system"))


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_each_reference_rule_is_in_the_prompt_that_needs_it(rule):
    missing = [role for role in rule.roles if _norm(rule.phrase) not in _system(role)]
    assert not missing, f"rule {rule.id} ({rule.rule}) is not in {missing}"


def test_the_rule_list_covers_every_auditor_narrator_and_player_prompt():
    covered = {role for r in RULES for role in r.roles}
    assert covered == {"ncp.conflict_check", "ncp.conflict_double_check", "ncp.fact_update", "ncp.node_update",
                       "ncp.commitment_status", "ncp.narrator", "ncp.memory_hiagent", "ncp.narrator_opening",
                       "ncp.player_adversarial", "ncp.player_natural"}
    assert len({r.id for r in RULES}) == len(RULES)
