"""Configuration: `config.toml`, `client.toml` and `secret.env`.

Strict by design: an unknown key or a wrongly typed value is a `ConfigError` naming the key
and the file; nothing is coerced (a boolean is not an integer). A missing config file means
all defaults. Durations are strings such as "250ms", "8s", "10m", "1h".

The `[skill_search]` table belongs to skill search, which reads and validates it itself
(`siftlib.skills.consent`; an invalid table there disables reranking instead of failing
every command): here the key is only allowed.

`[server] store` is "sqlite" or a Redis-protocol URL (store.md). The URL may not carry a
password (it belongs in secret.env as `SIFT_STORE_PASSWORD`) nor `?options` (the client
would let them override it), and the `redis` client must be installed: that is checked here
with `find_spec`, without importing it, so a missing extra is a config error at start.

Secrets live in a private map loaded once; the process environment is the fallback for each
key. `Secrets` never shows a value in its repr.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import stat
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from siftlib import __version__
from siftlib.errors import ConfigError
from siftlib.lazylog import LazyLogger
from siftlib.query import MAX_K

SOURCE_ORDER = ("searxng", "brave_llm", "tavily")
PAID_SOURCES = ("brave_llm", "tavily")
STORE_SCHEMES = ("redis", "rediss", "valkey")
log = LazyLogger("sift")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_SIZE = re.compile(r"^(\d+)(B|KiB|MiB|GiB)$")
_SIZE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _user_config_dir() -> Path:
    if (found := _xdg_dir("XDG_CONFIG_HOME", "~/.config")) is not None:
        return found
    import platformdirs

    return Path(platformdirs.user_config_dir("sift"))


def _user_state_dir() -> Path:
    if (found := _xdg_dir("XDG_STATE_HOME", "~/.local/state")) is not None:
        return found
    import platformdirs

    return Path(platformdirs.user_state_dir("sift"))


def _xdg_dir(variable: str, fallback: str) -> Path | None:
    """Return sift's XDG base directory on Linux, as platformdirs gives it there; else None.

    The variable when it holds an absolute path, else the fallback under the home directory.
    Worked out here because importing platformdirs took longer than the rest of reading the
    config of a cached `sift search`; platformdirs still answers on other systems.
    """
    if sys.platform != "linux":
        return None
    base = os.environ.get(variable, "")
    return Path(base if os.path.isabs(base) else os.path.expanduser(fallback), "sift")


def default_db() -> Path:
    """Return where the store file goes when `server.db` does not say: the user state dir."""
    return _user_state_dir() / "cache.db"


def default_secret_env() -> Path:
    """Return where `secret.env` is when `server.secret_env` does not say: the user config dir."""
    return _user_config_dir() / "secret.env"


def locate_config(explicit: str | None = None) -> tuple[Path, str | None]:
    """Return the config path and what named it: `--config`, `$SIFT_CONFIG`, or None (default)."""
    if explicit:
        return Path(explicit), "--config"
    if os.environ.get("SIFT_CONFIG"):
        return Path(os.environ["SIFT_CONFIG"]), "$SIFT_CONFIG"
    return _user_config_dir() / "config.toml", None


def resolve_config_path(explicit: str | None = None) -> Path:
    """Return the config path: `--config` > `$SIFT_CONFIG` > the user config dir.

    Only the default path may be missing (all defaults): a file named by `--config` or
    `$SIFT_CONFIG` that does not exist is a `ConfigError`, since running on defaults then
    would quietly do something other than what was meant.
    """
    path, named_by = locate_config(explicit)
    if named_by and not path.exists():
        raise ConfigError(f"{path}: no such config file (named by {named_by})")
    return path


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; a missing file is an empty table."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc


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


class SourceConfig(NamedTuple):
    """One upstream search source."""

    name: str
    enabled: bool
    url: str
    daily_credit_cap: int = 0
    no_rerank: bool = False

    @property
    def must_be_public(self) -> bool:
        """Paid sources are public services; only SearXNG may sit on a private address."""
        return self.name != "searxng"


class BrowserConfig(NamedTuple):
    """The `[fetch.browser]` table: the opt-in headless Chromium that renders script-built pages."""

    enabled: bool = False
    executable: str = "chromium"
    pages: int = 2  # renders at once
    render: str = "auto"  # "auto": application shells only; "always": every HTML page
    max_bytes: int = 50 * 1024 * 1024  # everything the proxy relays for one render


class FetchConfig(NamedTuple):
    """The `[fetch]` table: how `sift fetch`, `/v1/fetch` and `/v2/scrape` read a page."""

    enabled: bool = True
    timeout: float = 20.0
    max_bytes: int = 10 * 1024 * 1024
    max_chars: int = 2_000_000
    max_redirects: int = 5
    user_agent: str = f"sift/{__version__}"
    allow: tuple[str, ...] = ()
    per_host: int = 4
    browser: BrowserConfig = BrowserConfig()
    pdf_max_pages: int = 200  # pages of a PDF read; past them a warning (docs/page-reading.md)
    cache_max_age: float = 3600.0  # seconds; the fetch cache's default maxAge and entry TTL
    cache_max_bytes: int = 256 * 1024 * 1024  # stored answers; the oldest go first past it


class Config(NamedTuple):
    """The server config, as every command sees it."""

    path: Path
    db: Path
    secret_env: Path
    listen: str = "127.0.0.1:8787"
    permit_restricted: tuple[str, ...] = ()
    store: str = "sqlite"
    store_prefix: str = "sift:"
    store_fallback_share: float = 0.5
    k: int = 8
    timeout: float = 8.0
    rerank: bool = True
    digest: bool = False
    cache_ttl: float = 3600.0
    sources: tuple[SourceConfig, ...] = ()
    # True when the file sets server.secret_env: then a missing secret.env is worth a warning.
    secret_env_configured: bool = False
    fetch: FetchConfig = FetchConfig()

    def source(self, name: str) -> SourceConfig:
        """Return the config of the source called `name`."""
        for source in self.sources:
            if source.name == name:
                return source
        raise KeyError(name)

    @property
    def store_kind(self) -> str:
        """The kind of store, as /healthz and /metrics name it: `sqlite` or `redis`."""
        return "sqlite" if self.store == "sqlite" else "redis"

    @property
    def enabled_sources(self) -> tuple[SourceConfig, ...]:
        """Enabled sources, in the fixed source order."""
        return tuple(s for s in self.sources if s.enabled)


_SOURCE_DEFAULTS: dict[str, dict[str, Any]] = {
    "searxng": {"enabled": False, "url": "http://127.0.0.1:8888"},
    "brave_llm": {
        "enabled": False,
        "url": "https://api.search.brave.com/res/v1/llm/context",
        "daily_credit_cap": 0,
    },
    "tavily": {
        "enabled": False,
        "url": "https://api.tavily.com/search",
        "daily_credit_cap": 500,
        "no_rerank": False,
    },
}


class _Table:
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

    def table(self, key: str) -> _Table:
        value = self.get(key, dict, {})
        return _Table(value, f"{self.prefix}{key}.", self.path)

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


def load_config(explicit: str | None = None) -> Config:
    """Load and validate the server config found by `resolve_config_path`."""
    path = resolve_config_path(explicit)
    root = _Table(read_toml(path), "", path)
    root.check_keys({"server", "search", "skill_search", "fetch"})

    server = root.table("server")
    server.check_keys(
        {
            "listen",
            "db",
            "secret_env",
            "permit_restricted",
            "store",
            "store_prefix",
            "store_fallback_share",
        }
    )
    restricted = server.get("permit_restricted", list, [])
    if not all(isinstance(name, str) for name in restricted):
        raise server.error("permit_restricted", "must be a list of caller names (strings)")

    search = root.table("search")
    search.check_keys({"k", "timeout", "rerank", "digest", "cache_ttl", *SOURCE_ORDER})
    sources = []
    for name in SOURCE_ORDER:
        defaults = _SOURCE_DEFAULTS[name]
        table = search.table(name)
        table.check_keys(set(defaults))
        sources.append(
            SourceConfig(
                name=name,
                enabled=table.get("enabled", bool, False),
                url=table.url("url", defaults["url"]),
                daily_credit_cap=table.integer(
                    "daily_credit_cap", defaults.get("daily_credit_cap", 0), 0
                ),
                no_rerank=table.get("no_rerank", bool, False),
            )
        )

    base = Config._field_defaults
    return Config(
        path=path,
        listen=server.get("listen", str, base["listen"]),
        db=server.location("db", default_db),
        secret_env=server.location("secret_env", default_secret_env),
        permit_restricted=tuple(name.lower() for name in restricted),
        store=server.store("store", base["store"]),
        store_prefix=server.get("store_prefix", str, base["store_prefix"]),
        store_fallback_share=server.share("store_fallback_share", base["store_fallback_share"]),
        k=search.integer("k", 8, 1, MAX_K),
        timeout=search.duration("timeout", "8s"),
        rerank=search.get("rerank", bool, True),
        digest=search.get("digest", bool, False),
        cache_ttl=search.duration("cache_ttl", "1h"),
        sources=tuple(sources),
        secret_env_configured="secret_env" in server.data,
        fetch=_fetch_config(root.table("fetch")),
    )


def _fetch_config(table: _Table) -> FetchConfig:
    table.check_keys(set(FetchConfig._fields))
    timeout = table.duration("timeout", "20s")
    if timeout > 60:
        raise table.error("timeout", "must be at most 60s")
    allow = table.get("allow", list, [])
    if allow:
        from siftlib.net.pinholes import parse_pinhole  # data only: no HTTP stack, no guard
    for entry in allow:
        try:
            hole = parse_pinhole(entry if isinstance(entry, str) else "")
        except ValueError:
            raise table.error(
                "allow", f'entries must be "host:port" strings, not {entry!r}'
            ) from None
        if hole.ip is not None and not hole.ip.is_loopback:
            from siftlib.net.addresses import address_kind  # only for such an entry

            if address_kind(hole.ip) == "metadata":
                raise table.error(
                    "allow",
                    f"{entry!r} is a cloud metadata address, which no pinhole opens "
                    "(it hands out the machine's credentials)",
                )
    base = FetchConfig()
    return FetchConfig(
        enabled=table.get("enabled", bool, True),
        timeout=timeout,
        max_bytes=table.size("max_bytes", "10MiB"),
        max_chars=table.integer("max_chars", base.max_chars, 1),
        max_redirects=table.integer("max_redirects", base.max_redirects, 0, 20),
        user_agent=table.get("user_agent", str, base.user_agent),
        allow=tuple(allow),
        per_host=table.integer("per_host", base.per_host, 1),
        pdf_max_pages=table.integer("pdf_max_pages", base.pdf_max_pages, 1, 100_000),
        cache_max_age=_cache_max_age(table),
        cache_max_bytes=table.size("cache_max_bytes", "256MiB"),
        browser=_browser_config(table.table("browser")),
    )


def _cache_max_age(table: _Table) -> float:
    """Return `[fetch] cache_max_age` in seconds: a duration, or "0s" to turn the cache off."""
    if table.get("cache_max_age", str, "1h").strip() in ("0", "0s"):
        return 0.0
    return table.duration("cache_max_age", "1h")


def _browser_config(table: _Table) -> BrowserConfig:
    table.check_keys(set(BrowserConfig._fields))
    base = BrowserConfig()
    executable = table.get("executable", str, base.executable)
    if not executable.strip():
        raise table.error("executable", "must name a Chromium executable")
    render = table.get("render", str, base.render)
    if render not in ("auto", "always"):
        raise table.error("render", 'must be "auto" or "always"')
    return BrowserConfig(
        enabled=table.get("enabled", bool, base.enabled),
        executable=executable,
        pages=table.integer("pages", base.pages, 1, 16),
        render=render,
        max_bytes=table.size("max_bytes", "50MiB"),
    )


class ClientConfig(NamedTuple):
    """Where `sift search` sends its query when it runs as a client."""

    url: str
    token: str | None


def load_client_config(server_url: str | None = None) -> ClientConfig | None:
    """Return the client config (`--server` or `client.toml`), or None for in-process search."""
    token = os.environ.get("SIFT_TOKEN") or None
    if server_url:
        try:
            url = _Table({"server": server_url}, "--", Path("the command line")).url("server", "")
        except ConfigError:
            # A usage error, not an unreachable server: exit 5 would send agents to their
            # built-in search when the command line is what needs fixing.
            raise ConfigError(
                f"--server must be a URL such as http://127.0.0.1:8787, not {server_url!r}"
            ) from None
        return ClientConfig(url=url.rstrip("/"), token=token)
    path = _user_config_dir() / "client.toml"
    table = _Table(read_toml(path), "", path)
    if not table.data:
        return None
    table.check_keys({"url", "token"})
    url = table.url("url", "")
    file_token = table.get("token", str, "") or None
    return ClientConfig(url=url.rstrip("/"), token=token or file_token)


class Secrets:
    """Keys from `secret.env`, with the process environment as fallback; values never shown."""

    def __init__(
        self,
        values: Mapping[str, str],
        environ: Mapping[str, str] | None = None,
        *,
        file_missing: bool = False,
    ) -> None:
        self._values = dict(values)
        self._environ = os.environ if environ is None else environ
        self.file_missing = file_missing

    def __repr__(self) -> str:
        return f"<Secrets keys={sorted(self._keys())}>"

    def _keys(self) -> set[str]:
        return set(self._values) | {k for k in self._environ if k.startswith(("SIFT_TOKEN_",))}

    def get(self, key: str) -> str | None:
        """Return a secret's value, or None when it is missing or blank."""
        value = self._values.get(key) or self._environ.get(key) or ""
        return value.strip() or None

    def callers(self) -> dict[str, str]:
        """Return caller name (lowercased) → bearer token, from `SIFT_TOKEN_<NAME>` keys.

        A token that is not ASCII is a `ConfigError` (its key is named, never its value).
        """
        found: dict[str, str] = {}
        for source in (self._environ, self._values):  # the file wins over the environment
            for key, value in source.items():
                name = key[len("SIFT_TOKEN_") :].lower()
                if key.startswith("SIFT_TOKEN_") and name and value.strip():
                    if not value.isascii():
                        # Header values arrive as bytes read as latin-1: no such token
                        # could ever match, so refuse it here rather than never match.
                        raise ConfigError(f"{key}: a caller token must be ASCII")
                    found[name] = value.strip()
        return found


def parse_secret_env(text: str, path: Path) -> dict[str, str]:
    """Parse `KEY=value` lines (`#` comments, optional quotes, optional `export`)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            # The line may hold a secret: name only its number.
            raise ConfigError(f"{path}: line {number} is not KEY=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def load_secrets(
    path: Path, environ: Mapping[str, str] | None = None, *, expected: bool = False
) -> Secrets:
    """Load `secret.env` once; a missing file leaves only the environment.

    Warns (on the `sift` logger) when an `expected` file is missing, and when the file is
    open to group or others, with the `chmod` that fixes it.
    """
    try:
        with path.open(encoding="utf-8") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            text = f.read()
    except FileNotFoundError:
        if expected:
            log.warning(
                "%s (server.secret_env) does not exist: keys come from the environment only",
                path,
            )
        return Secrets({}, environ, file_missing=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__})") from None
    if mode & 0o077:
        log.warning(
            "%s has mode %04o, so other users may read its keys: run chmod 600 %s",
            path,
            mode,
            path,
        )
    return Secrets(parse_secret_env(text, path), environ)
