"""Cancellation and admission in the gateway: hang-ups, fetch slots, hostile pages beside search."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bodykit import searxng_body
from fetchkit import PageServer, hang, hostile_links, page
from gatewaykit import FakeUpstream, call, gateway, wait_until

from siftlib.backend import GatewayBackend
from siftlib.config import FetchConfig
from siftlib.errors import Cancelled
from siftlib.fetch.fetcher import Fetcher, FetchRequest
from siftlib.fetch.workers import WorkerPool
from siftlib.search.pipeline import SearchRequest


class SilentUpstream:
    """A loopback upstream that reads each request, never answers, and notes each hang-up.

    With `answer`, only requests whose head holds `b"slow"` go unanswered; the others get
    `answer` as a JSON 200.
    """

    def __init__(self, answer: bytes | None = None) -> None:
        self.answer = answer
        self.requests = 0
        self.hung_up = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            if self.answer is not None and b"slow" not in data:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(self.answer)}\r\nConnection: close\r\n\r\n".encode()
                    + self.answer
                )
                return
            self.requests += 1
            conn.settimeout(60)
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
            self.hung_up.set()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def silent() -> Iterator[SilentUpstream]:
    upstream = SilentUpstream()
    yield upstream
    upstream.close()


def send_and_hang_up(port: int, path: str, body: dict[str, object], until: object) -> None:
    """Send a request, wait until `until()` is true, then close the connection unanswered."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        wait_until(until, "the request reached its upstream")


def test_a_client_that_hangs_up_cancels_its_search_and_its_upstream_request(
    tmp_path: Path, silent: SilentUpstream
) -> None:
    # The search's own timeout is far off: only the hang-up can close the upstream request.
    with gateway(tmp_path, tavily=silent.url, timeout="60s", tavily_cap=5, max_searches=1) as gw:
        send_and_hang_up(gw.port, "/v1/search", {"query": "gone"}, lambda: silent.requests == 1)
        wait_until(silent.hung_up.is_set, "the gateway closed the upstream request", limit=15)
        # Its slot is free again (one slot in all), and nothing was cached for it.
        wait_until(lambda: gw.server._slots.qsize() == 1, "the search slot freed")
    assert silent.requests == 1


def test_an_mcp_call_cancelled_through_a_gateway_cancels_the_gateways_work(
    tmp_path: Path,
) -> None:
    """`sift mcp --server`: a cancelled `web_search` hangs up on the gateway, which closes
    its upstream request and frees its one search slot for the next call."""
    upstream = SilentUpstream(answer=searxng_body(3))
    sift = Path(sys.executable).parent / "sift"
    try:
        # One search slot, and a search timeout far off: only the hang-up can free the slot.
        with gateway(tmp_path, searxng=upstream.url, timeout="60s", max_searches=1) as gw:
            mcp = subprocess.Popen(
                [str(sift), "mcp", "--server", gw.url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "HOME": str(tmp_path)},
                cwd=tmp_path,
            )
            assert mcp.stdin is not None and mcp.stdout is not None
            try:

                def send(*messages: dict[str, object]) -> None:
                    assert mcp.stdin is not None
                    mcp.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
                    mcp.stdin.flush()

                def search(id: int, query: str) -> dict[str, object]:
                    arguments = {"name": "web_search", "arguments": {"query": query}}
                    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": arguments}

                send(search(1, "slow one"))
                wait_until(lambda: upstream.requests == 1, "the search reached its upstream")
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 1},
                    }
                )
                wait_until(upstream.hung_up.is_set, "the gateway closed the upstream request")
                wait_until(lambda: gw.server._slots.qsize() == 1, "the search slot freed")
                send(search(2, "quick one"))
                answer = json.loads(mcp.stdout.readline())  # the cancelled call is never answered
                mcp.stdin.close()
                assert mcp.wait(60) == 0
            finally:
                mcp.kill()
                mcp.wait(60)
                mcp.stdout.close()
    finally:
        upstream.close()
    assert answer["id"] == 2
    assert answer["result"]["isError"] is False
    assert len(answer["result"]["structuredContent"]["results"]) == 3
    assert upstream.requests == 1


def test_a_cancelled_gateway_call_hangs_up_at_once_or_never_connects(
    silent: SilentUpstream,
) -> None:
    # The silent upstream plays a gateway that never answers: only the cancel ends the call.
    backend = GatewayBackend(silent.url, None, fetch_timeout=60.0)
    cancel = threading.Event()
    raised: list[BaseException] = []

    def fetch() -> None:
        try:
            backend.fetch(FetchRequest(url="https://example.org/"), cancel=cancel)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=fetch)
    thread.start()
    wait_until(lambda: silent.requests == 1, "the request reached the gateway")
    cancel.set()
    wait_until(silent.hung_up.is_set, "the connection shut down")
    thread.join(10)
    assert [type(exc) for exc in raised] == [Cancelled]
    with pytest.raises(Cancelled):  # cancelled before it starts: nothing is sent
        backend.search(SearchRequest(query="never sent"), cancel=cancel)
    time.sleep(0.1)
    assert silent.requests == 1


