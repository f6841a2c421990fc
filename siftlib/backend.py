"""One way to search and read pages for every face: in-process, or through a sift gateway.

    backend = open_backend(config=None, server=None, local=False)
    try:
        response = backend.search(SearchRequest(query="sqlite wal", k=5))   # a SearchResponse
        page = backend.fetch(FetchRequest(url="https://sqlite.org/wal.html"))  # a FetchResult
    finally:
        backend.close()

`sift search`, `sift fetch` and `sift mcp` open one with `open_backend` and never ask which
kind it is; `sift serve` opens a `LocalBackend` and hands its searcher and fetcher to the
gateway. Where it runs is decided once (search.md §1, fetch.md §1): `--local`, else
`--server URL` or `client.toml` name a gateway (`GatewayBackend`), else in-process
(`LocalBackend`).

`LocalBackend` opens the config once, then the secrets, the store and the searcher on the
first search and the fetcher on the first fetch (so `sift search` never imports the
fetcher, and `sift mcp` starts without either); it owns the sentences for a face with
nothing enabled. `GatewayBackend` posts to `/v1/search` and `/v1/fetch` and reads the
envelopes back into the same typed results; its failures are the library's errors
(`siftlib.gateway.client`). Cancelling a call stops its work either way: in-process the
pipeline or fetcher stops; through a gateway the connection is shut down, and the gateway
cancels the work of a client that hung up.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Protocol

from siftlib.lazylog import LazyLogger

if TYPE_CHECKING:
    from siftlib.config import Config, Secrets
    from siftlib.fetch.fetcher import Fetcher, FetchRequest, FetchResult
    from siftlib.metrics import Metrics
    from siftlib.search.pipeline import Searcher, SearchRequest, SearchResponse
    from siftlib.store.base import Store

log = LazyLogger("sift")

ENABLE_KEYS = "search.searxng.enabled, search.brave_llm.enabled or search.tavily.enabled"
SEARCH_TIMEOUT = 30.0  # through a gateway: it answers within its own deadline first
FETCH_TIMEOUT = 75.0  # through a gateway: above its longest fetch deadline (60 s)


class Backend(Protocol):
    """Searches and fetches, wherever they run."""

    def search(
        self, request: SearchRequest, *, cancel: threading.Event | None = None
    ) -> SearchResponse:
        """Run one search; raise `Cancelled` once `cancel` is set."""
        ...

    def fetch(self, request: FetchRequest, *, cancel: threading.Event | None = None) -> FetchResult:
        """Read one page; raise `Cancelled` once `cancel` is set."""
        ...

    def close(self) -> None:
        """Release what the backend opened."""
        ...


def open_backend(
    *, config: str | None, server: str | None, local: bool, allow_private_upstreams: bool = False
) -> Backend:
    """Return the backend a face runs on: the gateway `client.toml` or `server` names, else local.

    Raises `ConfigError` when `client.toml` cannot be read.
    """
    from siftlib.config import load_client_config

    client = None if local else load_client_config(server)
    if client is not None:
        return GatewayBackend(client.url, client.token)
    return LocalBackend(config, allow_private_upstreams=allow_private_upstreams)


class LocalBackend:
    """The pipeline and the fetcher in this process, opened on first use and closed together.

    `sift serve` opens one over the config it has read and checked (`LocalBackend.over`),
    hands its searcher and fetcher to the gateway, and gives it each config SIGHUP reads
    (`reload`): the store and the counters stay, the parts replaced are the server's to close.
    """

    def __init__(self, config: str | None, *, allow_private_upstreams: bool = False) -> None:
        self.config_path = config
        self.allow_private_upstreams = allow_private_upstreams
        self._config: Config | None = None
        self._secrets: Secrets | None = None
        self._metrics: Metrics | None = None
        self._store: Store | None = None
        self._searcher: Searcher | None = None
        self._fetcher: Fetcher | None = None
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()  # the store and the page caches

    @classmethod
    def over(
        cls,
        config: Config,
        secrets: Secrets | None = None,
        *,
        allow_private_upstreams: bool = False,
    ) -> LocalBackend:
        """Return a backend over a config already read, and its secrets when read too."""
        backend = cls(str(config.path), allow_private_upstreams=allow_private_upstreams)
        backend._config, backend._secrets = config, secrets
        return backend

    @property
    def config(self) -> Config:
        """Return the config, read on first use."""
        if self._config is None:
            from siftlib.config import load_config

            self._config = load_config(self.config_path)
        return self._config

    @property
    def secrets(self) -> Secrets:
        """Return the secrets the config names, read on first use."""
        if self._secrets is None:
            from siftlib.config import load_secrets

            config = self.config
            self._secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
        return self._secrets

    @property
    def metrics(self) -> Metrics:
        """Return the counters the searcher and the fetcher share, across reloads too."""
        if self._metrics is None:
            from siftlib.metrics import Metrics

            self._metrics = Metrics()
        return self._metrics

    def search(
        self, request: SearchRequest, *, cancel: threading.Event | None = None
    ) -> SearchResponse:
        """Run one search through the in-process pipeline."""
        config = self.config
        if not config.enabled_sources:
            from siftlib.errors import ConfigError

            raise ConfigError(
                f"no search source is enabled: set {ENABLE_KEYS} to true in {config.path}"
            )
        return self.searcher().search(request, cancel=cancel)

    def fetch(self, request: FetchRequest, *, cancel: threading.Event | None = None) -> FetchResult:
        """Read one page through the in-process fetcher (and its cache, when configured)."""
        return self.fetcher().fetch(request, cancel=cancel)

    def store(self) -> Store:
        """Return the cache and ledger the config names, opened on first use."""
        with self._lock:
            return self._open_store()

    def _open_store(self) -> Store:
        if self._store is None:
            from siftlib.store.factory import open_configured_store

            self._store = open_configured_store(self.config, self.secrets)
            self._stack.callback(self._store.close)
        return self._store

    def searcher(self) -> Searcher:
        """Return the searcher, opening secrets, store and sources on first use."""
        with self._lock:
            if self._searcher is None:
                from siftlib.search.pipeline import Searcher

                self._searcher = Searcher(
                    self.config,
                    self.secrets,
                    store=self._open_store(),
                    metrics=self.metrics,
                    allow_private_upstreams=self.allow_private_upstreams,
                )
            return self._searcher

    def fetcher(self) -> Fetcher:
        """Return the fetcher and its page cache, opened on first use."""
        with self._lock:
            if self._fetcher is None:
                from siftlib.errors import ConfigError
                from siftlib.fetch.cache import open_fetch_cache
                from siftlib.fetch.fetcher import Fetcher

                config = self.config
                if not config.fetch.enabled:
                    raise ConfigError(
                        f"fetch is disabled: set fetch.enabled = true in {config.path}"
                    )
                cache = open_fetch_cache(config, self.secrets)  # pages read again come from it
                if cache is not None:
                    self._stack.callback(cache.close)
                self._fetcher = Fetcher(
                    config.fetch,
                    metrics=self.metrics,
                    restricted=config.permit_restricted,
                    cache=cache,
                )
            return self._fetcher

    def reload(self, config: Config, secrets: Secrets) -> None:
        """Take a new config for the next searcher, and for the next fetcher if `[fetch]` changed.

        The store and the counters stay. The searcher and fetcher replaced are not closed here:
        requests may still be running on them.
        """
        with self._lock:
            if self._config is None or config.fetch != self._config.fetch:
                self._fetcher = None
            self._config, self._secrets, self._searcher = config, secrets, None

    def close(self) -> None:
        """Close the fetcher, the searcher, the store and the page caches."""
        with self._lock:
            if self._fetcher is not None:
                self._fetcher.close()
            if self._searcher is not None:
                self._searcher.close()
            self._fetcher = self._searcher = None
            self._stack.close()


def warn_if_no_source(config: Config) -> None:
    """Log that a gateway's every search will answer 422, and which keys change that."""
    if not config.enabled_sources:
        log.warning(
            "no search source is enabled: every search answers 422 until one of %s is set to "
            "true in %s (then kill -HUP this process)",
            ENABLE_KEYS,
            config.path,
        )


