"""Exceptions raised by siftlib, under one root.

    SiftError
     ├── ConfigError       a config, client or secret file is invalid
     ├── QueryError        the caller's query or parameters are invalid (`code`)
     │    ├── InvalidURL      a URL to fetch is not an absolute http(s) URL
     │    ├── InvalidRequest  a field of a fetch request has the wrong type or value
     │    └── UnsupportedOption  a scrape asks for a Firecrawl feature sift does not offer
     ├── NoResultsError    no source could answer (nothing enabled, or every one failed)
     ├── AuthError         the sift server refused our token (client mode)
     ├── UnreachableError  the sift server could not be reached (client mode)
     ├── StoreError        a cache read or write failed (the search goes on uncached)
     ├── BakeoffError      a bake-off input or run directory is unusable
     ├── ProbeFailed       a source `sift init` was asked to enable did not answer as sift needs
     ├── ToolError         a skill search's query or limit is invalid
     ├── Blocked           the fetch guard refused a URL, a hop or an address (`rule`)
     │    ├── UnsupportedContent  the page's content type is not one fetch reads
     │    ├── UnreadableContent   a page of a type fetch reads cannot be read (a scanned PDF)
     │    └── BlockedBySite       the site answered with a challenge or block page (`status`)
     ├── FetchFailed       a fetch went out but failed (`kind`: dns, connect, tls, deadline, …)
     └── Cancelled         the caller gave up (an MCP cancellation, a client that hung up)

A failing *source* is never an exception outside the pipeline: it becomes a warning.

An error a sift server answers with carries its `code`, the label of the answer's body
(`invalid query`, `blocked`, `fetch failed`, …): the gateway picks the status by it and the
client reads it back from the body, so nothing parses a sentence to recover one. Where the
search routes answer a label and a reason apart (`QueryError`, `NoResultsError`), the error
keeps its `reason` apart too.

Some exceptions never leave the module that raises them, so they stand outside this tree:
`dial.UpstreamRefused` and `dial.RedirectRefused` (httpx types, so the client's own handling
applies), `skills.provider.ProviderError` (becomes the keyword fallback with a reason),
`skills.catalog.FrontmatterError` (becomes a diagnostic), and `mcp.protocol.ProtocolError`
and `ArgumentError` (become JSON-RPC errors).
"""

from typing import Self


class SiftError(Exception):
    """Something sift cannot do, with a sentence fit for the user."""


class ConfigError(SiftError):
    """A configuration file or value is invalid."""


class QueryError(SiftError):
    """The query or its parameters are invalid; `code` is the label an error answer carries."""

    code = "invalid query"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason  # the sentence past its label

    @classmethod
    def because(cls, reason: str) -> Self:
        """Return the error `<code>: <reason>`, its reason kept apart for an answer's details."""
        return cls(f"{cls.code}: {reason}", reason=reason)


class InvalidURL(QueryError):
    """A URL to fetch is not one sift can read: empty, relative, not http(s), a bad port."""

    code = "invalid url"


class InvalidRequest(QueryError):
    """A field of a fetch request has the wrong type or value."""

    code = "invalid request"


class UnsupportedOption(QueryError):
    """The request asks for a Firecrawl feature sift does not offer."""

    code = "unsupported option"


class NoResultsError(SiftError):
    """No source produced results; `warnings` say why each failed."""

    code = "no search results"

    def __init__(
        self, message: str, warnings: list[str] | None = None, *, reason: str | None = None
    ) -> None:
        super().__init__(message)
        self.warnings = list(warnings or [])
        self.reason = message if reason is None else reason  # the sentence past its label

    @classmethod
    def because(cls, reason: str, warnings: list[str] | None = None) -> Self:
        """Return the error `no search results: <reason>`, its reason kept apart."""
        return cls(f"{cls.code}: {reason}", warnings, reason=reason)


class AuthError(SiftError):
    """The sift server refused the credentials."""


class UnreachableError(SiftError):
    """The sift server could not be reached."""


class StoreError(SiftError):
    """A store read or write failed."""


class BakeoffError(SiftError):
    """A bake-off input or run directory is unusable, or a step was asked for too early."""


class ProbeFailed(SiftError):
    """A source `sift init` checked did not answer as sift needs; the sentence says why."""


class ToolError(SiftError):
    """The caller's skill-search query or limit is invalid."""


class Blocked(SiftError):
    """The fetch guard refused a URL before sending it a byte; `rule` names the check."""

    code = "blocked"

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


class UnsupportedContent(Blocked):
    """The page's content type is not one fetch reads (refused after its head).

    `media_type` is "" when a sift server reported it: its sentence names the type.
    """

    code = "unsupported content type"

    def __init__(self, media_type: str, message: str | None = None) -> None:
        super().__init__("content-type", message or f"{self.code}: {media_type}")
        self.media_type = media_type


class UnreadableContent(Blocked):
    """A page of a type fetch reads cannot be read: a PDF that is a scan, encrypted, broken.

    `reason` is "" when a sift server reported it: its sentence says why.
    """

    code = "unsupported content"

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__("content", message or f"{self.code}: {reason}")
        self.reason = reason

    def __reduce__(self) -> tuple[type[Blocked], tuple[str, str]]:
        return UnreadableContent, (self.reason, str(self))


class BlockedBySite(Blocked):
    """The site answered with a challenge or block page, not the page (`status`: its status).

    `what` names the kind of page; a sift server's report gives only its sentence.
    """

    code = "blocked by the site"

    def __init__(self, what: str, status: int, message: str | None = None) -> None:
        super().__init__("site", message or f"{self.code}: {what} (HTTP {status})")
        self.status = status


class FetchFailed(SiftError):
    """A fetch failed on the way (`kind`: dns, connect, tls, deadline, reset, cut, …).

    Its `code` is `deadline` for a fetch past its deadline, else `fetch failed`; `kind` is
    `remote` when a sift server reported another failure (its sentence names the kind).
    """

    def __init__(self, kind: str, message: str | None = None) -> None:
        super().__init__(message or f"fetch failed: {kind}")
        self.kind = kind

    @property
    def code(self) -> str:
        """The label an error answer carries."""
        return "deadline" if self.kind == "deadline" else "fetch failed"


class Cancelled(SiftError):
    """The caller cancelled the work: nothing more is sent, spent or cached for it."""
