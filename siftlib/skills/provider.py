"""The TypeSafe System One adapter: the wire format of `POST /v1/systemone` (skills.md §6).

It knows the request envelope and the response shape, nothing about deadlines or decisions.
The body is `{"model", "state", "questions"}`: `state` is the shortlist request itself
(`{"query", "candidates"}`), so candidate metadata goes out exactly once; the `selection`
choice question lists the candidate IDs plus `none` under short, fixed descriptions, and fit
mode adds one `fit_cN` noul per candidate. Everything but `state` is the application-owned
envelope, bounded to 4096 bytes (24576 in fit mode) before and after serialization.

A call sends one request (no retries), reads at most 64 KiB of body and maps every failure
to a `Reason`. `Abort` (`siftlib.net.abort`) lets another thread stop a call at any point:
before the connection exists (the trace hook raises) or while it waits (its socket is shut
down, so the provider sees the connection close). Connections are not kept alive, so each
call owns its socket. Every client in a process verifies TLS with one shared context (httpx's
default: certifi's roots, or `SSL_CERT_FILE`/`SSL_CERT_DIR` as set when the first client
opens): loading the roots costs ~25 ms of CPU, paid once rather than at each session open.

    client = SystemOne(api_key=key, base_url="https://api.typesafe.ai")
    body = build_body(request, model="jev-latest", fit=False)
    raw = client.post(body, timeout=1.0, abort=Abort())
    answer = parse_response(raw)
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from siftlib import __version__
from siftlib.net.abort import Abort, Aborted
from siftlib.skills.decide import NO_MATCH_LABEL, SELECTION, InvalidAnswer, Reason, fit_question
from siftlib.skills.shortlist import OutboundRequest, compact_json

if TYPE_CHECKING:
    import ssl

    import httpx

DEFAULT_BASE_URL = "https://api.typesafe.ai"
BASE_URL_ENV = "TYPESAFE_BASE_URL"
PATH = "/v1/systemone"
MAX_RESPONSE_BYTES = 64 * 1024
ENVELOPE_BYTES = 4096
FIT_ENVELOPE_BYTES = 24576

INSTRUCTIONS = (
    "The state holds a user's search query and a list of candidate agent skills, each with an"
    " id, a name and a description. Choose the id of the candidate skill that best serves the"
    " query. Choose none when no candidate fits the query."
)
NO_MATCH_DESCRIPTION = "No candidate skill fits the query."
FIT_INSTRUCTIONS = (
    "Does the candidate skill with id {id} in the state, on its own, serve the query?"
)


class ProviderError(Exception):
    """The provider call failed; `reason` says how."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class JSONObject(dict[str, Any]):
    """A decoded JSON object that also keeps its raw key/value pairs, duplicates included."""

    pairs: list[tuple[str, Any]]

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, Any]]) -> JSONObject:
        """Build from `json.loads`'s `object_pairs_hook` argument."""
        obj = cls(pairs)
        obj.pairs = pairs
        return obj


@dataclass(frozen=True)
class ProviderAnswer:
    """The decoded answer: the untrusted `answers` object and validated token counts."""

    answers: JSONObject
    input_tokens: int | None
    output_tokens: int | None


def resolve_base_url(base_url: str | None) -> str:
    """Pick the base URL: the argument, else `$TYPESAFE_BASE_URL`, else the public API."""
    chosen = base_url or os.environ.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL
    return chosen.rstrip("/")


def _questions(count: int, *, fit: bool) -> dict[str, Any]:
    criteria: dict[str, str] = {f"c{i}": f"The candidate with id c{i}." for i in range(count)}
    criteria[NO_MATCH_LABEL] = NO_MATCH_DESCRIPTION
    questions: dict[str, Any] = {
        SELECTION: {"type": "choice", "instructions": INSTRUCTIONS, "criteria": criteria}
    }
    if fit:
        for i in range(count):
            questions[fit_question(i)] = {
                "type": "noul",
                "instructions": FIT_INSTRUCTIONS.format(id=f"c{i}"),
            }
    return questions


