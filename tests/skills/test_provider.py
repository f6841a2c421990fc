"""The System One adapter: the request envelope, the response cap and the failure mapping."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from siftlib.skills import provider
from siftlib.skills.consent import RerankSettings
from siftlib.skills.decide import InvalidAnswer, Reason
from siftlib.skills.provider import (
    ENVELOPE_BYTES,
    FIT_ENVELOPE_BYTES,
    MAX_RESPONSE_BYTES,
    Abort,
    Aborted,
    ProviderError,
    SystemOne,
    build_body,
    parse_response,
    resolve_base_url,
)
from siftlib.skills.shortlist import OutboundRequest, build_request

from .systemone_fake import (
    FakeSystemOne,
    catalog_of,
    check_request,
    envelope,
    free_port_refusing,
    ranked,
    serve,
)

SKILLS = {
    "pdf-forms": "Fill in and flatten PDF forms.",
    "csv-clean": "Clean up messy CSV files — quotes, encodings, stray delimiters.",
    "git-bisect": "Find the commit that introduced a bug with git bisect.",
}
KEY = "ts-test-key-0123456789"


@pytest.fixture
def fake() -> Iterator[FakeSystemOne]:
    yield from serve()


def outbound(tmp_path: Path, query: str = "fill a pdf form", **settings: Any) -> OutboundRequest:
    request = build_request(catalog_of(tmp_path, SKILLS), query, RerankSettings(**settings))
    assert isinstance(request, OutboundRequest)
    return request


class TestBody:
    def test_body_is_a_valid_system_one_request(self, tmp_path: Path) -> None:
        request = outbound(tmp_path)
        body = json.loads(build_body(request, model="jev-latest", fit=False))
        check_request(body)
        assert body["model"] == "jev-latest"
        assert body["state"] == request.body
        assert set(body["questions"]) == {"selection"}
        labels = list(body["questions"]["selection"]["criteria"])
        assert labels == ["c0", "c1", "c2", "none"]

    def test_metadata_goes_out_once(self, tmp_path: Path) -> None:
        request = outbound(tmp_path)
        raw = build_body(request, model="jev-latest", fit=True)
        for skill in SKILLS.values():
            assert raw.decode().count(json.dumps(skill, ensure_ascii=False)[1:-1]) == 1
        assert raw.count(request.payload) == 1

    def test_no_local_provenance_is_sent(self, tmp_path: Path) -> None:
        raw = build_body(outbound(tmp_path), model="jev-latest", fit=True).decode()
        assert str(tmp_path) not in raw
        assert "SKILL.md" not in raw

    def test_fit_mode_adds_one_noul_per_candidate(self, tmp_path: Path) -> None:
        body = json.loads(build_body(outbound(tmp_path), model="jev-latest", fit=True))
        check_request(body)
        assert set(body["questions"]) == {"selection", "fit_c0", "fit_c1", "fit_c2"}
        assert all(body["questions"][f"fit_c{i}"]["type"] == "noul" for i in range(3))

    def test_the_largest_envelopes_fit_their_bounds(self, tmp_path: Path) -> None:
        skills = {f"skill-{i:02d}": "" for i in range(64)}
        request = build_request(
            catalog_of(tmp_path, skills), "skill", RerankSettings(max_candidates=64)
        )
        assert isinstance(request, OutboundRequest) and len(request.candidates) == 64
        model = "m" * 256
        for fit, bound in ((False, ENVELOPE_BYTES), (True, FIT_ENVELOPE_BYTES)):
            body = build_body(request, model=model, fit=fit)
            assert len(body) - len(request.payload) <= bound
            check_request(json.loads(body))

    def test_an_envelope_over_its_bound_is_refused_before_any_call(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr("siftlib.skills.provider.ENVELOPE_BYTES", 300)
        with pytest.raises(ProviderError) as caught:
            build_body(outbound(tmp_path), model="m" * 256, fit=False)
        assert caught.value.reason is Reason.ENVELOPE_TOO_LARGE


class TestParse:
    def test_answers_and_tokens(self) -> None:
        answer = parse_response(
            envelope(
                {
                    "selection": {
                        "type": "choice",
                        "choice": "none",
                        "confidence": 1.0,
                        "probabilities": {"none": 1.0},
                    }
                }
            )
        )
        assert answer.answers["selection"]["probabilities"] == {"none": 1.0}
        assert (answer.input_tokens, answer.output_tokens) == (321, 7)

    def test_duplicate_keys_survive_for_validation(self) -> None:
        raw = (
            b'{"model":"m","answers":{"selection":{"type":"choice","probabilities":'
            b'{"c0":0.5,"c0":0.4,"none":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}'
        )
        probabilities = parse_response(raw).answers["selection"]["probabilities"]
        assert probabilities.pairs == [("c0", 0.5), ("c0", 0.4), ("none", 0.1)]

    @pytest.mark.parametrize(
        "usage", [None, {"input_tokens": -1, "output_tokens": True}, {"input_tokens": "12"}]
    )
    def test_unusable_token_counts_are_unknown(self, usage: object) -> None:
        raw = json.dumps({"model": "m", "answers": {}, "usage": usage}).encode()
        answer = parse_response(raw)
        assert (answer.input_tokens, answer.output_tokens) == (None, None)

    @pytest.mark.parametrize(
        "raw",
        [
            b"",
            b"not json",
            b"[]",
            b'{"answers": []}',
            b'{"model": "m"}',
            b"\xff\xfe{",
            b"[" * 100000,
        ],
    )
    def test_malformed_bodies(self, raw: bytes) -> None:
        with pytest.raises(InvalidAnswer) as caught:
            parse_response(raw)
        assert caught.value.reason is Reason.MALFORMED


class TestClient:
    def post(self, url: str, body: bytes = b"{}", timeout: float = 5.0) -> bytes:
        client = SystemOne(api_key=KEY, base_url=url)
        try:
            return client.post(body, timeout=timeout, abort=Abort())
        finally:
            client.close()

    def test_posts_with_the_bearer_key_to_the_system_one_path(
        self, fake: FakeSystemOne, tmp_path: Path
    ) -> None:
        fake.handler = ranked({"pdf-forms": 1.0}, 0.0)
        body = build_body(outbound(tmp_path), model="jev-latest", fit=False)
        raw = self.post(fake.url, body)
        assert json.loads(raw)["answers"]["selection"]["choice"] == "c0"
        (seen,) = fake.requests
        assert seen.headers["Authorization"] == f"Bearer {KEY}"
        assert seen.headers["Content-Type"] == "application/json"
        assert seen.raw == body
        assert seen.format_error is None

    def test_base_url_comes_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert resolve_base_url(None) == "https://api.typesafe.ai"
        monkeypatch.setenv("TYPESAFE_BASE_URL", "http://127.0.0.1:9/")
        assert resolve_base_url(None) == "http://127.0.0.1:9"
        assert resolve_base_url("http://127.0.0.1:8/x/") == "http://127.0.0.1:8/x"

    @pytest.mark.parametrize(
        ("status", "reason"),
        [
            (401, Reason.AUTH),
            (403, Reason.AUTH),
            (429, Reason.RATE_LIMITED),
            (422, Reason.REJECTED),
            (404, Reason.REJECTED),
            (500, Reason.SERVER_ERROR),
            (503, Reason.SERVER_ERROR),
            (302, Reason.HTTP_STATUS),
            (201, Reason.HTTP_STATUS),
        ],
    )
    def test_status_failures(self, fake: FakeSystemOne, status: int, reason: Reason) -> None:
        fake.handler = lambda body: (status, b'{"detail":"nope"}')
        with pytest.raises(ProviderError) as caught:
            self.post(fake.url, b'{"model":"m","state":"s","questions":{}}')
        assert caught.value.reason is reason
        assert len(fake.requests) == 1

    def test_a_body_over_64_kib_is_refused(self, fake: FakeSystemOne) -> None:
        fake.handler = lambda body: (200, b" " * MAX_RESPONSE_BYTES + b"{}")
        with pytest.raises(ProviderError) as caught:
            self.post(fake.url, b'{"model":"m","state":"s","questions":{}}')
        assert caught.value.reason is Reason.OVERSIZE

    def test_a_body_of_exactly_64_kib_is_read(self, fake: FakeSystemOne) -> None:
        payload = b"{}" + b" " * (MAX_RESPONSE_BYTES - 2)
        fake.handler = lambda body: (200, payload)
        assert self.post(fake.url, b'{"model":"m","state":"s","questions":{}}') == payload

    def test_connection_refused_is_a_network_failure(self) -> None:
        with pytest.raises(ProviderError) as caught:
            self.post(free_port_refusing())
        assert caught.value.reason is Reason.NETWORK

    def test_a_dropped_connection_is_a_network_failure(self, fake: FakeSystemOne) -> None:
        fake.handler = lambda body: "close"
        with pytest.raises(ProviderError) as caught:
            self.post(fake.url, b'{"model":"m","state":"s","questions":{}}')
        assert caught.value.reason is Reason.NETWORK

    def test_a_silent_provider_times_out(self, fake: FakeSystemOne) -> None:
        fake.handler = lambda body: "hang"
        with pytest.raises(ProviderError) as caught:
            self.post(fake.url, b'{"model":"m","state":"s","questions":{}}', timeout=0.2)
        assert caught.value.reason is Reason.TIMEOUT

    def test_errors_never_carry_the_key(self) -> None:
        client = SystemOne(api_key="bad\nkey", base_url=free_port_refusing())
        with pytest.raises(ProviderError) as caught:
            client.post(b"{}", timeout=1.0, abort=Abort())
        assert "key" not in str(caught.value) and "key" not in repr(caught.value)
        assert caught.value.__cause__ is None and caught.value.__suppress_context__

    def test_every_client_verifies_tls_with_one_shared_context(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        made: list[ssl.SSLContext] = []
        real = httpx.create_ssl_context
        monkeypatch.setattr(httpx, "create_ssl_context", lambda: made.append(real()) or made[-1])
        provider._tls_context.cache_clear()
        try:
            for _ in range(3):
                SystemOne(api_key=KEY, base_url="https://api.typesafe.ai").close()
        finally:
            provider._tls_context.cache_clear()  # the next client makes a real one again
        [context] = made  # the roots were loaded once for three clients
        assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
        assert context.get_ca_certs()  # httpx's default roots, not an empty store

    def test_an_abort_before_the_call_stops_it_at_once(self, fake: FakeSystemOne) -> None:
        abort = Abort()
        abort.abort()
        client = SystemOne(api_key=KEY, base_url=fake.url)
        with pytest.raises(ProviderError) as caught:
            client.post(b"{}", timeout=5.0, abort=abort)
        assert caught.value.reason is Reason.CANCELLED
        assert fake.requests == []


class _Stream:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, info: str) -> object:
        return self.sock if info == "socket" else None


class TestAbort:
    def test_abort_shuts_the_calls_socket_down(self) -> None:
        ours, peer = socket.socketpair()
        with ours, peer:
            abort = Abort()
            abort.trace("connection.connect_tcp.complete", {"return_value": _Stream(ours)})
            abort.trace("http11.send_request_headers.started", {})
            abort.abort()
            peer.settimeout(2.0)
            assert peer.recv(1) == b""  # the other end sees the connection close
            assert abort.aborted

    def test_a_connection_made_after_the_abort_is_closed_and_stopped(self) -> None:
        ours, peer = socket.socketpair()
        with ours, peer:
            abort = Abort()
            abort.abort()
            with pytest.raises(Aborted):
                abort.trace("connection.connect_tcp.complete", {"return_value": _Stream(ours)})
            peer.settimeout(2.0)
            assert peer.recv(1) == b""

    def test_every_later_step_is_stopped(self) -> None:
        abort = Abort()
        abort.abort()
        with pytest.raises(Aborted):
            abort.trace("http11.receive_response_headers.started", {})
