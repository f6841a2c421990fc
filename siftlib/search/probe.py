"""Ask a SearXNG instance one search, as the gateway will, before `sift init` enables it.

    found = probe_searxng("http://127.0.0.1:8888")   # or raises ProbeFailed: what to change

The request is the SearXNG source's own (`/search?q=…&format=json`), sent once with no proxy
from the environment and no redirect followed, as the gateway's pinned client does. The two
refusals a stock SearXNG gives sift each get the one setting that fixes them:

- 403: JSON output is off (SearXNG's default): `search.formats: [html, json]`;
- 429: the limiter throttles sift, one address asking many times: `server.limiter: false`.

Any other status, a body that is not SearXNG's JSON, a refused connection or a timeout is a
failure too, named. An answer with no hit is a success (its engines may know nothing of the
probe word) but says which engines did not answer, as SearXNG reports them.
"""

from __future__ import annotations

from typing import NamedTuple

from siftlib.errors import ProbeFailed

PROBE_QUERY = "sift"
DEADLINE = 10.0  # SearXNG waits for its slowest engine, a few seconds at most


class Probe(NamedTuple):
    """What a SearXNG said to the probe search: its hit count, and any engine failure."""

    hits: int
    note: str = ""


def probe_searxng(url: str, *, timeout: float = DEADLINE) -> Probe:
    """Search `url` once as sift would; raise `ProbeFailed` saying what to change."""
    import httpx

    from siftlib.net.tls import verify_for
    from siftlib.search.sources.base import BadResponse, Unresponsive
    from siftlib.search.sources.searxng import SearXNG

    source = SearXNG(url)
    request = source.build_request(PROBE_QUERY, k=1, key=None)
    try:
        with httpx.Client(trust_env=False, timeout=timeout, verify=verify_for(url)) as client:
            response = client.send(request)
    except httpx.TimeoutException:
        raise ProbeFailed(f"{url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ProbeFailed(f"nothing answers at {url}: {type(exc).__name__}") from None
    if response.status_code == 403:
        raise ProbeFailed(
            f"{url} refuses JSON (403): add json to its settings.yml, "
            "`search: formats: [html, json]`, and restart SearXNG"
        )
    if response.status_code == 429:
        raise ProbeFailed(
            f"{url} rate-limits sift (429): turn its limiter off in settings.yml, "
            "`server: limiter: false`, and restart SearXNG"
        )
    if response.status_code != 200:
        raise ProbeFailed(f"{url} answered {response.status_code} to a JSON search")
    try:
        answer = source.parse(response.content)
    except Unresponsive as exc:
        return Probe(0, str(exc))
    except BadResponse:
        raise ProbeFailed(
            f"{url} answered, but not with SearXNG's JSON: is it the SearXNG root URL?"
        ) from None
    unresponsive = answer.unresponsive
    return Probe(len(answer.hits), f"unresponsive: {', '.join(unresponsive)}" * bool(unresponsive))