def build_body(request: OutboundRequest, *, model: str, fit: bool) -> bytes:
    """Serialize the System One body, or raise `ProviderError` when the envelope is too big."""
    limit = FIT_ENVELOPE_BYTES if fit else ENVELOPE_BYTES
    questions = _questions(len(request.candidates), fit=fit)
    # The envelope alone, with `null` standing in for the state.
    envelope = compact_json({"model": model, "state": None, "questions": questions})
    if len(envelope) - len(b"null") > limit:
        raise ProviderError(Reason.ENVELOPE_TOO_LARGE)
    body = compact_json({"model": model, "state": request.body, "questions": questions})
    if len(body) - len(request.payload) > limit:
        raise ProviderError(Reason.ENVELOPE_TOO_LARGE)
    return body


def _tokens(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def parse_response(raw: bytes) -> ProviderAnswer:
    """Decode the response body; its content stays untrusted until `decide` validates it."""
    try:
        decoded = json.loads(raw, object_pairs_hook=JSONObject.from_pairs)
    except (ValueError, RecursionError):
        raise InvalidAnswer(Reason.MALFORMED) from None  # the error would quote the body
    if not isinstance(decoded, JSONObject) or not isinstance(decoded.get("answers"), JSONObject):
        raise InvalidAnswer(Reason.MALFORMED)
    usage = decoded.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return ProviderAnswer(
        answers=decoded["answers"],
        input_tokens=_tokens(usage.get("input_tokens")),
        output_tokens=_tokens(usage.get("output_tokens")),
    )


def _status_reason(status: int) -> Reason:
    if status in (401, 403):
        return Reason.AUTH
    if status == 429:
        return Reason.RATE_LIMITED
    if status in (400, 404, 409, 413, 422):
        return Reason.REJECTED  # an unsupported model comes back as one of these
    if status >= 500:
        return Reason.SERVER_ERROR
    return Reason.HTTP_STATUS


def _read_capped(chunks: Iterable[bytes]) -> bytes:
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > MAX_RESPONSE_BYTES:
            raise ProviderError(Reason.OVERSIZE)
    return bytes(body)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Return the process's verifying TLS context for System One, made at first use."""
    import httpx

    return httpx.create_ssl_context()


class SystemOne:
    """A client for one account's System One endpoint."""

    def __init__(
        self, *, api_key: str, base_url: str, transport: httpx.BaseTransport | None = None
    ) -> None:
        import httpx

        self._httpx = httpx
        self._url = base_url + PATH
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"sift/{__version__}",
        }
        if transport is None:
            # No keep-alive: each call owns its connection, so aborting one closes only it.
            transport = httpx.HTTPTransport(
                verify=_tls_context(), limits=httpx.Limits(max_keepalive_connections=0)
            )
        self._client = httpx.Client(transport=transport, follow_redirects=False)

    def post(self, body: bytes, *, timeout: float, abort: Abort) -> bytes:
        """Send one request and return the raw 200 body, or raise `ProviderError`."""
        httpx = self._httpx
        try:
            with self._client.stream(
                "POST",
                self._url,
                content=body,
                headers=self._headers,
                timeout=httpx.Timeout(timeout),
                extensions={"trace": abort.trace},
            ) as response:
                if response.status_code != 200:
                    raise ProviderError(_status_reason(response.status_code))
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
                    raise ProviderError(Reason.OVERSIZE)
                return _read_capped(response.iter_bytes())
        except ProviderError:
            raise
        except Aborted:
            raise ProviderError(Reason.CANCELLED) from None
        except httpx.TimeoutException:
            raise ProviderError(Reason.TIMEOUT) from None
        except Exception:
            # Transport, protocol and header errors alike; their text may name the URL or key.
            if abort.aborted:
                raise ProviderError(Reason.CANCELLED) from None
            raise ProviderError(Reason.NETWORK) from None

    def close(self) -> None:
        """Close the client and its connections."""
        self._client.close()
