"""What a caller may ask for: the query text and `k`, checked in one place for every face.

    query = normalise_query("  sqlite   wal ")   # "sqlite wal"
    k = check_k(8)                               # QueryError unless an integer from 1 to 50

`sift search`, `/v1/search`, the bake-off and `search.k` in the config all hold `k` to the
same rule (`MAX_K`); `/v2/search` clamps Firecrawl's `limit` into 1–20 instead, as Firecrawl
does. A light module: the config and the command line import it without the pipeline.
"""

from __future__ import annotations

from siftlib.errors import QueryError

MAX_QUERY_CHARS = 1500
MAX_K = 50


def normalise_query(query: object) -> str:
    """Return the query as sent upstream: trimmed, whitespace runs collapsed; or raise."""
    if not isinstance(query, str):
        raise QueryError.because("the query must be a string")
    text = " ".join(query.split())
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise QueryError.because("the query is not valid Unicode text") from None
    if not text:
        raise QueryError.because("the query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError.because(f"the query is over {MAX_QUERY_CHARS} characters")
    return text


def check_k(k: object) -> int:
    """Return `k` when it is an integer from 1 to `MAX_K`, else raise `QueryError`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise QueryError.because(f"k must be an integer from 1 to {MAX_K}")
    return k
