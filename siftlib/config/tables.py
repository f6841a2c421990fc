"""Typed, strict reading of one TOML table: durations, sizes, URLs, the store, shares.

    table = Table(read_toml(path), "", path).table("search")
    table.check_keys({"k", "timeout"})
    seconds = table.duration("timeout", "8s")    # ConfigError naming the key and the file

Nothing is coerced (a boolean is not an integer); every problem is a `ConfigError` naming
the key with its table prefix and the file. `[server] store` is "sqlite" or a Redis-protocol
URL (store.md); the URL may not carry a password (it belongs in secret.env as
`SIFT_STORE_PASSWORD`) nor `?options` (the client would let them override it), and the
`redis` client must be installed: that is checked with `find_spec`, without importing it, so
a missing extra is a config error at start.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from siftlib.errors import ConfigError

__all__ = ["STORE_SCHEMES", "Table", "parse_duration", "parse_size"]

STORE_SCHEMES = ("redis", "rediss", "valkey")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_SIZE = re.compile(r"^(\d+)(B|KiB|MiB|GiB)$")
_SIZE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Return the seconds a duration string such as "250ms" or "8s" stands for."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f'{text!r} is not a duration such as "250ms", "8s", "10m" or "1h"')
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_size(text: str) -> int:
    """Return the bytes a size string such as "10MiB" stands for."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f'{text!r} is not a size such as "512KiB" or "10MiB"')
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]


class Table:
    """Typed, strict access to one TOML table; reports every problem with key and file."""

    def __init__(self, data: Mapping[str, Any], prefix: str, path: Path) -> None:
        self.data, self.prefix, self.path = data, prefix, path

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {self.prefix}{key} {message}")

    def check_keys(self, allowed: set[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.error(key, "is not a known setting")

    def get(self, key: str, kind: type, default: Any) -> Any:
        value = self.data.get(key, default)
        # bool is a subclass of int: an integer setting must not take `true`.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(key, f"must be {_KIND_NAMES[kind]}, not {type(value).__name__}")
        return value

    def table(self, key: str) -> Table:
        value = self.get(key, dict, {})
        return Table(value, f"{self.prefix}{key}.", self.path)

    def integer(self, key: str, default: int, low: int, high: int | None = None) -> int:
        value: int = self.get(key, int, default)
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise self.error(key, f"must be {bound}, not {value}")
        return value

    def duration(self, key: str, default: str) -> float:
        try:
            seconds = parse_duration(self.get(key, str, default))
        except ValueError as exc:
            raise self.error(key, f"must be a duration: {exc}") from None
        if seconds <= 0 or not math.isfinite(seconds):
            raise self.error(key, "must be a positive duration")
        return seconds

    def size(self, key: str, default: str) -> int:
        try:
            size = parse_size(self.get(key, str, default))
        except ValueError as exc:
            raise self.error(key, f"must be a size: {exc}") from None
        if size <= 0:
            raise self.error(key, "must be a positive size")
        return size

    def url(self, key: str, default: str) -> str:
        value: str = self.get(key, str, default)
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.error(key, "must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise self.error(key, "must not carry a user name or password")
        try:
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            raise self.error(key, "has an invalid port") from None
        return value

    def store(self, key: str, default: str) -> str:
        """Return `sqlite` or a Redis-protocol URL with no password and no options in it."""
        value: str = self.get(key, str, default)
        if value == "sqlite":
            return value
        try:
            parts = urlsplit(value)
        except ValueError:  # a bracketed host that is no IP address: the value may be a secret
            raise self.error(
                key, "must name its host plainly, or an IPv6 address in [brackets]"
            ) from None
        if parts.scheme not in STORE_SCHEMES or not parts.hostname:
            raise self.error(
                key, 'must be "sqlite" or a redis://, rediss:// or valkey:// URL with a host'
            )
        if parts.password is not None:
            raise self.error(
                key, "must not carry a password: put it in secret.env as SIFT_STORE_PASSWORD"
            )
        if parts.query or parts.fragment:
            raise self.error(key, "must not carry options after ? or #")
        try:
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            raise self.error(key, "has an invalid port") from None
        if parts.path.strip("/") and not parts.path.strip("/").isdigit():
            raise self.error(key, "must name a database by its number, as in redis://host:6379/0")
        if not _installed("redis"):
            raise self.error(key, "needs the optional extra sift[redis]: pip install 'sift[redis]'")
        return value

    def location(self, key: str, default: Callable[[], Path]) -> Path:
        """Return a path setting; `default()` is asked only when the key is absent."""
        if key not in self.data:
            return default()  # platformdirs is imported only for a default it gives
        return Path(self.get(key, str, "")).expanduser()

    def share(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise self.error(key, f"must be a number from 0 to 1, not {value!r}")
        return float(value)


def _installed(module: str) -> bool:
    """Tell whether a module can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module blocked in sys.modules
        return False


_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    dict: "a table",
    list: "a list",
}