def test_a_search_past_the_deadline_is_cancelled_not_left_running(
    tmp_path: Path, silent: SilentUpstream
) -> None:
    with gateway(tmp_path, tavily=silent.url, timeout="60s", deadline=0.5) as gw:
        reply = call(gw.url, "POST", "/v1/search", {"query": "late"})
        assert (reply.status, reply.json["error"]) == (503, "search deadline exceeded")
        wait_until(silent.hung_up.is_set, "the gateway closed the upstream request", limit=15)


def test_a_cancelled_search_releases_what_it_did_not_send_and_caches_nothing(
    tmp_path: Path,
) -> None:
    upstream = FakeUpstream(b'{"results": []}')
    try:
        with gateway(tmp_path, tavily=upstream.url, tavily_cap=5) as gw:
            cancel = threading.Event()
            cancel.set()
            with pytest.raises(Cancelled):
                gw.searcher.search(SearchRequest(query="never sent"), cancel=cancel)
            from siftlib.search.plan import utc_day

            assert gw.store.daily_credits(day=utc_day(gw.searcher.clock())) in ({}, {"tavily": 0})
            assert upstream.calls == []
    finally:
        upstream.close()


def test_slow_fetches_never_take_the_slots_searches_need(tmp_path: Path) -> None:
    searxng = FakeUpstream(searxng_body(5))
    fetches: list[int] = []
    with PageServer({"/slow": hang(6)}) as site:
        # The fetches' deadline (2 s) outlasts the search by far; the page outlasts them.
        fetch = FetchConfig(allow=(site.allow,), timeout=2.0)
        try:
            with gateway(
                tmp_path, searxng=searxng.url, fetch=fetch, max_searches=2, queue_wait=0.2
            ) as gw:
                # Six fetches of one host: four reach it (`per_host`), two wait for a turn.
                threads = [
                    threading.Thread(
                        target=lambda: fetches.append(
                            call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/slow"}).status
                        )
                    )
                    for _ in range(6)
                ]
                for thread in threads:
                    thread.start()
                wait_until(lambda: len(site.hits) == 4, "four fetches at the host")
                search = call(gw.url, "POST", "/v1/search", {"query": "still answers"})
                for thread in threads:
                    thread.join(30)
        finally:
            searxng.close()
    assert search.status == 200
    assert sorted(fetches) == [408] * 6


def test_a_search_answers_during_32_hostile_scrapes(tmp_path: Path) -> None:
    """Pages that cost seconds each to convert, 32 at once: the search still gets its answer.

    How fast it answers is measured by tests/bench/bench_fetch.py, not asserted here. Both
    workers convert until the fetch deadline kills them, so the deadline is this test's cost:
    2 s, over pages of 20,000 links (560 KB, read at once, seconds each to convert).
    """
    searxng = FakeUpstream(searxng_body(5))
    scrapes: list[int] = []
    with (
        PageServer({"/links": page(hostile_links(20_000))}) as site,
        WorkerPool(
            2, preload=("siftlib.fetch.fetcher", "siftlib.fetch.convert")
        ) as pool,  # its own: killed
    ):
        pool.start()
        pool.run(len, b"", deadline=time.monotonic() + 120)  # warm: the pages are the test
        settings = FetchConfig(allow=(site.allow,), timeout=2.0, per_host=32)
        fetcher = Fetcher(settings, pool=pool)
        try:
            with gateway(tmp_path, searxng=searxng.url, fetcher=fetcher, max_fetches=32) as gw:
                threads = [
                    threading.Thread(
                        target=lambda: scrapes.append(
                            call(gw.url, "POST", "/v2/scrape", {"url": site.url + "/links"}).status
                        )
                    )
                    for _ in range(32)
                ]
                for thread in threads:
                    thread.start()
                wait_until(lambda: len(site.hits) >= 16, "the scrapes under way")
                searches = [
                    call(gw.url, "POST", "/v2/search", {"query": f"during {n}"}) for n in range(3)
                ]
                for thread in threads:
                    thread.join(60)
        finally:
            searxng.close()
    assert [reply.status for reply in searches] == [200, 200, 200]
    assert all(reply.json["success"] for reply in searches)
    assert len(scrapes) == 32 and set(scrapes) <= {200, 408}


def test_a_search_answered_at_once_is_never_watched_for_a_hang_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Watching costs two system calls a request: work done sooner never starts it (a roomy
    # delay here, so a busy machine cannot make this flaky; the gateway's is 50 ms).
    monkeypatch.setattr("siftlib.gateway.server.HANGUP_AFTER", 5.0)
    searxng = FakeUpstream(searxng_body(3))
    try:
        with gateway(tmp_path, searxng=searxng.url) as gw:
            watched: list[int] = []
            original = gw.server.hangups.watch
            monkeypatch.setattr(
                gw.server.hangups,
                "watch",
                lambda connection, cancel: watched.append(1) or original(connection, cancel),
            )
            for _ in range(20):
                assert call(gw.url, "POST", "/v1/search", {"query": "cached"}).status == 200
    finally:
        searxng.close()
    assert (len(searxng.calls), watched) == (1, [])
