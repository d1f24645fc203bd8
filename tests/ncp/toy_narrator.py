"""A toy narrator method (plug-in) for tests: it follows the reference's narrator contract."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Said:
    text: str


class EchoNarrator:
    """Asks its model once per turn with a short prompt of its own; remembers the episode it is in."""

    closed: list[str] = []

    def __init__(self, complete):
        self.complete = complete
        self.episode = None

    def start_episode(self, context):
        self.episode = context.episode_id

    def open(self, request):
        node = next(n for n in request.trajectory if not n.occurred)
        return Said(self.complete([{"role": "user", "content": f"TOY open at {node.id} as {request.player_role}"}],
                                  stage="opening"))

    def respond(self, request):
        prompt = (f"TOY turn {request.turn_id} at {request.current_node_id}; history {len(request.history)}; "
                  f"pending {list(request.pending_fact_updates.add_facts)}; player said: {request.player_input}")
        return Said(self.complete([{"role": "user", "content": prompt}], stage="respond"))

    def close_episode(self):
        EchoNarrator.closed.append(self.episode)


class BrokenNarrator(EchoNarrator):
    def respond(self, request):
        raise RuntimeError("the toy method broke")


class ClientNarrator:
    """Calls its model as the reference's narrators do: `client.complete(messages, stage=...)`."""

    def __init__(self, client):
        self.client = client

    def open(self, request):
        return Said(self.client.complete([{"role": "user", "content": "TOY client open"}], stage="opening"))

    def respond(self, request):
        return Said(self.client.complete([{"role": "user", "content": f"TOY client {request.player_input}"}],
                                         stage="respond"))
