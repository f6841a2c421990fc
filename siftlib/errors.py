"""Exceptions raised by siftlib, under one root.

    SiftError
     ├── ConfigError       a config, client or secret file is invalid
     ├── QueryError        the caller's query or parameters are invalid (`code`)
     │    ├── InvalidURL      a URL to fetch is not an absolute http(s) URL
     │    └── InvalidRequest  a field of a fetch request has the wrong type or value
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

Some exceptions never leave the module that raises them, so they stand outside this tree:
`dial.UpstreamRefused` and `dial.RedirectRefused` (httpx types, so the client's own handling
applies), `skills.provider.ProviderError` (becomes the keyword fallback with a reason),
`skills.catalog.FrontmatterError` (becomes a diagnostic), and `mcp.protocol.ProtocolError`
and `ArgumentError` (become JSON-RPC errors).
"""


class SiftError(Exception):
    """Something sift cannot do, with a sentence fit for the user."""


class ConfigError(SiftError):
    """A configuration file or value is invalid."""


class QueryError(SiftError):
    """The query or its parameters are invalid; `code` is the label an error answer carries."""

    code = "invalid query"


class InvalidURL(QueryError):
    """A URL to fetch is not one sift can read: empty, relative, not http(s), a bad port."""

    code = "invalid url"


class InvalidRequest(QueryError):
    """A field of a fetch request has the wrong type or value."""

    code = "invalid request"


class NoResultsError(SiftError):
    """No source produced results."""

    def __init__(self, message: str, warnings: list[str] | None = None) -> None:
        super().__init__(message)
        self.warnings = list(warnings or [])


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

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


class UnsupportedContent(Blocked):
    """The page's content type is not one fetch reads (refused after its head)."""

    def __init__(self, media_type: str) -> None:
        super().__init__("content-type", f"unsupported content type: {media_type}")
        self.media_type = media_type


class UnreadableContent(Blocked):
    """A page of a type fetch reads cannot be read: a PDF that is a scan, encrypted, broken."""

    def __init__(self, reason: str) -> None:
        super().__init__("content", f"unsupported content: {reason}")
        self.reason = reason

    def __reduce__(self) -> tuple[type[Blocked], tuple[str]]:
        return UnreadableContent, (self.reason,)


class BlockedBySite(Blocked):
    """The site answered with a challenge or block page, not the page (`status`: its status)."""

    def __init__(self, what: str, status: int) -> None:
        super().__init__("site", f"blocked by the site: {what} (HTTP {status})")
        self.status = status


class FetchFailed(SiftError):
    """A fetch failed on the way (`kind`: dns, connect, tls, deadline, reset, cut, …)."""

    def __init__(self, kind: str, message: str | None = None) -> None:
        super().__init__(message or f"fetch failed: {kind}")
        self.kind = kind


class Cancelled(SiftError):
    """The caller cancelled the work: nothing more is sent, spent or cached for it."""
