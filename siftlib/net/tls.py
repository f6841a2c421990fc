"""TLS for sift's own one-URL HTTP clients: roots loaded only where TLS can start.

    with httpx.Client(trust_env=False, verify=verify_for(url)) as client: ...

A client that asks one URL and follows no redirect starts TLS only for an https URL; for
that, httpx's verified default (certifi's roots, or `SSL_CERT_FILE`/`SSL_CERT_DIR`). A plain
http URL gets a context that verifies but trusts no root: loading the roots would cost ~25 ms
of CPU per call (a `sift search` against a local gateway, `sift init --searxng`) for a
handshake that never happens, and were one started, it would fail.
"""

from __future__ import annotations

import ssl
from typing import Literal


def verify_for(url: str) -> ssl.SSLContext | Literal[True]:
    """Return httpx's `verify` for a client that only asks `url`, never following a redirect."""
    if url.lower().startswith("https:"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies host and chain; no root to trust
