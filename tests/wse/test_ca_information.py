"""B2 and B3 differ only as the paper says (§3, §4, App. A / Fig. 6): B2 is ONE Character Agent
call proposing for all four NPCs, B3 FOUR isolated calls, one per NPC; each Character Agent gets
the canonical history H_t and actor-centric views M_t^(k). Compared here: the world information
in the two requests, with every intended difference named."""
from __future__ import annotations

from tests.wse._wse_sim_helpers import MODEL, make_seed, make_settings
from wse_platform.wse import agents
from wse_platform.wse.agents import AgentContext, HistoryEntry, render_character_memory, render_history
from wse_platform.wse.reducer import initial_state, project_character_memory


def _text(req) -> str:
    return "\n".join(m["content"] for m in req.messages)


def test_b2_and_b3_requests_carry_the_same_world_information(tmp_path):
    seed = make_seed("A")
    ctx = AgentContext(make_settings(tmp_path), MODEL)
    state = initial_state(seed)
    history = [HistoryEntry(step=1, day=0, player_action="Pia looks out.", narrative="Nora waves from the river.")]
    views = [project_character_memory(state, npc) for npc in seed.npc_ids]
    b2 = _text(agents.centralized_ca_request(ctx, seed, views, history, 2))
    b3 = [_text(agents.distributed_ca_request(ctx, seed, v, history, 2)) for v in views]
    rendered = {v.actor_id: render_character_memory(v) for v in views}
    hist = render_history(seed, history)

    # shared: the full narrative history (opening + every earlier step with its day marker)
    assert hist in b2 and all(hist in t for t in b3)
    # intended difference 1 (the architecture): B2 sees all four NPC views in one call ...
    assert all(r in b2 for r in rendered.values())
    # ... each isolated B3 call exactly its own NPC's view and no other NPC's
    for v, t in zip(views, b3):
        assert rendered[v.actor_id] in t
        assert not any(r in t for a, r in rendered.items() if a != v.actor_id)
    # intended difference 2: B2 names the four NPC ids it must answer for; B3 one actor (schema)
    assert all(npc in b2 for npc in seed.npc_ids)
    # no other difference: nothing of the start world outside the views and the history reaches B2
    # (before: setting, the player's description and every relationship, which B3 never saw)
    shared = hist + "".join(rendered.values())
    player = seed.player
    for info in (seed.setting, player.description, *(r.description for r in seed.relationships),
                 *(c.description for c in seed.cast)):
        assert (info in b2) == (info in shared), info
        assert all((info in t) <= (info in shared) for t in b3), info
    assert "Setting:" not in b2 and "World at the start" not in b2
    # the same language line and the same P_t rule (neither sees the current player action)
    assert "Pia looks out." in b2 and all("Pia looks out." in t for t in b3)   # only as history
