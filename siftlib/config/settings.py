"""The settings: `config.toml` read into `Config` and its tables, and `client.toml`.

    config = load_config(None)           # the config `resolve_config_path` finds, checked
    config.source("tavily").daily_credit_cap

A missing config file means all defaults. The `[skill_search]` table belongs to skill search,
which reads and validates it itself (`siftlib.skills.consent`; an invalid table there
disables reranking instead of failing every command): here the key is only allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from siftlib import __version__
from siftlib.config.files import (
    default_db,
    default_secret_env,
    read_toml,
    resolve_config_path,
    user_config_dir,
)
from siftlib.config.tables import Table
from siftlib.errors import ConfigError
from siftlib.query import MAX_K

__all__ = [
    "PAID_SOURCES",
    "SOURCE_ORDER",
    "BrowserConfig",
    "ClientConfig",
    "Config",
    "FetchConfig",
    "SourceConfig",
    "load_client_config",
    "load_config",
]

SOURCE_ORDER = ("searxng", "brave_llm", "tavily")
PAID_SOURCES = ("brave_llm", "tavily")


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
    executable: str = "auto"  # "auto": chromium-headless-shell if installed, else chromium
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


def load_config(explicit: str | None = None) -> Config:
    """Load and validate the server config found by `resolve_config_path`."""
    path = resolve_config_path(explicit)
    root = Table(read_toml(path), "", path)
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


def _fetch_config(table: Table) -> FetchConfig:
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


def _cache_max_age(table: Table) -> float:
    """Return `[fetch] cache_max_age` in seconds: a duration, or "0s" to turn the cache off."""
    if table.get("cache_max_age", str, "1h").strip() in ("0", "0s"):
        return 0.0
    return table.duration("cache_max_age", "1h")


def _browser_config(table: Table) -> BrowserConfig:
    table.check_keys(set(BrowserConfig._fields))
    base = BrowserConfig()
    executable = table.get("executable", str, base.executable)
    if not executable.strip():
        raise table.error("executable", 'must be "auto" or name a Chromium executable')
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
            url = Table({"server": server_url}, "--", Path("the command line")).url("server", "")
        except ConfigError:
            # A usage error, not an unreachable server: exit 5 would send agents to their
            # built-in search when the command line is what needs fixing.
            raise ConfigError(
                f"--server must be a URL such as http://127.0.0.1:8787, not {server_url!r}"
            ) from None
        return ClientConfig(url=url.rstrip("/"), token=token)
    path = user_config_dir() / "client.toml"
    table = Table(read_toml(path), "", path)
    if not table.data:
        return None
    table.check_keys({"url", "token"})
    url = table.url("url", "")
    file_token = table.get("token", str, "") or None
    return ClientConfig(url=url.rstrip("/"), token=token or file_token)
