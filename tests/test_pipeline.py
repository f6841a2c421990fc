"""The pipeline end to end against fake upstreams on 127.0.0.1 speaking the real wire formats."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from bodykit import fixture_text
from clockkit import NOW
from gatewaykit import QuietServer
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from siftlib.config import Secrets, load_config, load_secrets
from siftlib.errors import NoResultsError, QueryError
from siftlib.net.deadline import DeadlineClock
from siftlib.search.fanout import SourceOutcome
from siftlib.search.pipeline import Searcher, SearchRequest

KEYS = {"BRAVE_API_KEY": "brave-secret", "TAVILY_API_KEY": "tavily-secret"}


@pytest.fixture
def make_searcher(tmp_path: Path, httpserver: HTTPServer) -> Iterator[Callable[..., Searcher]]:
    made: list[Searcher] = []

    def make(
        *,
        sources: tuple[str, ...] = ("searxng", "brave_llm", "tavily"),
        tavily_extra: str = "",
        timeout: str = "2s",
        keys: dict[str, str] | None = None,
        urls: dict[str, str] | None = None,
        resolver: Callable[[str, int], list[str]] | None = None,
    ) -> Searcher:
        base = httpserver.url_for("")
        url = {"searxng": base + "searx", "brave_llm": base + "brave", "tavily": base + "tavily"}
        url.update(urls or {})
        text = f'[search]\ntimeout = "{timeout}"\n'
        for name in ("searxng", "brave_llm", "tavily"):
            enabled = str(name in sources).lower()
            text += f'[search.{name}]\nenabled = {enabled}\nurl = "{url[name]}"\n'
        text += tavily_extra
        path = tmp_path / "config.toml"
        path.write_text(text)
        searcher = Searcher(
            load_config(str(path)),
            Secrets(KEYS if keys is None else keys, environ={}),
            allow_private_upstreams=True,
            resolver=resolver,
        )
        made.append(searcher)
        return searcher

    yield make
    for searcher in made:
        searcher.close()


def serve_all(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/searx/search").respond_with_data(
        fixture_text("searxng/wal-typed-and-legacy.json"), content_type="application/json"
    )
    httpserver.expect_request("/brave").respond_with_data(
        fixture_text("brave_llm/wal-generic-and-sources.json"), content_type="application/json"
    )
    httpserver.expect_request("/tavily", method="POST").respond_with_data(
        fixture_text("tavily/wal-usage-unsorted.json"), content_type="application/json"
    )


def test_three_sources_fuse_in_the_hand_computed_order(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    response = make_searcher().search(SearchRequest(query="sqlite wal mode", k=10))
    # Per-source ranks: searxng wal 1, blog 2, journal 3, pragma 4 (sorted by score);
    # brave wal 1, forum 2, blog 3 (from `sources`); tavily blog 1, wal 2, so 3.
    wal = 1 / 61 + 1 / 61 + 1 / 62
    blog = 1 / 62 + 1 / 63 + 1 / 61
    assert [(h.url, h.source) for h in response.results] == [
        ("https://www.sqlite.org/wal.html", "searxng"),
        ("https://blog.example.net/sqlite-wal-explained/", "searxng"),
        ("https://forum.example.org/t/wal-on-nfs", "brave_llm"),
        ("https://docs.example.com/db/journal-modes#wal", "searxng"),  # 1/63, rank 3, searxng
        ("https://stackoverflow.example.com/q/1234", "tavily"),  # 1/63, rank 3, tavily
        ("https://www.sqlite.org/pragma.html?x=1#pragma_journal_mode", "searxng"),
    ]
    assert [h.score for h in response.results[:3]] == [wal, blog, 1 / 62]
    assert response.results[0].snippet.startswith("WAL mode lets readers")  # brave's is longer
    assert response.results[1].snippet.startswith("## WAL mode")  # tavily's is longer
    # Engines: SearXNG's own count plus one for each other source that returned the page.
    assert [(h.engines, h.published) for h in response.results] == [
        (3 + 1 + 1, "2026-03-02"),  # SearXNG has no date for it; Brave's `age` has
        (2 + 1 + 1, "2026-03-02T00:00:00"),
        (1, None),  # Brave alone: the one source that returned it
        (1, None),
        (1, None),
        (1, None),
    ]
    assert response.warnings == []
    assert response.sources_ok == ["searxng", "brave_llm", "tavily"]
    assert response.credits == {"brave_llm": 1, "tavily": 1}
    assert response.cached is False


def test_outbound_requests_are_exact(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request(
        "/searx/search",
        query_string={"q": "Sqlite WAL mode", "format": "json", "pageno": "1"},
        headers={"Accept": "application/json"},
    ).respond_with_json({"results": []})
    httpserver.expect_request(
        "/brave",
        method="GET",
        query_string={"q": "Sqlite WAL mode"},
        headers={"X-Subscription-Token": "brave-secret"},
    ).respond_with_json({"grounding": {"generic": []}, "sources": {}})
    httpserver.expect_request(
        "/tavily",
        method="POST",
        headers={"Authorization": "Bearer tavily-secret"},
        json={
            "query": "Sqlite WAL mode",
            "max_results": 3,
            "search_depth": "basic",
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
            "include_usage": True,
        },
    ).respond_with_json({"results": [], "usage": {"credits": 1}})
    response = make_searcher().search(SearchRequest(query="  Sqlite \n WAL\tmode ", k=3))
    assert response.warnings == [] and response.results == []
    assert response.sources_ok == ["searxng", "brave_llm", "tavily"]
    httpserver.check_assertions()


def drip(request: Request) -> Response:
    def chunks() -> Iterator[bytes]:
        yield b'{"results": ['
        for _ in range(100):
            time.sleep(0.05)
            yield b" "
        yield b"]}"

    return Response(chunks(), content_type="application/json")


def hang(request: Request) -> Response:
    time.sleep(3)
    return Response("{}", content_type="application/json")


class SteppedClock(DeadlineClock):
    """Deadline time that stands still until the fan-out waits; then, once `back` calls are
    done (and `asked` is set, when given), it jumps to the deadline, as if the rest had hung
    until then."""

    def __init__(self, back: int, *, asked: threading.Event | None = None) -> None:
        self.time, self.back, self.waited_until = 100.0, back, None
        self.asked = asked

    def now(self) -> float:
        return self.time

    def wait(self, futures: Collection[Future[SourceOutcome]], *, until: float) -> None:
        pending = set(futures)
        while len(futures) - len(pending) < self.back:
            _, pending = wait(pending, timeout=30, return_when=FIRST_COMPLETED)
        if self.asked is not None and not self.asked.wait(30):
            raise AssertionError("the later page was never asked for")
        self.waited_until = until
        self.time = max(self.time, until)


@pytest.mark.parametrize(
    ("respond", "warning"),
    [
        (lambda h: h.respond_with_data("boom", status=500), "tavily: 500"),
        (lambda h: h.respond_with_data("slow down", status=429), "tavily: 429"),
        (lambda h: h.respond_with_handler(hang), "tavily: timeout"),
        (lambda h: h.respond_with_handler(drip), "tavily: timeout"),
        (lambda h: h.respond_with_data("<html>not json</html>"), "tavily: bad response"),
        (lambda h: h.respond_with_data(b"x" * (2 * 1024 * 1024 + 1)), "tavily: too large"),
    ],
    ids=["500", "429", "timeout", "drip", "garbage", "oversize"],
)
def test_a_failing_source_is_a_warning_and_the_others_still_answer(
    httpserver: HTTPServer,
    make_searcher: Callable[..., Searcher],
    respond: Callable[..., None],
    warning: str,
) -> None:
    httpserver.expect_request("/searx/search").respond_with_data(
        fixture_text("searxng/wal-typed-and-legacy.json"), content_type="application/json"
    )
    respond(httpserver.expect_request("/tavily", method="POST"))
    searcher = make_searcher(sources=("searxng", "tavily"), timeout="1s")
    # A timed-out Tavily is still out when the deadline comes; the others answered before it.
    clock = searcher.deadline_clock = SteppedClock(back=1 if warning.endswith("timeout") else 2)
    response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert clock.waited_until == 100.0 + 1.0  # one deadline, `search.timeout` after the start
    assert response.search_ms == 1000
    assert response.warnings == [warning]
    assert response.sources_ok == ["searxng"] and response.sources_failed == ["tavily"]
    assert [h.source for h in response.results] == ["searxng"] * 4


def test_oversize_with_streamed_body_is_cut(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    def big(request: Request) -> Response:
        return Response((b"x" * 65536 for _ in range(64)), content_type="application/json")

    httpserver.expect_request("/searx/search").respond_with_handler(big)
    with pytest.raises(NoResultsError) as failed:
        make_searcher(sources=("searxng",)).search(SearchRequest(query="q"))
    assert failed.value.warnings == ["searxng: too large"]


def test_connection_refused_is_a_warning(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    serve_all(httpserver)
    searcher = make_searcher(urls={"brave_llm": f"http://127.0.0.1:{closed_port}/brave"})
    response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert response.warnings == ["brave_llm: connection failed"]
    assert response.sources_ok == ["searxng", "tavily"]
    assert response.credits == {"tavily": 1}


def test_searxng_403_says_json_may_be_disabled(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    httpserver.clear_all_handlers()
    httpserver.expect_request("/searx/search").respond_with_data("Forbidden", status=403)
    httpserver.expect_request("/tavily", method="POST").respond_with_json({"results": []})
    response = make_searcher(sources=("searxng", "tavily")).search(SearchRequest(query="q"))
    assert response.warnings == ["searxng: 403 (json format disabled?)"]


def test_every_source_failing_raises_no_results(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/searx/search").respond_with_data("x", status=500)
    httpserver.expect_request("/tavily", method="POST").respond_with_data("x", status=503)
    with pytest.raises(NoResultsError) as failed:
        make_searcher(sources=("searxng", "tavily")).search(SearchRequest(query="q"))
    assert failed.value.warnings == ["searxng: 500", "tavily: 503"]


def test_query_caps_skip_the_source_without_calling_it(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/searx/search").respond_with_json({"results": []})
    httpserver.expect_request("/tavily").respond_with_json({"results": []})
    searcher = make_searcher()
    long_words = " ".join(["w"] * 51)  # 101 characters: only Brave's 50-word cap applies
    response = searcher.search(SearchRequest(query=long_words))
    assert response.warnings == ["brave_llm: query too long"]
    response = searcher.search(SearchRequest(query="x" * 401))
    assert response.warnings == ["brave_llm: query too long", "tavily: query too long"]
    assert response.sources_ok == ["searxng"]
    paths = sorted(r.path for r, _ in httpserver.log)
    assert paths == ["/searx/search", "/searx/search", "/tavily"]  # Brave never called


def test_missing_key_is_a_warning_on_every_search(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    searcher = make_searcher(keys={"BRAVE_API_KEY": "b"})
    response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert response.warnings == ["tavily: missing key"]
    assert searcher.checkup().degraded == ["search.tavily: missing key"]
    assert all(r.path != "/tavily" for r, _ in httpserver.log)


def test_no_rerank_keeps_tavily_order_as_prefix(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    searcher = make_searcher(sources=("searxng", "tavily"), tavily_extra="no_rerank = true\n")
    response = searcher.search(SearchRequest(query="sqlite wal mode", k=4))
    assert [(h.url, h.source) for h in response.results] == [
        ("https://blog.example.net/sqlite-wal-explained", "tavily"),
        ("https://www.sqlite.org/wal.html", "tavily"),
        ("https://stackoverflow.example.com/q/1234", "tavily"),
        ("https://docs.example.com/db/journal-modes#wal", "searxng"),
    ]


def test_rerank_false_concatenates_in_source_order(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    response = make_searcher().search(SearchRequest(query="sqlite wal mode", k=20, rerank=False))
    assert [(h.url, h.source, h.score) for h in response.results] == [
        ("https://www.sqlite.org/wal.html", "searxng", 9.0),
        ("https://blog.example.net/sqlite-wal-explained/", "searxng", 2.25),
        ("https://docs.example.com/db/journal-modes#wal", "searxng", 1 / 3),
        ("https://www.sqlite.org/pragma.html?x=1#pragma_journal_mode", "searxng", 1 / 3),
        ("https://forum.example.org/t/wal-on-nfs", "brave_llm", 0.0),
        ("https://stackoverflow.example.com/q/1234", "tavily", 0.5),
    ]
    assert response.rerank_ms == 0


def test_results_are_truncated_to_k(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    response = make_searcher().search(SearchRequest(query="sqlite wal mode", k=2))
    assert len(response.results) == 2
    assert response.to_native()["sizes"] == {
        "results": 2,
        "sources_ok": ["searxng", "brave_llm", "tavily"],
        "sources_failed": [],
    }


@pytest.mark.parametrize("query", ["", "   \n\t ", "x" * 1501, 42, None])
def test_invalid_queries(make_searcher: Callable[..., Searcher], query: object) -> None:
    with pytest.raises(QueryError, match="^invalid query"):
        make_searcher().search(SearchRequest(query=query))  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, 51, -1, True, 2.5, "5"])
def test_invalid_k(make_searcher: Callable[..., Searcher], k: object) -> None:
    with pytest.raises(QueryError):
        make_searcher().search(SearchRequest(query="q", k=k))  # type: ignore[arg-type]


def test_1500_characters_is_allowed(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/searx/search").respond_with_json({"results": []})
    response = make_searcher(sources=("searxng",)).search(SearchRequest(query="x" * 1500))
    assert response.results == []


def test_digest_is_accepted_with_a_warning(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/searx/search").respond_with_json({"results": []})
    response = make_searcher(sources=("searxng",)).search(SearchRequest(query="q", digest=True))
    assert response.warnings == ["digest: not supported"]


def test_one_info_line_per_search_without_query_text(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher], caplog: pytest.LogCaptureFixture
) -> None:
    serve_all(httpserver)
    searcher = make_searcher()
    with caplog.at_level("INFO", logger="sift"):
        searcher.search(SearchRequest(query="sqlite wal mode", caller="alice"))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("search ")]
    assert len(lines) == 1
    assert lines[0].startswith(
        "search caller=alice q_len=15 sources=searxng,brave_llm,tavily n=6 cache=miss rerank_ms="
    )
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "sift")
    for secret in ("sqlite wal mode", "brave-secret", "tavily-secret", "127.0.0.1", "http"):
        assert secret not in text


class _KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    ports: list[int] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.ports.append(self.client_address[1])
        payload = json.dumps({"results": [{"url": "https://a.com", "title": "A"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_upstream_connections_are_reused_across_searches(
    make_searcher: Callable[..., Searcher],
) -> None:
    _KeepAliveHandler.ports = []
    server = QuietServer(("127.0.0.1", 0), _KeepAliveHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        searcher = make_searcher(sources=("searxng",), urls={"searxng": url})
        for _ in range(3):
            assert searcher.search(SearchRequest(query="q")).results
    finally:
        server.shutdown()
        server.server_close()
    assert len(_KeepAliveHandler.ports) == 3
    assert len(set(_KeepAliveHandler.ports)) == 1  # one TCP connection served all three


def test_uncapped_paid_credits_still_count_toward_the_daily_total(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    from siftlib.store.factory import open_store

    serve_all(httpserver)
    path = tmp_path / "config.toml"
    path.write_text(
        f'[search.brave_llm]\nenabled = true\nurl = "{httpserver.url_for("brave")}"\n'
        f"[search.tavily]\nenabled = true\ndaily_credit_cap = 0\n"
        f'url = "{httpserver.url_for("tavily")}"\n'
    )
    store = open_store(tmp_path / "server.db")
    searcher = Searcher(
        load_config(str(path)),
        Secrets(KEYS, environ={}),
        store=store,
        clock=lambda: NOW,
        allow_private_upstreams=True,
    )
    try:
        searcher.search(SearchRequest(query="sqlite wal mode"))
        snapshot = searcher.metrics_snapshot()
    finally:
        searcher.close()
        store.close()
    assert snapshot["search_daily_credits"] == {"source=brave_llm": 1, "source=tavily": 1}
    assert snapshot["search_capped"] == {"source=brave_llm": 0, "source=tavily": 0}


@pytest.mark.parametrize(
    ("status", "paid", "booked"),
    [(200, b"not json", 1), (200, b'{"results": 5}', 1), (500, b"{}", 0)],
    ids=["2xx-not-json", "2xx-bad-shape", "5xx"],
)
def test_a_paid_2xx_answer_costs_its_credit_even_when_unusable(
    tmp_path: Path, httpserver: HTTPServer, status: int, paid: bytes, booked: int
) -> None:
    from siftlib.store.factory import open_store

    httpserver.expect_request("/brave").respond_with_data(paid, status=status)
    httpserver.expect_request("/tavily", method="POST").respond_with_data(paid, status=status)
    path = tmp_path / "config.toml"
    path.write_text(
        f'[search.brave_llm]\nenabled = true\nurl = "{httpserver.url_for("brave")}"\n'
        f"daily_credit_cap = 10\n"
        f'[search.tavily]\nenabled = true\nurl = "{httpserver.url_for("tavily")}"\n'
    )
    store = open_store(tmp_path / "server.db")
    searcher = Searcher(
        load_config(str(path)),
        Secrets(KEYS, environ={}),
        store=store,
        clock=lambda: NOW,
        allow_private_upstreams=True,
    )
    try:
        with pytest.raises(NoResultsError):
            searcher.search(SearchRequest(query="sqlite wal mode"))
        snapshot = searcher.metrics_snapshot()
    finally:
        searcher.close()
        store.close()
    daily = {"source=brave_llm": booked, "source=tavily": booked}
    assert snapshot["search_daily_credits"] == daily
    spent = {"caller=local,source=brave_llm": booked, "caller=local,source=tavily": booked}
    assert snapshot["search_credits"] == (spent if booked else {})


def test_metrics_name_every_search_counter_before_the_first_search(
    make_searcher: Callable[..., Searcher],
) -> None:
    snapshot = make_searcher().metrics_snapshot()
    assert snapshot["search_cache_hit"] == snapshot["search_cache_miss"] == 0
    assert snapshot["search_queries"] == snapshot["search_credits"] == {}
    assert snapshot["search_errors"] == {}


NESTED = b"[" * 100_000 + b"]" * 100_000  # 200 KB: under the body cap, over the decoder's depth


@pytest.mark.parametrize(
    "tavily_body",
    [
        b'{"results": [], "usage": {"credits": 1e999}}',
        b'{"results": [], "usage": {"credits": NaN}}',
        b'{"results": [], "usage": {"credits": 1e30}}',
        b'{"results": [], "usage": {"credits": ' + b"9" * 400 + b"}}",
        b'{"results": [], "usage": {"credits": -1}}',
        b'{"results": [], "usage": {"credits": "2"}}',
        b'{"results": [{"url": "https://t.example/", "score": NaN}]}',
        b'{"results": [{"url": "https://t.example/", "score": -Infinity}]}',
        b'{"results": [{"url": "https://t.example/", "score": 1e999}]}',
        b'{"results": [{"url": "https://t.example/", "score": 1' + b"0" * 400 + b"}]}",
        NESTED,
        b'{"results": ' + NESTED + b"}",
    ],
    ids=[
        "credits-inf",
        "credits-nan",
        "credits-1e30",
        "credits-huge-int",
        "credits-negative",
        "credits-string",
        "score-nan",
        "score-minus-infinity",
        "score-inf",
        "score-huge-int",
        "nested-array",
        "nested-results",
    ],
)
def test_a_hostile_number_or_nesting_is_that_sources_bad_response(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher], tavily_body: bytes
) -> None:
    httpserver.expect_request("/searx/search").respond_with_data(
        fixture_text("searxng/wal-typed-and-legacy.json"), content_type="application/json"
    )
    httpserver.expect_request("/tavily", method="POST").respond_with_data(
        tavily_body, content_type="application/json"
    )
    for rerank in (True, False):
        response = make_searcher(sources=("searxng", "tavily")).search(
            SearchRequest(query="sqlite wal mode", rerank=rerank, use_cache=False)
        )
        assert response.warnings == ["tavily: bad response"]
        assert response.sources_ok == ["searxng"]
        assert [h.source for h in response.results] == ["searxng"] * 4
        # Strict JSON: a NaN or infinity anywhere in the answer would make this raise.
        json.dumps(response.to_native(), allow_nan=False)


def test_an_unforeseen_exception_in_a_source_is_a_bad_response_logged_by_type(
    httpserver: HTTPServer,
    make_searcher: Callable[..., Searcher],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    serve_all(httpserver)

    def explode(self: object, body: bytes) -> object:
        raise LookupError("tavily-secret quoted from the body")

    monkeypatch.setattr("siftlib.search.sources.tavily.Tavily.parse", explode)
    searcher = make_searcher(sources=("searxng", "tavily"))
    with caplog.at_level("WARNING", logger="sift"):
        response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert response.warnings == ["tavily: bad response"]
    assert response.sources_ok == ["searxng"]
    assert "tavily: bad response (LookupError)" in caplog.text
    assert "quoted" not in caplog.text


def test_a_lone_surrogate_is_an_invalid_query(make_searcher: Callable[..., Searcher]) -> None:
    with pytest.raises(QueryError, match="invalid query"):
        make_searcher().search(SearchRequest(query="wal \ud800 mode"))


def test_a_missing_configured_secret_env_is_named_when_a_key_is_missing(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[server]\nsecret_env = "{tmp_path / "absent.env"}"\n'
        f'[search.tavily]\nenabled = true\nurl = "{httpserver.url_for("tavily")}"\n'
    )
    config = load_config(str(path))
    missing = Searcher(config, load_secrets(config.secret_env, {}, expected=True))
    keyed = Searcher(
        config,
        load_secrets(config.secret_env, {"TAVILY_API_KEY": "t"}, expected=True),
        allow_private_upstreams=True,
    )
    try:
        assert missing.checkup().degraded == [
            "search.tavily: missing key",
            "server.secret_env: file missing",
        ]
        assert keyed.checkup().degraded == []  # the environment held the key: nothing is missing
    finally:
        missing.close()
        keyed.close()


# --- what SearXNG says beside its results, and its pages -----------------------------------


def serve_pages(httpserver: HTTPServer, page_2: Callable[..., None] | None = None) -> None:
    """Serve the two recorded pages of one SearXNG query, each on its own `pageno`."""
    httpserver.expect_request(
        "/searx/search", query_string={"q": "sqlite wal", "format": "json", "pageno": "1"}
    ).respond_with_data(fixture_text("searxng/wal-page-1.json"), content_type="application/json")
    page = httpserver.expect_request(
        "/searx/search", query_string={"q": "sqlite wal", "format": "json", "pageno": "2"}
    )
    if page_2 is None:
        page.respond_with_data(
            fixture_text("searxng/wal-page-2.json"), content_type="application/json"
        )
    else:
        page_2(page)


def searx_pages(httpserver: HTTPServer) -> list[str]:
    return [r.args["pageno"] for r, _ in httpserver.log if r.path == "/searx/search"]


def test_answers_suggestions_and_corrections_ride_in_the_envelope_never_as_hits(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/searx/search").respond_with_data(
        fixture_text("searxng/partial-three-unresponsive.json"), content_type="application/json"
    )
    envelope = make_searcher(sources=("searxng",)).search(SearchRequest(query="q")).to_native()
    assert envelope["answers"] == [
        "PRAGMA wal_checkpoint(TRUNCATE) blocks until readers finish, then truncates the WAL."
    ]
    assert envelope["suggestions"] == [
        "sqlite wal_autocheckpoint",
        "sqlite busy_timeout checkpoint",
    ]
    assert envelope["corrections"] == ["sqlite checkpoint starvation wal"]
    results = envelope["results"]
    assert isinstance(results, list) and len(results) == 3
    texts = json.dumps(results)
    assert "wal_checkpoint(TRUNCATE)" not in texts and "busy_timeout" not in texts


def test_an_envelope_without_upstream_texts_has_no_such_keys(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/tavily", method="POST").respond_with_data(
        fixture_text("tavily/wal-usage-unsorted.json"), content_type="application/json"
    )
    envelope = make_searcher(sources=("tavily",)).search(SearchRequest(query="q")).to_native()
    assert set(envelope) == {"results", "warnings", "sizes", "timings", "cached"}


def test_a_k_one_page_cannot_fill_asks_for_the_second_page(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_pages(httpserver)
    searcher = make_searcher(sources=("searxng",))
    response = searcher.search(SearchRequest(query="sqlite wal", k=20))
    assert searx_pages(httpserver) == ["1", "2"]
    # 12 + 6 hits, one of page 2's the same page as page 1's first: 17 distinct pages.
    urls = [h.url for h in response.results]
    assert len(urls) == 17 and urls[0] == "https://example.com/shared/"
    assert response.results[0].snippet == (
        "A seventy-nine character snippet that explains the shared-memory file of WAL..."
    )
    assert urls[12:] == [f"https://docs.example.org/wal/{i}" for i in range(12, 17)]
    assert response.results[12].published == "2025-12-01T00:00:00"
    assert response.warnings == []
    assert searcher.metrics.snapshot()["search_queries"] == {"caller=local,source=searxng": 2}


def test_a_k_the_first_page_fills_asks_for_one_page(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_pages(httpserver)
    response = make_searcher(sources=("searxng",)).search(SearchRequest(query="sqlite wal", k=10))
    assert searx_pages(httpserver) == ["1"]
    assert len(response.results) == 10


@pytest.mark.parametrize(
    ("respond", "warning"),
    [
        (lambda h: h.respond_with_data("boom", status=500), "searxng: partial (page 2 500)"),
        (None, "searxng: partial (page 2 timeout)"),  # it hangs: see the test
        (
            lambda h: h.respond_with_data("<html>", status=200),
            "searxng: partial (page 2 bad response)",
        ),
    ],
    ids=["500", "deadline", "garbage"],
)
def test_a_failed_second_page_keeps_the_first_pages_hits_with_a_warning(
    httpserver: HTTPServer,
    make_searcher: Callable[..., Searcher],
    respond: Callable[..., None] | None,
    warning: str,
) -> None:
    asked = threading.Event()

    def hang_once_asked(request: Request) -> Response:
        asked.set()
        return hang(request)

    serve_pages(httpserver, respond or (lambda h: h.respond_with_handler(hang_once_asked)))
    searcher = make_searcher(sources=("searxng",), timeout="1s")
    if respond is None:  # the deadline comes once page 2 is asked for, as if it hung until then
        searcher.deadline_clock = SteppedClock(back=0, asked=asked)
    response = searcher.search(SearchRequest(query="sqlite wal", k=20))
    assert response.warnings == [warning]
    assert response.sources_ok == ["searxng"] and response.sources_failed == []
    assert len(response.results) == 12
    assert response.results[0].snippet == "twenty characters ok"
    assert searcher.metrics.snapshot()["search_queries"] == {"caller=local,source=searxng": 2}


# --- failure accounting -----------------------------------------------------------------------


def resolving(**answers: list[str] | None) -> Callable[[str, int], list[str]]:
    """A resolver: the loopback as itself, each named host its answer, None a failed lookup."""

    def resolve(host: str, port: int) -> list[str]:
        if host == "127.0.0.1":
            return ["127.0.0.1"]
        answer = answers[host.replace(".", "_")]
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answer

    return resolve


def test_dns_failures_for_paid_sources_are_named_counted_and_logged(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher], caplog: pytest.LogCaptureFixture
) -> None:
    serve_all(httpserver)
    port = httpserver.port
    searcher = make_searcher(
        urls={
            "brave_llm": f"http://api.search.brave.test:{port}/brave",
            "tavily": f"http://api.tavily.test:{port}/tavily",
        },
        resolver=resolving(api_search_brave_test=None, api_tavily_test=None),
    )
    with caplog.at_level("WARNING", logger="sift.source"):
        response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert response.warnings == ["brave_llm: dns failed", "tavily: dns failed"]
    assert response.sources_ok == ["searxng"]
    assert response.sources_failed == ["brave_llm", "tavily"]
    assert searcher.metrics.snapshot()["search_errors"] == {
        "kind=dns failed,source=brave_llm": 1,
        "kind=dns failed,source=tavily": 1,
    }
    lines = [r.getMessage() for r in caplog.records if r.name == "sift.source"]
    assert lines == ["source brave_llm failed: dns failed", "source tavily failed: dns failed"]
    assert searcher.checkup().degraded == [
        "search.brave_llm: dns failed",
        "search.tavily: dns failed",
    ]


def test_a_refused_answer_is_upstream_refused_not_a_dns_failure(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    serve_all(httpserver)
    searcher = make_searcher(
        sources=("searxng", "tavily"),
        urls={"tavily": f"http://api.tavily.test:{httpserver.port}/tavily"},
        resolver=resolving(api_tavily_test=["169.254.169.254"]),  # metadata: always refused
    )
    response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert response.warnings == ["tavily: upstream refused"]
    assert response.sources_failed == ["tavily"]
    assert searcher.metrics.snapshot()["search_errors"] == {
        "kind=upstream refused,source=tavily": 1
    }


def failing_tavily(kind: str) -> Callable[[HTTPServer], dict[str, object]]:
    """Set up Tavily to fail with `kind`; return the options `make_searcher` then needs."""

    def arrange(httpserver: HTTPServer) -> dict[str, object]:
        tavily = httpserver.expect_request("/tavily", method="POST")
        if kind == "500":
            tavily.respond_with_data("boom", status=500)
        elif kind == "timeout":
            tavily.respond_with_handler(hang)
        elif kind == "bad response":
            tavily.respond_with_data("<html>")
        elif kind == "too large":
            tavily.respond_with_data(b"x" * (2 * 1024 * 1024 + 1))
        elif kind == "connection failed":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return {"urls": {"tavily": f"http://127.0.0.1:{s.getsockname()[1]}/t"}}
        elif kind == "missing key":
            return {"keys": {}}
        return {}

    return arrange


@pytest.mark.parametrize(
    "kind",
    ["500", "timeout", "bad response", "too large", "connection failed", "missing key"],
)
def test_every_failure_kind_is_in_sources_failed_search_errors_and_the_log(
    httpserver: HTTPServer,
    make_searcher: Callable[..., Searcher],
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    httpserver.expect_request("/searx/search").respond_with_data(
        fixture_text("searxng/wal-typed-and-legacy.json"), content_type="application/json"
    )
    options = failing_tavily(kind)(httpserver)
    searcher = make_searcher(sources=("searxng", "tavily"), timeout="1s", **options)
    if kind == "timeout":  # Tavily hangs: the deadline comes once SearXNG is back
        searcher.deadline_clock = SteppedClock(back=1)
    with caplog.at_level("WARNING", logger="sift.source"):
        response = searcher.search(SearchRequest(query="sqlite wal mode"))
    assert response.warnings == [f"tavily: {kind}"]
    assert response.sources_failed == ["tavily"] and response.sources_ok == ["searxng"]
    assert searcher.metrics.snapshot()["search_errors"] == {f"kind={kind},source=tavily": 1}
    lines = [r.getMessage() for r in caplog.records if r.name == "sift.source"]
    assert lines == [f"source tavily failed: {kind}"]
    # Every line but the fake upstream's own access lines (werkzeug's, at INFO: they name the
    # query and 127.0.0.1; one of a request answered, or hung, a moment ago can land here).
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name != "werkzeug")
    assert "sqlite wal mode" not in logged and "127.0.0.1" not in logged


def test_a_query_too_long_for_a_source_is_a_failed_source_too(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    httpserver.expect_request("/searx/search").respond_with_json({"results": []})
    searcher = make_searcher(sources=("searxng", "tavily"))
    response = searcher.search(SearchRequest(query="x" * 401))
    assert response.sources_failed == ["tavily"] and response.sources_ok == ["searxng"]
    assert searcher.metrics.snapshot()["search_errors"] == {"kind=query too long,source=tavily": 1}


def test_a_failed_search_logs_why_each_source_failed(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher], caplog: pytest.LogCaptureFixture
) -> None:
    httpserver.expect_request("/searx/search").respond_with_data(
        fixture_text("searxng/every-engine-suspended.json"), content_type="application/json"
    )
    httpserver.expect_request("/tavily", method="POST").respond_with_data("x", status=429)
    searcher = make_searcher(sources=("searxng", "tavily"))
    with caplog.at_level("WARNING", logger="sift.source"), pytest.raises(NoResultsError):
        searcher.search(SearchRequest(query="sqlite wal mode"))
    lines = [r.getMessage() for r in caplog.records if r.name == "sift.source"]
    assert lines == ["source searxng failed: unresponsive", "source tavily failed: 429"]
    assert searcher.metrics.snapshot()["search_errors"] == {
        "kind=unresponsive,source=searxng": 1,
        "kind=429,source=tavily": 1,
    }


def test_health_follows_a_source_that_keeps_failing_and_recovers(
    httpserver: HTTPServer, make_searcher: Callable[..., Searcher]
) -> None:
    status = [500]

    def searx(request: Request) -> Response:
        if status[0] != 200:
            return Response("down", status=status[0])
        return Response(
            fixture_text("searxng/wal-typed-and-legacy.json"), content_type="application/json"
        )

    httpserver.expect_request("/searx/search").respond_with_handler(searx)
    httpserver.expect_request("/tavily", method="POST").respond_with_data(
        fixture_text("tavily/wal-usage-unsorted.json"), content_type="application/json"
    )
    searcher = make_searcher(sources=("searxng", "tavily"))
    for _ in range(3):
        searcher.search(SearchRequest(query="sqlite wal mode"))
    health = searcher.checkup().sources
    assert health["searxng"]["state"] == "failing" and health["tavily"]["state"] == "ok"
    assert health["searxng"]["success_rate"] == 0.0 and health["searxng"]["recent"] == 3
    assert searcher.checkup().degraded == ["search.searxng: failing"]
    status[0] = 200
    searcher.search(SearchRequest(query="sqlite wal mode"))
    health = searcher.checkup().sources
    assert health["searxng"]["state"] == "ok" and health["searxng"]["success_rate"] == 0.25
    assert isinstance(health["searxng"]["p50_ms"], int)
    assert searcher.checkup().degraded == []