class GatewayBackend:
    """A sift gateway over HTTP, answering with the same typed results as the local pipeline."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        search_timeout: float = SEARCH_TIMEOUT,
        fetch_timeout: float = FETCH_TIMEOUT,
    ) -> None:
        self.url = url
        self.token = token
        self.search_timeout = search_timeout
        self.fetch_timeout = fetch_timeout

    def search(
        self, request: SearchRequest, *, cancel: threading.Event | None = None
    ) -> SearchResponse:
        """Search through the gateway (`POST /v1/search`); cancelling hangs up on it."""
        from siftlib.gateway.client import search_remote, search_response

        envelope = search_remote(
            self.url,
            self.token,
            request.query,
            k=request.k,
            timeout=self.search_timeout,
            cancel=cancel,
        )
        return search_response(envelope)

    def fetch(self, request: FetchRequest, *, cancel: threading.Event | None = None) -> FetchResult:
        """Read a page through the gateway (`POST /v1/fetch`); cancelling hangs up on it."""
        from siftlib.gateway.client import fetch_remote, fetch_result

        body: dict[str, object] = {
            "url": request.url,
            "format": request.format,
            "main_content": request.main_content,
        }
        if request.max_chars is not None:
            body["max_chars"] = request.max_chars
        if request.max_age is not None:
            body["max_age"] = request.max_age
        envelope = fetch_remote(
            self.url, self.token, body, timeout=self.fetch_timeout, cancel=cancel
        )
        return fetch_result(envelope)

    def close(self) -> None:
        """Nothing to release: each call opens and closes its own connection."""
