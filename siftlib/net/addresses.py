"""Which addresses a source or a page may be reached at: the SSRF boundary's address table.

    address_kind("10.0.0.1")     # "private"
    is_public("1.1.1.1")         # True
    describe_kind("loopback")    # "a loopback address"

The dialer (`siftlib.net.dial`) pins a source to the addresses `resolve` finds and this table
accepts; the fetch guard (`siftlib.fetch.guard`) checks every hop of a page against it. Light
on purpose (`ipaddress` and `socket` only): the config checks `[fetch] allow` entries with it
without loading an HTTP stack.

Not public (`is_public` is False), one table below, each row tested:

    IPv4  0/8 this network, 10/8, 172.16/12, 192.168/16 private, 100.64/10 CGNAT,
          127/8 loopback, 169.254/16 link-local, 192.0.0/24 protocol assignments,
          192.0.2/24 198.51.100/24 203.0.113/24 documentation, 192.88.99/24 6to4 relay,
          198.18/15 benchmarking, 224/4 multicast, 240/4 reserved and broadcast
    IPv6  everything outside 2000::/3 (unspecified, loopback, IPv4-mapped and -compatible,
          ULA fc00::/7, link-local, site-local, multicast, discard 100::/64, 64:ff9b:1::/48)
          except NAT64 64:ff9b::/96 of a public IPv4; inside 2000::/3: 2001::/23 protocol
          assignments (Teredo 2001::/32 is public only if server and client IPv4 both are),
          2001:db8::/32 and 3fff::/20 documentation, 5f00::/16 SRv6, 2002::/16 6to4 of a
          non-public IPv4
    cloud metadata (refused for every source, even SearXNG and under allow_private):
          169.254.169.254 (AWS, GCP, Azure, OCI, DigitalOcean), 169.254.170.2 (ECS),
          169.254.0.23 (Tencent), 100.100.100.200 (Alibaba), 168.63.129.16 (Azure
          WireServer, inside a public range), 192.0.0.192 (OCI), fd00:ec2::254 (AWS IPv6)
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

__all__ = [
    "IPAddress",
    "Resolver",
    "address_kind",
    "describe_kind",
    "is_metadata",
    "is_public",
    "resolve",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

_NOT_PUBLIC_V4 = tuple(
    (ipaddress.IPv4Network(net), kind)
    for net, kind in (
        ("0.0.0.0/8", "this-network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "cgnat"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)
_GLOBAL_V6 = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
# Outside 2000::/3 everything is refused; these rows only name why.
_NOT_GLOBAL_V6 = tuple(
    (ipaddress.IPv6Network(net), kind)
    for net, kind in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
_NOT_PUBLIC_V6 = tuple(
    (ipaddress.IPv6Network(net), kind)
    for net, kind in (
        ("2001:db8::/32", "documentation"),
        ("2001::/23", "reserved"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "reserved"),
    )
)
_METADATA = frozenset(
    ipaddress.ip_address(ip)
    for ip in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.0.23",
        "100.100.100.200",
        "168.63.129.16",
        "192.0.0.192",
        "fd00:ec2::254",
    )
)
_KIND_PHRASES = {
    "this-network": "a this-network (0.0.0.0/8) address",
    "cgnat": "a carrier-grade NAT (100.64.0.0/10) address",
    "metadata": "a cloud metadata address",
    "unspecified": "the unspecified address",
    "ipv4-mapped": "an IPv4-mapped address",
    "ipv4-compatible": "an IPv4-compatible address",
}


def is_public(ip: str | IPAddress) -> bool:
    """Tell whether an address is a public unicast address a public source may resolve to."""
    return address_kind(ip) is None


def address_kind(ip: str | IPAddress) -> str | None:
    """Name the kind of a non-public address (`loopback`, `private`, …); None when public.

    An IPv6 address that embeds an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) is
    named by the embedded address when that is not public.
    """
    address = _unscoped(ipaddress.ip_address(ip) if isinstance(ip, str) else ip)
    if address in _METADATA:
        return "metadata"
    if isinstance(address, ipaddress.IPv4Address):
        return next((kind for net, kind in _NOT_PUBLIC_V4 if address in net), None)
    if address in _NAT64:
        return address_kind(ipaddress.IPv4Address(address.packed[-4:]))
    if address not in _GLOBAL_V6:
        for net, kind in _NOT_GLOBAL_V6:
            if address in net:
                return kind
        for net, kind in ((_MAPPED, "ipv4-mapped"), (_COMPATIBLE, "ipv4-compatible")):
            if address in net:
                return address_kind(ipaddress.IPv4Address(address.packed[-4:])) or kind
        return "reserved"
    if address in _TEREDO:
        server, client = address.teredo or (address, address)
        return address_kind(server) or address_kind(client)
    if address in _SIX_TO_FOUR:
        return address_kind(address.sixtofour) if address.sixtofour else "reserved"
    return next((kind for net, kind in _NOT_PUBLIC_V6 if address in net), None)


def describe_kind(kind: str) -> str:
    """Return an address kind as a noun phrase: `loopback` → "a loopback address"."""
    return _KIND_PHRASES.get(kind, f"a {kind} address")


def _unscoped(address: IPAddress) -> IPAddress:
    """Drop an IPv6 `%scope`, which would make every network comparison false."""
    if isinstance(address, ipaddress.IPv6Address):
        return ipaddress.IPv6Address(address.packed)
    return address


def is_metadata(address: IPAddress) -> bool:
    """Tell whether an address reaches a cloud metadata service, also IPv4-mapped or NAT64."""
    address = _unscoped(address)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in _NAT64:
            address = ipaddress.IPv4Address(address.packed[-4:])
    return address in _METADATA


def resolve(host: str, port: int) -> list[str]:
    """Resolve a host name to its TCP addresses, in the resolver's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
