"""The HTTP heads the render proxy reads and writes, as pure functions over bytes.

    method, target = request_line(head)          # (b"CONNECT", "example.org:443")
    host, port = connect_target("example.org:443")    # or None: a bad CONNECT target
    vetted, host, port = plain_target(url)       # or None: a bad absolute-form target
    upstream_head = origin_form(head, url)       # absolute form → origin form, Connection: close
    browser_head = closing(answer)               # the answer's head says Connection: close
    conn.sendall(short_answer(403, "blocked: …"))      # the proxy's own short answers

Hop-by-hop fields (`Connection`, `Proxy-Authorization`, `Keep-Alive`, `TE`, `Trailer`) never
pass the proxy; a plain request goes upstream with `Connection: close` (or `Upgrade` for a
WebSocket), and its answer tells the browser so, since the connection was dialled to one host.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = [
    "MAX_HEAD",
    "closing",
    "connect_target",
    "origin_form",
    "plain_target",
    "request_line",
    "short_answer",
]

MAX_HEAD = 64 * 1024
_HOP_HEADERS = frozenset(
    (b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive", b"te", b"trailer")
)


def request_line(head: bytes) -> tuple[bytes, str]:
    line = head.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) != 3:
        return b"", ""
    return parts[0].upper(), parts[1].decode("latin-1")


def connect_target(text: str) -> tuple[str, int] | None:
    """Split a CONNECT target `host:port` or `[v6]:port`."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.lower().rstrip("."), int(port)


def plain_target(url: str) -> tuple[str, str, int] | None:
    """Return an absolute-form target as (the URL to vet, host, port), or None if malformed.

    A WebSocket URL is vetted as the http(s) URL it upgrades.
    """
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme.lower() in ("https", "wss") else 80)
    except ValueError:
        return None
    vetted = url
    if parts.scheme.lower() in ("ws", "wss"):
        vetted = "http" + url[2:] if parts.scheme.lower() == "ws" else "https" + url[3:]
    return vetted, (parts.hostname or "").lower().rstrip("."), port


def origin_form(head: bytes, url: str) -> bytes:
    """Rewrite an absolute-form request head for the origin server, `Connection: close`."""
    lines = head.rstrip(b"\r\n").split(b"\r\n")
    method = lines[0].split(b" ", 1)[0]
    version = lines[0].rsplit(b" ", 1)[-1]
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kept = [
        line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS
    ]
    upgrade = any(line.lower().startswith(b"upgrade:") for line in kept)
    connection = b"Connection: Upgrade" if upgrade else b"Connection: close"
    start = b" ".join((method, path.encode("latin-1"), version))
    return b"\r\n".join((start, *kept, connection)) + b"\r\n\r\n"


def closing(answer: bytes) -> bytes:
    """Return an answer whose head says `Connection: close` (an upgrade is left as it is)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if b" 101 " in lines[0] + b" ":
        return answer
    kept = [
        line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS
    ]
    return b"\r\n".join((lines[0], *kept, b"Connection: close")) + b"\r\n\r\n" + body


def short_answer(status: int, sentence: str) -> bytes:
    body = sentence.encode("utf-8", "replace")
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
