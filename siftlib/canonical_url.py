"""A hit's identity: the canonical form of its URL, used as a dedupe key only.

Rules (search.md §4): scheme and host lowercased, the default port (80 for http, 443 for
https) dropped, the fragment dropped, one trailing `/` of the path dropped, `www.` kept and
the query string kept as is. The hit itself keeps the URL the source gave.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical_url(url: str) -> str:
    """Return the dedupe key of `url`; a URL that cannot be parsed is its own key."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}" if userinfo else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{netloc}:{port}"
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{netloc}{path}{query}"
