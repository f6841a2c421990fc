"""A fake TypeSafe System One server on 127.0.0.1, speaking the real wire format.

Every request it receives is checked by `check_request`, and every answer it builds by
`check_response`: the wire format's rules written out here, so `make test` needs no SDK.
That these checks and the fake's answers agree with the official SDK (`typesafe-sdk`, which
pulls in pydantic) is proven by `tests/contract/test_systemone_sdk.py` under `make contract`.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from gatewaykit import QuietServer

Reply = tuple[int, bytes] | str  # (status, body), or "hang" / "trickle" / "close"


_QUESTION_FIELDS = {
    "choice": {"type", "instructions", "criteria"},
    "noul": {"type", "instructions"},
}


def check_request(body: dict[str, Any]) -> None:
    """Raise unless `body` is a System One request as sift sends it, with nothing extra."""
    assert set(body) == {"model", "state", "questions"}, sorted(body)
    assert isinstance(body["model"], str) and isinstance(body["state"], dict | list | str)
    assert isinstance(body["questions"], dict) and body["questions"]
    for label, question in body["questions"].items():
        assert isinstance(label, str) and isinstance(question, dict), label
        kind = question.get("type")
        assert kind in _QUESTION_FIELDS, kind
        assert set(question) <= _QUESTION_FIELDS[kind], sorted(question)
        assert isinstance(question.get("instructions", ""), str)
        if kind == "choice":
            criteria = question["criteria"]
            assert isinstance(criteria, dict) and criteria
            assert all(isinstance(c, str) and isinstance(t, str) for c, t in criteria.items())


def check_response(raw: bytes) -> None:
    """Raise unless `raw` is a System One answer: model, usage tokens, typed answers."""
    data = json.loads(raw)
    assert isinstance(data["model"], str)
    usage = data["usage"]
    assert all(isinstance(usage[k], int) for k in ("input_tokens", "output_tokens"))
    for answer in data.get("answers", {}).values():
        if answer["type"] == "choice":
            assert isinstance(answer["choice"], str) and answer["choice"] in answer["probabilities"]
            numbers = [answer["confidence"], *answer["probabilities"].values()]
        else:
            assert answer["type"] == "noul", answer["type"]
            numbers = [answer["noul"]]
        assert all(isinstance(n, float | int) and 0 <= n <= 1 for n in numbers)


def candidate_ids(body: dict[str, Any]) -> dict[str, str]:
    """Map candidate names to the IDs of this request."""
    return {c["name"]: c["id"] for c in body["state"]["candidates"]}


def choice(body: dict[str, Any], by_name: dict[str, float], none: float) -> dict[str, Any]:
    """A `selection` answer giving `by_name` probabilities (others 0) and `none` to no-match."""
    probabilities = {cid: by_name.get(name, 0.0) for name, cid in candidate_ids(body).items()}
    probabilities["none"] = none
    best = max(probabilities, key=lambda label: probabilities[label])
    return {
        "type": "choice",
        "choice": best,
        "confidence": probabilities[best],
        "probabilities": probabilities,
    }


def envelope(answers: dict[str, Any], *, tokens: tuple[int, int] = (321, 7)) -> bytes:
    """Wrap answers in a full response body, checked as the wire format says."""
    raw = json.dumps(
        {
            "model": "jev-2026-09-15",
            "answers": answers,
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
        }
    ).encode()
    check_response(raw)
    return raw


def ranked(by_name: dict[str, float], none: float) -> Callable[[dict[str, Any]], Reply]:
    """A handler answering every request with the same named distribution."""

    def handle(body: dict[str, Any]) -> Reply:
        return 200, envelope({"selection": choice(body, by_name, none)})

    return handle


def fitted(
    by_name: dict[str, float], none: float, fits: dict[str, float]
) -> Callable[[dict[str, Any]], Reply]:
    """A fit-mode handler: the choice plus one `fit_cN` per candidate (0.0 unless named)."""

    def handle(body: dict[str, Any]) -> Reply:
        answers = {"selection": choice(body, by_name, none)}
        for name, cid in candidate_ids(body).items():
            answers[f"fit_{cid}"] = {"type": "noul", "noul": fits.get(name, 0.0)}
        return 200, envelope(answers)

    return handle


@dataclass
class Seen:
    """One request as the fake received it."""

    headers: dict[str, str]
    raw: bytes
    body: dict[str, Any]
    format_error: str | None


@dataclass
class FakeSystemOne:
    """The server's state: how to answer, and what it saw."""

    handler: Callable[[dict[str, Any]], Reply] = field(default=lambda body: "close")
    requests: list[Seen] = field(default_factory=list)
    connections_closed: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""


def _handler_class(fake: FakeSystemOne) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = json.loads(raw)
            try:
                check_request(body)
                error = None
            except Exception as exc:  # recorded, asserted on by the tests
                error = repr(exc)
            fake.requests.append(Seen(dict(self.headers), raw, body, error))
            if self.path != "/v1/systemone":
                self._send(HTTPStatus.NOT_FOUND, b'{"detail":"Not Found"}')
                return
            reply = fake.handler(body)
            if reply == "hang":
                self._hang()
            elif reply == "trickle":
                self._trickle()
            elif reply == "close":
                self.close_connection = True
            else:
                assert isinstance(reply, tuple)
                self._send(HTTPStatus(reply[0]), reply[1])

        def _send(self, status: HTTPStatus, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _hang(self) -> None:
            """Never answer; note when the client hangs up."""
            self.close_connection = True
            while not fake.release.is_set():
                if self._client_gone(0.05):
                    fake.connections_closed.set()
                    return

        def _trickle(self) -> None:
            """Answer 200, then send the body a byte at a time until the client hangs up."""
            self.close_connection = True
            try:
                # A client that gave up before the headers went out makes these writes fail too.
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "60000")
                self.end_headers()
                self.wfile.write(b'{"model": "m", "answers": {')
                while not fake.release.wait(0.02):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if self._client_gone(0):
                        fake.connections_closed.set()
                        return
            except OSError:
                fake.connections_closed.set()

        def _client_gone(self, wait: float) -> bool:
            """Whether the client shut its side down (FIN) or reset within `wait` seconds."""
            # Writes alone notice only a closed socket: a client that shut the connection down
            # but still holds its descriptor keeps accepting bytes into its buffer.
            readable, _, _ = select.select([self.connection], [], [], wait)
            if not readable:
                return False
            try:
                return self.connection.recv(1) == b""
            except OSError:
                return True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


def serve() -> Iterator[FakeSystemOne]:
    """Run a fake on an ephemeral loopback port for the duration of a fixture."""
    fake = FakeSystemOne()
    server = QuietServer(("127.0.0.1", 0), _handler_class(fake))  # clients abort, by design
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.release.set()
        server.shutdown()
        server.server_close()


def free_port_refusing() -> str:
    """Return a loopback URL on which nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def catalog_of(root: Any, skills: dict[str, str]) -> Any:
    """Build a catalog of `{name: description}` under `root`, sorted by name as discovery does."""
    from siftlib.skills.catalog import Catalog, Skill

    return Catalog(
        skills=tuple(
            Skill(
                name=name,
                description=description,
                file_path=root / name / "SKILL.md",
                base_dir=root / name,
            )
            for name, description in sorted(skills.items())
        )
    )
