"""Client mode of `sift search` (search.md §1) against a real gateway, through `main([...])`."""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewaykit import FakeUpstream, Gateway, gateway

from siftlib.cli import main
from siftlib.errors import (
    AuthError,
    Blocked,
    BlockedBySite,
    FetchFailed,
    InvalidRequest,
    InvalidURL,
    NoResultsError,
    QueryError,
    SiftError,
    UnreachableError,
    UnreadableContent,
    UnsupportedContent,
    UnsupportedOption,
)
from siftlib.gateway.api import error_answer
from siftlib.gateway.client import fetch_remote, search_remote
from siftlib.net.tls import verify_for

TOKEN = "tok-client-5c6d7e8f"


@pytest.fixture
def gw(tmp_path: Path, searxng: FakeUpstream) -> Iterator[Gateway]:
    with gateway(tmp_path / "server", searxng=searxng.url, callers={"ops": TOKEN}) as running:
        yield running


@pytest.fixture(autouse=True)
def server_dir(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()


def write_client_toml(url: str, token: str | None = None) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "sift" / "client.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f'url = "{url}"'] + ([f'token = "{token}"'] if token is not None else [])
    path.write_text("\n".join(lines) + "\n")
    return path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_server_flag_prints_hits_as_title_url_snippet_blocks(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIFT_TOKEN", TOKEN)
    code = main(["search", "sqlite wal", "--server", gw.url, "--k", "2"])
    out, err = capsys.readouterr()
    assert code == 0
    blocks = out.strip("\n").split("\n\n")
    assert len(blocks) == 2
    assert blocks[0].splitlines() == [
        "Write-Ahead Logging",
        "https://www.sqlite.org/wal.html",
        "The default method by which SQLite implements atomic commit and rollback is a "
        "rollback journal.",
    ]
    assert TOKEN not in out + err


def test_json_prints_the_native_envelope_from_the_server(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIFT_TOKEN", TOKEN)
    assert main(["search", "sqlite wal", "--server", gw.url, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["search", "sqlite wal", "--server", gw.url, "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert set(first) == {"results", "warnings", "sizes", "timings", "cached"}
    assert (first["cached"], second["cached"]) == (False, True)
    assert first["sizes"]["sources_ok"] == ["searxng"]


def test_client_toml_is_used_without_server_flag(
    gw: Gateway, searxng: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    write_client_toml(gw.url, TOKEN)
    assert main(["search", "sqlite wal"]) == 0
    assert "https://www.sqlite.org/wal.html" in capsys.readouterr().out
    assert len(searxng.calls) == 1


def test_sift_token_overrides_the_token_of_client_toml(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_client_toml(gw.url, "tok-stale")
    assert main(["search", "sqlite wal"]) == 3
    monkeypatch.setenv("SIFT_TOKEN", TOKEN)
    assert main(["search", "sqlite wal"]) == 0
    write_client_toml(gw.url, TOKEN)
    monkeypatch.setenv("SIFT_TOKEN", "tok-wrong")
    assert main(["search", "sqlite wal"]) == 3
    assert "tok-wrong" not in capsys.readouterr().err


@pytest.mark.parametrize("token", [None, "tok-wrong"])
def test_a_refused_token_exits_3_with_one_sentence(
    gw: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    token: str | None,
) -> None:
    if token:
        monkeypatch.setenv("SIFT_TOKEN", token)
    assert main(["search", "sqlite wal", "--server", gw.url]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert "refused" in lines[0] and "401" in lines[0]
    assert "tok-wrong" not in captured.err


def test_an_unreachable_server_exits_5(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    assert main(["search", "sqlite wal", "--server", url]) == 5
    err = capsys.readouterr().err
    assert "unreachable" in err
    assert len(err.strip().splitlines()) == 1


def test_an_unreachable_client_toml_server_exits_5(capsys: pytest.CaptureFixture[str]) -> None:
    write_client_toml(f"http://127.0.0.1:{closed_port()}", TOKEN)
    assert main(["search", "sqlite wal"]) == 5
    assert TOKEN not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["   "], ["x" * 1501], ["sqlite", "--k", "0"], ["sqlite", "--k", "51"]]
)
def test_an_invalid_query_exits_2(
    gw: Gateway,
    searxng: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    monkeypatch.setenv("SIFT_TOKEN", TOKEN)
    assert main(["search", *argv, "--server", gw.url]) == 2
    assert "invalid query" in capsys.readouterr().err
    assert searxng.calls == []


def test_every_source_failing_exits_1_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = FakeUpstream(b"{}", status=503)
    try:
        with gateway(tmp_path / "server", searxng=broken.url) as running:
            code = main(["search", "sqlite wal", "--server", running.url])
    finally:
        broken.close()
    err = capsys.readouterr().err
    assert code == 1
    assert "no search results" in err
    assert "searxng: 503" in err


def test_zero_hits_exit_0_with_no_results_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = FakeUpstream(b'{"results": []}')
    try:
        with gateway(tmp_path / "server", searxng=empty.url) as running:
            code = main(["search", "nothing", "--server", running.url])
    finally:
        empty.close()
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out == ""
    assert "no results" in captured.err


def test_local_flag_ignores_client_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_client_toml(f"http://127.0.0.1:{closed_port()}", TOKEN)
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndb = "{tmp_path / "c.db"}"\n')
    assert main(["search", "sqlite wal", "--local", "--config", str(config)]) == 2
    assert "no search source is enabled" in capsys.readouterr().err


# --- the library function, for what the CLI cannot reach quickly ----------------------------


def test_search_remote_times_out_as_unreachable() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(UnreachableError, match="did not answer in 0.5 s"):
            search_remote(url, None, "sqlite", k=None, timeout=0.5)
    finally:
        for sock in accepted:
            sock.close()
        listener.close()


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (401, b'{"error": "missing or invalid bearer token"}', AuthError),
        (403, b'{"error": "forbidden"}', AuthError),
        (
            400,
            b'{"error": "invalid query", "details": "k must be an integer from 1 to 50"}',
            QueryError,
        ),
        (413, b'{"error": "request body too large"}', QueryError),
        (422, b'{"error": "no search results", "warnings": ["tavily: 429"]}', NoResultsError),
        (404, b'{"error": "not found"}', UnreachableError),
        (500, b'{"error": "internal error"}', UnreachableError),
        (503, b'{"error": "server busy, retry"}', UnreachableError),
        (200, b"<html>a captive portal</html>", UnreachableError),
        (200, b'{"success": true, "data": {"web": []}}', UnreachableError),
    ],
)
def test_search_remote_maps_each_status_to_one_error(
    status: int, body: bytes, error: type[Exception]
) -> None:
    fake = FakeUpstream(body, status=status)
    try:
        with pytest.raises(error) as raised:
            search_remote(fake.url, "tok-secret-x", "sqlite", k=3, timeout=10)
    finally:
        fake.close()
    assert "tok-secret-x" not in str(raised.value)
    assert json.loads(fake.calls[0].body) == {"query": "sqlite", "k": 3}
    assert fake.calls[0].path == "/v1/search"
    assert fake.calls[0].headers["Authorization"] == "Bearer tok-secret-x"
    if error is NoResultsError:
        assert raised.value.warnings == ["tavily: 429"]  # type: ignore[attr-defined]
    if error is QueryError and status == 400:
        assert str(raised.value) == "invalid query: k must be an integer from 1 to 50"


@pytest.mark.parametrize(
    "sent",
    [
        QueryError.because("k must be an integer from 1 to 50"),
        NoResultsError.because("every source failed", ["tavily: 429"]),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_search_remote_keeps_a_search_errors_reason_apart_from_its_label(
    sent: QueryError | NoResultsError,
) -> None:
    status, payload, _ = error_answer(sent, route="/v1/search")
    fake = FakeUpstream(json.dumps(payload).encode(), status=status)
    try:
        with pytest.raises(type(sent)) as raised:
            search_remote(fake.url, "tok", "sqlite", k=3, timeout=10)
    finally:
        fake.close()
    got = raised.value
    assert (str(got), got.reason, got.code) == (str(sent), sent.reason, sent.code)
    if isinstance(sent, NoResultsError):
        assert isinstance(got, NoResultsError) and got.warnings == sent.warnings


FETCH_FAILURES = [
    Blocked("address", "blocked: 127.0.0.1 is a loopback address"),
    UnsupportedContent("image/png"),
    UnreadableContent("the PDF is encrypted"),
    BlockedBySite("a Cloudflare challenge", 503),
    FetchFailed("deadline", "fetch failed: deadline (converting the page)"),
    FetchFailed("dns"),
    InvalidURL("invalid url: url must be a non-empty string"),
    InvalidRequest("invalid request: format must be one of markdown, text, html, links"),
    UnsupportedOption("unsupported option: json"),
]


@pytest.mark.parametrize("sent", FETCH_FAILURES, ids=lambda exc: type(exc).__name__)
def test_fetch_remote_reads_each_error_back_by_its_code(sent: SiftError) -> None:
    status, payload, _ = error_answer(sent, route="/v1/fetch")
    fake = FakeUpstream(json.dumps(payload).encode(), status=status)
    try:
        with pytest.raises(SiftError) as raised:
            fetch_remote(fake.url, "tok", {"url": "https://example.org/"}, timeout=10)
    finally:
        fake.close()
    got = raised.value
    assert type(got) is type(sent)
    assert str(got) == payload["error"]
    assert got.code == sent.code == payload["code"]  # type: ignore[attr-defined]
    if isinstance(sent, BlockedBySite):
        assert isinstance(got, BlockedBySite) and got.status == 503


def test_fetch_remote_takes_an_unknown_400_as_the_servers_sentence() -> None:
    body = b'{"error": "bad request: the body is shorter than its Content-Length"}'
    fake = FakeUpstream(body, status=400)
    try:
        with pytest.raises(QueryError, match="^bad request: the body is shorter"):
            fetch_remote(fake.url, None, {"url": "https://example.org/"}, timeout=10)
    finally:
        fake.close()


def test_search_remote_sends_no_authorization_without_a_token() -> None:
    fake = FakeUpstream(b'{"results": [], "warnings": [], "cached": false}')
    try:
        envelope = search_remote(fake.url + "/", None, "sqlite", k=None, timeout=10)
    finally:
        fake.close()
    assert envelope["results"] == []
    assert "Authorization" not in fake.calls[0].headers
    assert fake.calls[0].path == "/v1/search"
    assert json.loads(fake.calls[0].body) == {"query": "sqlite"}


def test_the_agent_skill_says_sift_first_and_built_in_search_on_exit_5() -> None:
    from siftlib.skills.frontmatter import parse_frontmatter, read_frontmatter

    path = Path(__file__).resolve().parent.parent / "skill" / "SKILL.md"
    meta = parse_frontmatter(read_frontmatter(path))
    assert meta["name"] == "sift-search"
    description = meta["description"]
    assert isinstance(description, str) and len(description.encode()) <= 512
    assert "exit code 5" in description
    body = path.read_text()
    assert 'sift search "' in body
    assert "| 5 | the sift server is unreachable | use your built-in web search" in body


def test_a_plain_http_server_costs_no_tls_roots_and_an_https_one_is_verified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def load(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loaded.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", load)
    with pytest.raises(UnreachableError):
        search_remote(f"http://127.0.0.1:{closed_port()}", None, "q", k=1, timeout=5)
    assert loaded == []  # ~25 ms of CPU per call, for a handshake that never happens
    with pytest.raises(UnreachableError):
        search_remote(f"https://127.0.0.1:{closed_port()}", None, "q", k=1, timeout=5)
    assert loaded  # the roots an https server is verified against
    # Were TLS ever started on the plain-http client, it would verify, against no root: fail.
    context = verify_for("http://127.0.0.1:8787")
    assert isinstance(context, ssl.SSLContext) and context.get_ca_certs() == []
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert verify_for("HTTPS://sift.example") is True
