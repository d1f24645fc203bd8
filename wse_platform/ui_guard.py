"""The guard in front of the Dagster webserver that `wse ui` starts (issue 23, item 2).

Dagster's webserver answers any Host and any Origin and runs a GraphQL mutation sent as a GET, so
any web page the user visits could delete runs or launch runs that spend API money (a cross-origin
GET or form POST), and a DNS-rebinding page could read the instance. `wse ui` therefore runs the
webserver on an internal loopback port that browsers refuse to connect to (see `INTERNAL_PORTS`)
and serves the user's port through this proxy, which forwards only

- requests whose Host is this machine's loopback name with the UI's port (127.0.0.1, localhost,
  [::1]): a rebound foreign name is refused (DNS rebinding);
- requests whose Origin, when a browser sends one, is the UI's own origin: a cross-origin POST,
  fetch or WebSocket is refused (browsers always send Origin on those);
- state-changing requests (anything but GET/HEAD/OPTIONS) that a browser marks cross-site
  (`Sec-Fetch-Site`) even without an Origin;
- GET/HEAD requests whose `query` parameter, if any, holds only GraphQL queries: a mutation or a
  subscription sent as a GET is refused (whatever the path), as is a GET query that does not parse.

Everything else (the UI's own pages, its GraphQL POSTs, its WebSocket subscriptions) passes
unchanged. Responses carry `X-Frame-Options: DENY` so no other page can frame the UI (clickjacking).
`refusal()` is the whole policy, a pure function; `GuardProxy` is the ASGI app that applies it
(HTTP via httpx, WebSockets via the websockets client), served by uvicorn from a thread.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# Ports every browser refuses to fetch from (the Fetch standard's "bad ports", those above 1024):
# the webserver behind the guard listens on the first free one, so no web page can reach it
# directly, not even by DNS rebinding; only the guard (and local programs) can.
INTERNAL_PORTS = (6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080, 6000, 5060, 5061, 4190, 4045,
                  3659, 2049, 1723, 1720, 1719)
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
               "trailers", "transfer-encoding", "upgrade", "proxy-connection"}


def allowed_hosts(port: int) -> set[str]:
    return {f"{name}:{port}" for name in LOCAL_NAMES} | ({*LOCAL_NAMES} if port == 80 else set())


def allowed_origins(port: int) -> set[str]:
    return {f"http://{h}" for h in allowed_hosts(port)}


def graphql_operations(query: str) -> list[str] | None:
    """The operation types ("query", "mutation", "subscription") of a GraphQL document; None if it
    does not parse."""
    from graphql import GraphQLError, OperationDefinitionNode, parse
    try:
        doc = parse(query)
    except GraphQLError:
        return None
    return [d.operation.value for d in doc.definitions if isinstance(d, OperationDefinitionNode)]


def refusal(method: str, query_string: str, headers: Iterable[tuple[str, str]], port: int,
            websocket: bool = False) -> tuple[int, str] | None:
    """None if the request may pass to the webserver, else (HTTP status, reason). `headers` are
    (name, value) pairs, names in any case; `port` is the UI's (the guard's) port."""
    h: dict[str, list[str]] = {}
    for name, value in headers:
        h.setdefault(name.lower(), []).append(value)
    hosts = h.get("host", [])
    if len(hosts) != 1 or hosts[0].strip().lower() not in allowed_hosts(port):
        return 403, (f"refused: Host {hosts[0] if hosts else '(none)'!r} is not this machine's UI "
                     f"(use http://127.0.0.1:{port}/)")
    origins = h.get("origin", [])
    if len(origins) > 1 or (origins and origins[0].strip().lower() not in allowed_origins(port)):
        return 403, f"refused: a request from another web page (Origin {origins[0]!r})"
    method = method.upper()
    fetch_site = (h.get("sec-fetch-site") or [""])[0].lower()
    if (websocket or method not in SAFE_METHODS) and not origins and fetch_site not in ("", "same-origin", "none"):
        return 403, f"refused: a state-changing request from another site (Sec-Fetch-Site {fetch_site})"
    if method in ("GET", "HEAD") and not websocket:
        for key, value in parse_qsl(query_string, keep_blank_values=True):
            if key != "query":
                continue
            ops = graphql_operations(value)
            if ops is None:
                return 400, "refused: the GraphQL document in the GET request does not parse"
            if any(op != "query" for op in ops):
                return 405, "refused: GraphQL mutations and subscriptions are not accepted over GET; use POST"
    return None


def free_internal_port(host: str = "127.0.0.1") -> int:
    """The first port of `INTERNAL_PORTS` free on `host`; OSError naming them all when none is."""
    for port in INTERNAL_PORTS:
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"none of the browser-blocked ports {', '.join(map(str, INTERNAL_PORTS))} is free on {host} "
                  "for the Dagster webserver behind the guard; stop another `wse ui` or what holds them")


class GuardProxy:
    """ASGI app: apply `refusal`, then forward to the webserver at 127.0.0.1:`upstream_port`."""

    def __init__(self, port: int, upstream_port: int, upstream_host: str = "127.0.0.1"):
        self.port, self.upstream = port, f"{upstream_host}:{upstream_port}"
        self._client = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        qs = scope.get("query_string", b"").decode("latin-1")
        ws = scope["type"] == "websocket"
        refused = refusal("GET" if ws else scope["method"], qs, headers, self.port, websocket=ws)
        if ws:
            await (self._refuse_ws(receive, send) if refused else self._websocket(scope, receive, send, headers))
        elif refused:
            await _plain(send, *refused)
        else:
            await self._http(scope, receive, send, headers)

    def _target(self, scope) -> str:
        path = scope.get("raw_path") or scope["path"].encode()
        qs = scope.get("query_string", b"")
        return path.decode("latin-1") + (f"?{qs.decode('latin-1')}" if qs else "")

    async def _http(self, scope, receive, send, headers) -> None:
        import httpx
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=5.0), follow_redirects=False)

        body = b""
        while True:  # GraphQL bodies are small: read whole, forwarded with their length
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        fwd = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"]
        req = self._client.build_request(scope["method"], f"http://{self.upstream}{self._target(scope)}",
                                         headers=fwd, content=body or None)
        try:
            resp = await self._client.send(req, stream=True)
        except httpx.TransportError:
            await _plain(send, 503, "the Dagster webserver behind `wse ui` is not answering yet (it takes a few "
                                    "seconds to start); reload in a moment", refresh=True)
            return
        try:
            out = [(k, v) for k, v in resp.headers.raw if k.decode("latin-1").lower() not in _HOP_BY_HOP]
            if not any(k.lower() == b"x-frame-options" for k, _ in out):
                out.append((b"x-frame-options", b"DENY"))
            await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
            async for chunk in resp.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await resp.aclose()

    async def _refuse_ws(self, receive, send) -> None:
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake gets 403

    async def _websocket(self, scope, receive, send, headers) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        await receive()  # websocket.connect
        keep = {"cookie", "origin", "user-agent", "authorization"}
        extra = [(k, v) for k, v in headers if k.lower() in keep]
        try:
            upstream = await connect(f"ws://{self.upstream}{self._target(scope)}", additional_headers=extra,
                                     subprotocols=scope.get("subprotocols") or None, max_size=None,
                                     open_timeout=10, compression=None, user_agent_header=None)
        except Exception:  # noqa: BLE001 - any failed handshake upstream (not started, refused, timeout)
            await send({"type": "websocket.close", "code": 1011})
            return
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

        async def client_to_upstream():
            while True:
                msg = await receive()
                if msg["type"] == "websocket.disconnect":
                    await upstream.close()
                    return
                await upstream.send(msg["text"] if msg.get("text") is not None else msg.get("bytes") or b"")

        async def upstream_to_client():
            try:
                async for m in upstream:
                    await send({"type": "websocket.send", **({"text": m} if isinstance(m, str) else {"bytes": m})})
            except ConnectionClosed:
                pass
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": upstream.close_code or 1000})

        tasks = [asyncio.ensure_future(client_to_upstream()), asyncio.ensure_future(upstream_to_client())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(Exception):
                await upstream.close()


async def _plain(send, status: int, text: str, refresh: bool = False) -> None:
    body = text.encode() + b"\n"
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
               (b"x-frame-options", b"DENY")]
    if refresh:
        headers.append((b"refresh", b"3"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardServer:
    """The guard proxy served by uvicorn from a daemon thread; `stop()` closes it and its connections."""

    def __init__(self, port: int, upstream_port: int):
        import uvicorn
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(("127.0.0.1", port))  # here, so a taken port is an OSError for the caller
        except OSError:
            self.sock.close()
            raise
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(GuardProxy(self.port, upstream_port), log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=2, ws_per_message_deflate=False, access_log=False,
                                server_header=False, date_header=False)  # the webserver's own pass through
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="wse-ui-guard", daemon=True)

    def start(self) -> GuardServer:
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout)
        with contextlib.suppress(OSError):
            self.sock.close()
