"""`[fetch] allow` pinholes as data: parsing one costs a config load no import of the guard.

    hole = parse_pinhole("[::1]:8080")        # Pinhole(host="::1", port=8080, ip=...)
    hole.matches("::1", 8080)                 # True

The guard (`siftlib.fetch.guard`) lets a matching hop through; the config only checks the entries
parse, so `sift search` with a pinhole configured loads no HTTP stack (issue 43: it made every
cached search 3-5x slower).
"""

from __future__ import annotations

import ipaddress
from typing import NamedTuple

__all__ = ["Pinhole", "ip_literal", "parse_pinhole"]


class Pinhole(NamedTuple):
    """One `[fetch] allow` entry: a host (or IP literal) and a port."""

    host: str
    port: int
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None

    def matches(self, host: str, port: int) -> bool:
        """Tell whether a hop's host (as written, lowercased) and port are this pinhole."""
        if port != self.port:
            return False
        if host == self.host:
            return True
        return self.ip is not None and ip_literal(host) == self.ip


def parse_pinhole(entry: str) -> Pinhole:
    """Parse `host:port` or `[v6]:port` into a `Pinhole`, or raise ValueError."""
    host, sep, port = entry.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f'{entry!r} is not "host:port" (e.g. "127.0.0.1:8080")')
    host = host.lower().rstrip(".")
    return Pinhole(host=host, port=int(port), ip=ip_literal(host))


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Return `host` as an IP address (a v6 zone left out), or None for a name."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
