"""The NCP-Bench roles (one prompt file per role): names shared by the prompter, the loop and the tables."""
from __future__ import annotations

ROLE_PLAYER = {"adversarial": "ncp.player_adversarial", "natural": "ncp.player_natural"}
ROLE_OPENING = "ncp.narrator_opening"
ROLE_NARRATOR = "ncp.narrator"
ROLE_HIAGENT = "ncp.memory_hiagent"
ROLE_MEMORY = "ncp.memory_summary"
ROLE_FACT_UPDATE = "ncp.fact_update"
ROLE_CONFLICT_CHECK = "ncp.conflict_check"
ROLE_DOUBLE_CHECK = "ncp.conflict_double_check"
ROLE_CONFLICT_CONFIRM = ROLE_DOUBLE_CHECK  # older name of the same role
ROLE_NODE_UPDATE = "ncp.node_update"
ROLE_COMMITMENT_STATUS = "ncp.commitment_status"
AUDITOR_ROLES = (ROLE_FACT_UPDATE, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK, ROLE_NODE_UPDATE, ROLE_COMMITMENT_STATUS)
