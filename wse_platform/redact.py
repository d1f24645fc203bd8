"""Credentials never leave a URL: one redaction function for every endpoint that is stored or shown.

A server URL can carry a secret in four places: the user-info part (``https://user:pass@host``),
a query parameter (``?api_key=…``, ``?key=…``, ``?token=…``, ``?sig=…``), a path segment that is a
token (``/bot<token>/``, ``/sk-…``, a 32+-character random string, a UUID or long hex) and, in
error messages, anywhere in the text. `redact_url` replaces each with ``***`` and keeps the rest
(scheme, host, port, path), so per-endpoint counts stay readable; `redact_text` does the same for
every URL inside a free text (error messages). `credential_in` says which kind a string carries
(config-time check: a `model_id` with a credential is refused, naming the key).
"""
from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
# query parameter names that carry a secret (compared lower-case, '-' read as '_')
SECRET_PARAMS = frozenset({
    "key", "api_key", "apikey", "access_key", "secret", "secret_key", "client_secret", "token", "access_token",
    "auth", "auth_token", "authorization", "password", "pass", "pwd", "sig", "signature", "x_api_key",
    "code", "session", "sessionid", "jwt", "bearer",
})
# well-known key prefixes (OpenAI, Anthropic, Hugging Face, Groq, Google, GitHub, xAI, Slack, JWT)
_KEY_PREFIX = re.compile(r"^(sk|pk|rk)[-_][A-Za-z0-9_-]{16,}$|^(sk-ant|hf|gsk|ghp|gho|github_pat|xai|xox[abp])[-_]"
                         r"[A-Za-z0-9_-]{16,}$|^AIza[A-Za-z0-9_-]{20,}$|^eyJ[A-Za-z0-9_-]{10,}\.")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX = re.compile(r"^[0-9a-fA-F]{32,}$")
_BOT = re.compile(r"^bot\d+:[A-Za-z0-9_-]{20,}$")   # Telegram-style /bot<id>:<token>/
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def _token_segment(seg: str) -> bool:
    """A path segment that is a secret rather than a name (model names split on '-'/'_' into words)."""
    if not seg:
        return False
    if _KEY_PREFIX.search(seg) or _UUID.match(seg) or _HEX.match(seg) or _BOT.match(seg):
        return True
    longest = max(re.split(r"[-_.]", seg), key=len)
    # random keys: one long run mixing letters and digits (model names: short words such as Qwen3, 32B)
    return len(longest) >= 20 and any(c.isdigit() for c in longest) and any(c.isalpha() for c in longest)


def _secret_param(name: str) -> bool:
    n = name.lower().replace("-", "_")
    return n in SECRET_PARAMS or n.endswith(("_key", "_token", "_secret", "_password", "apikey"))


def credential_in(value: str) -> str | None:
    """Which credential `value` (a URL or an id such as a model id) carries, or None."""
    if not value:
        return None
    parts = urlsplit(value) if "://" in value else None
    if parts is not None and (parts.username or parts.password):
        return "a user name or password in the URL (user:pass@)"
    query = parts.query if parts is not None else (value.split("?", 1)[1] if "?" in value else "")
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if _secret_param(name):
            return f"a credential in the query parameter {name!r}"
    path = parts.path if parts is not None else value.split("?", 1)[0]
    if any(_KEY_PREFIX.search(seg) or _BOT.match(seg) for seg in path.split("/")):
        return "an API key in the path"
    return None


def redact_url(url: str | None) -> str | None:
    """`url` with every credential replaced by ``***`` (None stays None; a non-URL is checked as a path)."""
    if not url:
        return url
    if "://" not in url:   # an id, not a URL (e.g. a router deployment hash): only clear keys are masked
        if not credential_in(url):
            return url
        head, _, query = url.partition("?")
        head = "/".join(MASK if _KEY_PREFIX.search(seg) or _BOT.match(seg) else seg for seg in head.split("/"))
        return head + (f"?{_redact_query(query)}" if query else "")
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    path = "/".join(MASK if _token_segment(seg) else seg for seg in parts.path.split("/"))
    query = parts.query
    if query:
        query = _redact_query(query)
    fragment = MASK if parts.fragment and ("=" in parts.fragment or _token_segment(parts.fragment)) \
        else parts.fragment
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def _redact_query(query: str) -> str:
    return "&".join(f"{p.split('=', 1)[0]}={MASK}" if _secret_param(p.split("=", 1)[0]) else p
                    for p in query.split("&"))


def redact_text(text: str | None) -> str | None:
    """`text` with every URL in it redacted (error messages quote the URL they failed on)."""
    if not text or "://" not in text:
        return text
    def one(m: re.Match[str]) -> str:
        url = m.group(0)
        core = url.rstrip(".,;:)]}")   # sentence punctuation after a URL is not part of it
        return (redact_url(core) or "") + url[len(core):]

    return _URL_IN_TEXT.sub(one, text)
