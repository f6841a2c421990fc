"""Open the store a config names, behind the memory front of recent hits (store.md §1)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from siftlib.errors import ConfigError
from siftlib.store.recent import RecentHits
from siftlib.store.sqlite import open_sqlite

if TYPE_CHECKING:
    import redis

    from siftlib.config import Config, Secrets
    from siftlib.store.base import Store


def open_configured_store(config: Config, secrets: Secrets) -> Store:
    """Open the store `[server] store` names: the SQLite file, or a Redis-protocol server."""
    if config.store == "sqlite":
        return open_store(config.db)
    _import_client(config)
    from siftlib.store.redis import PASSWORD_KEY, open_redis_store

    return RecentHits(
        open_redis_store(
            config.store,
            password=secrets.get(PASSWORD_KEY),
            prefix=config.store_prefix,
            fallback_share=config.store_fallback_share,
            fill_timeout=config.timeout,
        )
    )


def open_configured_client(config: Config, secrets: Secrets) -> redis.Redis:
    """Return a client of the Redis-protocol server `[server] store` names, for what else
    keeps its data there (the fetch cache), with the store's timeouts and password."""
    _import_client(config)
    from siftlib.store.redis import PASSWORD_KEY, connect

    return connect(config.store, password=secrets.get(PASSWORD_KEY))


def _import_client(config: Config) -> None:
    """Import the redis client; one installed (config found it) but broken is a ConfigError."""
    try:
        import redis  # noqa: F401 - only a fleet needs it
    except ImportError as exc:
        raise ConfigError(
            f"{config.path}: server.store needs the optional extra sift[redis], whose client "
            f"failed to import ({type(exc).__name__}): pip install --force-reinstall "
            "'sift[redis]'"
        ) from None


def open_store(path: Path) -> Store:
    """Open the store file (created with its schema if needed) behind the memory front."""
    return RecentHits(open_sqlite(path))
