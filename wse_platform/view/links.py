"""Addresses of `wse view` pages, for the asset metadata that links each cell to its transcripts."""
from __future__ import annotations

from urllib.parse import urlencode


def view_url(port: int, page: str, **params: str) -> str | None:
    """`http://127.0.0.1:<port>/<page>?...` (None when the viewer is off: `view_port: 0`)."""
    if not port:
        return None
    query = urlencode({k: v for k, v in params.items() if v})
    return f"http://127.0.0.1:{port}/{page}" + (f"?{query}" if query else "")
