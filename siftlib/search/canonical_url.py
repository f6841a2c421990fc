"""A hit's identity: the canonical form of its URL, used as a dedupe key only.

Rules (search.md §4): scheme and host lowercased, the default port (80 for http, 443 for
https) dropped, the fragment dropped, one trailing `/` of the path dropped, `www.` kept and
the query string kept in its order (no parameter is sorted or removed). The hit itself keeps
the URL the source gave.

Two spellings a person reads as one address are one key (RFC 3986 §6.2.2 normalisation):

- Percent-encoding, in the path and the query: an escaped unreserved character
  (`A-Z a-z 0-9 - . _ ~`) is decoded, every other escape keeps its bytes with uppercase hex,
  and a raw character that may not stand in a URL (non-ASCII, space, `"<>\\^`{|}`, a `%`
  that starts no escape) is encoded as UTF-8 with uppercase hex. Reserved characters
  (`:/?#[]@!$&'()*+,;=`) are never decoded nor encoded: `%2F` and `/` stay different.
- The host in its IDNA (punycode) form, by UTS #46 as httpx (and so every browser) sends it;
  a name IDNA rejects is kept lowercased.

    https://zh.example.cn/数据库/日志        → https://zh.example.cn/%E6%95%B0%E6%8D%AE%E5%BA%93/%E6%97%A5%E5%BF%97
    https://zh.example.cn/%e6%95%b0%e6%8d%ae%e5%ba%93/%e6%97%a5%e5%bf%97   → the same
    https://Bücher.example/%7Euser/         → https://xn--bcher-kva.example/~user
    https://example.com/a%2Fb?q=%c3%a9+x    → https://example.com/a%2Fb?q=%C3%A9+x
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_RESERVED = frozenset(":/?#[]@!$&'()*+,;=")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SAFE = "".join(sorted(_RESERVED)) + "%"  # quote() never touches unreserved characters
_PLAIN = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]*")


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
    host = _idna_host((parts.hostname or "").lower())
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}" if userinfo else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{netloc}:{port}"
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    query = f"?{_normal_escapes(parts.query)}" if parts.query else ""
    return f"{scheme}://{netloc}{_normal_escapes(path)}{query}"


def _normal_escapes(text: str) -> str:
    """Return `text` with canonical percent-encoding (see the module docstring)."""
    if "%" not in text and _PLAIN.fullmatch(text):
        return text  # the common case: plain ASCII with nothing to change
    text = _STRAY_PERCENT.sub("%25", text)
    text = _ESCAPE.sub(_normal_escape, text)
    return quote(text, safe=_SAFE, encoding="utf-8", errors="surrogatepass")


def _normal_escape(match: re.Match[str]) -> str:
    """Decode an escaped unreserved character; give any other escape uppercase hex."""
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else match.group(0).upper()


def _idna_host(host: str) -> str:
    """Return a host name in its ASCII (IDNA) form; a name IDNA rejects stays as it is."""
    if host.isascii():
        return host
    import idna  # httpx's own dependency; only non-ASCII hosts need it

    try:
        return str(idna.encode(host, uts46=True), "ascii")
    except UnicodeError:  # idna.IDNAError is one
        return host
