"""Architecture keys ("B2+WMEM+WMOD") ↔ the flags the simulation branches on.

Keeping the parse in one place means the simulation, the judges and the final
tables agree on what a key means (B level, memory module, world model module).
"""
from __future__ import annotations

from dataclasses import dataclass

from wse_platform.config import WSE_ARCHITECTURES

# Failure components, named as stored in `wse_trajectory_steps.failure_component`.
CENTRALIZED_CA = "centralized_ca"
DISTRIBUTED_CA = "distributed_ca"
WORLD_MODEL = "world_model"
STORY_AGENT = "story_agent"
WORLD_MEMORY_AGENT = "world_memory_agent"
FAILURE_COMPONENTS: tuple[str, ...] = (CENTRALIZED_CA, DISTRIBUTED_CA, WORLD_MODEL, STORY_AGENT, WORLD_MEMORY_AGENT)


@dataclass(frozen=True)
class Architecture:
    """B_b ⊕ WMEM_w ⊕ WMOD_p; one model fills every enabled role."""

    base: int        # 1: no Character Agent, 2: one centralized call, 3: one isolated call per NPC
    wmem: bool       # World Memory Agent + reducer after narration
    wmod: bool       # stateless World Model (PlotPlan) before narration

    @property
    def key(self) -> str:
        return f"B{self.base}" + ("+WMEM" if self.wmem else "") + ("+WMOD" if self.wmod else "")

    @property
    def centralized_ca(self) -> bool:
        return self.base == 2

    @property
    def distributed_ca(self) -> bool:
        return self.base == 3

    @property
    def has_character_agents(self) -> bool:
        return self.base in (2, 3)

    @property
    def ca_component(self) -> str | None:
        return {2: CENTRALIZED_CA, 3: DISTRIBUTED_CA}.get(self.base)

    def enabled_components(self) -> tuple[str, ...]:
        """Components that can fail in this architecture (denominators of failure rates)."""
        out = [c for c in (self.ca_component,) if c]
        if self.wmod:
            out.append(WORLD_MODEL)
        out.append(STORY_AGENT)
        if self.wmem:
            out.append(WORLD_MEMORY_AGENT)
        return tuple(out)


def parse_architecture(key: str) -> Architecture:
    """Parse "B1", "B3+WMEM", "B2+WMEM+WMOD"... (module order free; duplicates/unknowns rejected)."""
    parts = [p.strip() for p in str(key).split("+")]
    base = [p for p in parts if len(p) == 2 and p[0] == "B"]
    modules = [p for p in parts if p not in base]
    if len(base) != 1 or base[0][1] not in "123":
        raise ValueError(f"architecture {key!r}: need exactly one base B1/B2/B3 (known: {list(WSE_ARCHITECTURES)})")
    unknown = [m for m in modules if m not in ("WMEM", "WMOD")]
    if unknown or len(set(modules)) != len(modules):
        raise ValueError(f"architecture {key!r}: unknown or repeated module(s) {unknown or modules}; "
                         "allowed modules: WMEM, WMOD")
    arch = Architecture(base=int(base[0][1]), wmem="WMEM" in modules, wmod="WMOD" in modules)
    assert arch.key in WSE_ARCHITECTURES, arch.key
    return arch
