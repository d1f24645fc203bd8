"""Counting what the status computation asks Dagster's stale resolver (tests of `wse_platform.status`)."""
from __future__ import annotations

from wse_platform import status


def record_asks(monkeypatch) -> list[tuple[str, str | None]]:
    """The (asset, partition) pairs the status computation asks the resolver about from now on."""
    asked: list[tuple[str, str | None]] = []
    real = status._status_of
    monkeypatch.setattr(status, "_status_of", lambda graph, resolver, inst, seen, key, pk, *rest:
                        asked.append((key.to_user_string(), pk)) or real(graph, resolver, inst, seen, key, pk, *rest))
    return asked
