"""Every canonical-URL rule of search.md §4, one case each."""

import pytest

from siftlib.canonical_url import canonical_url


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("HTTPS://Example.COM/Path", "https://example.com/Path"),  # scheme and host lowercased
        ("https://example.com:443/a", "https://example.com/a"),  # default https port dropped
        ("http://example.com:80/a", "http://example.com/a"),  # default http port dropped
        ("http://example.com:443/a", "http://example.com:443/a"),  # 443 is not http's default
        ("https://example.com:8443/a", "https://example.com:8443/a"),  # other ports kept
        ("https://example.com/a#section", "https://example.com/a"),  # fragment dropped
        ("https://example.com/a/", "https://example.com/a"),  # one trailing slash dropped
        ("https://example.com/a//", "https://example.com/a/"),  # only one
        ("https://example.com/", "https://example.com"),  # root slash too
        ("https://www.example.com/a", "https://www.example.com/a"),  # www. kept
        ("https://example.com/a?b=2&a=1", "https://example.com/a?b=2&a=1"),  # query as is
        ("https://example.com/a/?Q=X#f", "https://example.com/a?Q=X"),  # slash before query
        ("https://[2001:DB8::1]:443/x", "https://[2001:db8::1]/x"),  # IPv6 literal
        ("https://example.com/何世杰", "https://example.com/何世杰"),  # raw non-ASCII path
    ],
)
def test_canonical_url_rule(url: str, key: str) -> None:
    assert canonical_url(url) == key


def test_same_page_in_different_spellings_share_a_key() -> None:
    spellings = [
        "https://www.sqlite.org/wal.html",
        "HTTPS://WWW.SQLITE.ORG:443/wal.html#overview",
        "https://www.sqlite.org/wal.html/",
    ]
    assert len({canonical_url(u) for u in spellings}) == 1


def test_www_and_bare_host_stay_apart() -> None:
    assert canonical_url("https://www.example.com/") != canonical_url("https://example.com/")


def test_unparseable_url_is_its_own_key() -> None:
    assert canonical_url("https://example.com:99999/") == "https://example.com:99999/"
    assert canonical_url("not a url") == "not a url"
