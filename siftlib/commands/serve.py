"""`sift serve`: run the HTTP gateway until SIGTERM or Ctrl-C, then drain and close the store.

sift serve                       # listen on [server] listen (127.0.0.1:8787)
sift serve --listen 0.0.0.0:8787 # needs at least one SIFT_TOKEN_<NAME> in secret.env
kill -HUP <pid>                  # re-read config.toml and secret.env, as nginx and SearXNG do

SIGHUP (`Reloader`): the config and secrets are read again and checked as at start; a new
searcher (sources, keys, timeouts, cache key parts), the callers, `permit_restricted`, `k`
and the deadline are swapped in for the next request, and the fetcher too when `[fetch]`
changed. Requests already running finish on what they started with; the replaced parts are
closed once the longest of them must have ended (its deadline plus the socket timeout), or
at shutdown. The store, its counters and metrics carry over. An invalid new config (or one
that would leave a non-loopback listener without caller tokens) is refused with one log
line, and the running one stays. The listen address and the store are bound at start: a
change to them is logged as needing a restart, and the rest of the reload applies.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from siftlib.backend import LocalBackend
    from siftlib.config import Config
    from siftlib.fetch.fetcher import Fetcher
    from siftlib.gateway.server import GatewayServer
    from siftlib.store.base import Store

# The margin past the per-source timeout: fan-out, merge, cache write and the answer itself.
DEADLINE_MARGIN = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of `sift serve`."""
    parser.epilog = "example: sift serve --listen 127.0.0.1:8787"
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="address to listen on (default: [server] listen, 127.0.0.1:8787)",
    )
    parser.add_argument(
        "--allow-private-upstreams",
        action="store_true",
        help="TEST ONLY: let Brave and Tavily point at loopback or private addresses",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; exit 0 after in-flight requests have finished."""
    from siftlib.backend import LocalBackend, warn_if_no_source
    from siftlib.config import load_config, load_secrets
    from siftlib.errors import ConfigError
    from siftlib.gateway.server import FETCH_MARGIN, GatewayServer, check_open_mode, split_listen
    from siftlib.logs import configure_logging

    configure_logging()
    try:
        config = load_config(args.config)
        secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
        host, port = split_listen(args.listen or config.listen)
        callers = secrets.callers()
        check_open_mode(host, callers, secret_env=str(config.secret_env))
    except ConfigError as exc:
        print(f"sift serve: {exc}", file=sys.stderr)
        return 2
    warn_if_no_source(config)

    backend = LocalBackend.over(
        config, secrets, allow_private_upstreams=args.allow_private_upstreams
    )
    try:
        searcher = backend.searcher()
    except ConfigError as exc:  # the redis client installed but broken
        print(f"sift serve: {exc}", file=sys.stderr)
        return 2
    fetcher = open_fetcher(backend)
    try:
        server = GatewayServer(
            (host, port),
            searcher,
            callers=callers,
            fetcher=fetcher,
            **request_limits(config),
        )
    except OSError as exc:
        backend.close()
        why = exc.strerror or type(exc).__name__
        print(f"sift serve: cannot listen on {host}:{port}: {why}", file=sys.stderr)
        return 1

    def stop(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever to return, which runs on this very thread.
        threading.Thread(target=server.shutdown, name="sift-stop").start()

    reloader = Reloader(args, server, backend)

    def reload(signum: int, frame: FrameType | None) -> None:
        # Off the signal handler: loading the config and opening clients takes a while.
        threading.Thread(target=reloader.reload, name="sift-reload", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, reload)
    logging.getLogger("sift").info("%s", describe(config, backend.store()))
    for handler in logging.getLogger().handlers:
        handler.flush()  # what will be called, before the first request can arrive
    mode = "open mode, loopback only" if server.open_mode else f"{len(callers)} caller(s)"
    print(
        f"sift serve: listening on {server.server_name}:{server.server_port} ({mode})",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()  # woken by shutdown(): nothing polls
    finally:
        # In-flight work may be a fetch, whose deadline can pass the search's.
        longest = server.deadline
        if server.fetcher is not None:
            longest = max(longest, reloader.config.fetch.timeout + FETCH_MARGIN)
        finished = server.drain(timeout=longest + server.socket_timeout)
        server.server_close()
        reloader.close()
        backend.close()
    for handler in logging.getLogger().handlers:
        handler.flush()  # the last search lines first: they are written in batches
    print(
        "sift serve: stopped" if finished else "sift serve: stopped with requests unfinished",
        file=sys.stderr,
        flush=True,
    )
    return 0


class Reloader:
    """Re-reads config and secrets on SIGHUP and swaps them into the running gateway."""

    def __init__(
        self, args: argparse.Namespace, server: GatewayServer, backend: LocalBackend
    ) -> None:
        self.args = args
        self.server = server
        self.backend = backend
        self._lock = threading.Lock()
        self._retired: list[tuple[threading.Timer, Callable[[], None]]] = []

    @property
    def config(self) -> Config:
        """The config the gateway serves now."""
        return self.backend.config

    def reload(self) -> None:
        """Load the config again and apply it, or log why not and keep the running one."""
        from siftlib.backend import warn_if_no_source
        from siftlib.config import load_config, load_secrets
        from siftlib.errors import ConfigError
        from siftlib.gateway.server import FETCH_MARGIN, check_open_mode

        log = logging.getLogger("sift")
        with self._lock:
            if self.server.draining.is_set():
                return
            old = self.config
            try:
                config = load_config(self.args.config)
                secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
                callers = secrets.callers()
                check_open_mode(self.server.server_name, callers, secret_env=str(config.secret_env))
            except ConfigError as exc:
                log.error("reload refused, still serving the previous config: %s", exc)
                return
            if not self.args.listen and config.listen != old.listen:
                log.warning("reload: [server] listen takes a restart; still on %s", old.listen)
            if (config.store, config.store_prefix, config.db) != (
                old.store,
                old.store_prefix,
                old.db,
            ):
                log.warning("reload: the store settings take a restart; keeping the open store")
            self.backend.reload(config, secrets)
            searcher = self.backend.searcher()
            fetcher = open_fetcher(self.backend)
            replaced, replaced_fetcher = self.server.reload(
                searcher,
                callers=callers,
                fetcher=fetcher,
                **request_limits(config),
            )
            warn_if_no_source(config)
            longest = old.timeout + DEADLINE_MARGIN
            if replaced_fetcher is not fetcher and replaced_fetcher is not None:
                longest = max(longest, old.fetch.timeout + FETCH_MARGIN)
                self._retire(replaced_fetcher.close, longest)
            self._retire(replaced.close, longest)
            log.info("reloaded %s: %s", config.path, describe(config, self.backend.store()))

    def _retire(self, close: Callable[[], None], after: float) -> None:
        """Close a replaced part once every request that may use it has ended."""
        once = _once(close)
        timer = threading.Timer(after + self.server.socket_timeout, once)
        timer.daemon = True
        self._retired.append((timer, once))
        timer.start()

    def close(self) -> None:
        """Close every replaced part not closed yet (at shutdown, after the drain)."""
        with self._lock:
            retired, self._retired = self._retired, []
        for timer, once in retired:
            timer.cancel()
            once()


def _once(close: Callable[[], None]) -> Callable[[], None]:
    """Return `close` made safe to call from a timer and at shutdown both: it runs once."""
    lock = threading.Lock()
    done: list[bool] = []

    def run() -> None:
        with lock:
            if not done:
                done.append(True)
                close()

    return run


def request_limits(config: Config) -> dict[str, Any]:
    """Return what the gateway takes from the config per request, at start and on reload."""
    return {
        "restricted": config.permit_restricted,
        "default_k": config.k,
        "deadline": config.timeout + DEADLINE_MARGIN,
    }


def open_fetcher(backend: LocalBackend) -> Fetcher | None:
    """Return the gateway's fetcher (None when `[fetch] enabled = false`); no worker starts yet.

    The conversion workers (~1 s of CPU each for lxml and trafilatura) start with the first
    fetch, their imports running while its page is read: a gateway that only searches never
    pays for them (docs: page reading, conversion inside a budget).
    """
    if not backend.config.fetch.enabled:
        return None
    return backend.fetcher()


def describe(config: Config, store: Store) -> str:
    """Return the start-up line: the enabled sources with their URLs, and the store."""
    sources = ", ".join(f"{s.name} {s.url}" for s in config.enabled_sources) or "none"
    problem = store.problem  # a Redis store pings to answer: ask once
    fault = f" ({problem})" if problem else ""
    if config.store_kind == "sqlite":
        return f"sources: {sources}; store: SQLite {config.db}{fault}"
    from siftlib.store.redis import describe_url

    return f"sources: {sources}; store: redis {describe_url(config.store)}{fault}"
