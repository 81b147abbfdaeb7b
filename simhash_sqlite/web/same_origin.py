"""Requests from this server's own pages only: the name a request is sent to (Host) and the page a POST
comes from (Origin, Sec-Fetch-Site). An ASGI wrapper around all of Datasette (datasette_plugin's
asgi_wrapper), so Datasette's own pages are guarded as well as ours.

- Host: every request (GET included) that reaches the server over a loopback address (ASGI's
  `server`: the connection's local address) must name it as 127.0.0.1:PORT, localhost:PORT or
  [::1]:PORT. A page of another site whose name was made to resolve
  to 127.0.0.1 (DNS rebinding) sends its own name, gets 403 and reads nothing.
- A POST (any method but GET, HEAD, OPTIONS) is refused (403) when its Sec-Fetch-Site is anything but
  same-origin, or its Origin is not this server's (the scheme and the Host it was sent to; "null"
  included). A request with neither header does not come from a browser's page (every browser sends
  Origin with a POST) and is judged by its CSRF token alone (review.py).

The CSRF token itself is checked where the writes are (review.py): Datasette's asgi-csrf lets a POST
without any cookie through, which is exactly what a cross-site form sends under SameSite=Lax.
"""

from __future__ import annotations

import ipaddress

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def allowed_hosts(port: int) -> frozenset[str]:
    """The Host headers a loopback server on `port` answers (a browser leaves out port 80)."""
    names = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    return frozenset(names | set(LOOPBACK_NAMES) if port == 80 else names)


def refusal(scope: dict) -> str | None:
    """Why this HTTP request is refused, or None when it may go on."""
    headers: dict[bytes, bytes] = {}
    for name, value in scope.get("headers") or ():
        headers.setdefault(name.lower(), value)
    host = headers.get(b"host", b"").decode("latin-1").strip().lower()
    # (address, port) the connection came in on; None, or no port, for an in-process client (Datasette's own
    # test client, httpx's ASGI transport): no socket, so no page of another site can reach it
    server = scope.get("server")
    if server and server[1] is not None and _loopback(str(server[0])) and host not in allowed_hosts(int(server[1])):
        return (f"Host {host or '(none)'!r:.80} is not this server: it answers 127.0.0.1:{server[1]}, "
                f"localhost:{server[1]} and [::1]:{server[1]} only")
    if scope.get("method", "GET") in SAFE_METHODS:
        return None
    fetch_site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
    if fetch_site and fetch_site != "same-origin":
        return f"a POST from another site (Sec-Fetch-Site: {fetch_site:.40}): only this server's own pages may post"
    origin = headers.get(b"origin")
    if origin is not None:
        own = f"{scope.get('scheme', 'http')}://{host}"
        sent = origin.decode("latin-1").strip().lower()
        if sent != own:
            return f"a POST from another origin ({sent!r:.80}): only this server's own pages ({own}) may post"
    return None


def guard(app):
    """The ASGI app wrapped: HTTP requests refusal() names get 403 and never reach it."""

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and (why := refusal(scope)) is not None:
            body = f"forbidden: {why}\n".encode()
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded
