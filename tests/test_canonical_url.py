"""Every canonical-URL rule of search.md §4, one case each."""

import pytest

from siftlib.search.canonical_url import canonical_url


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
        # raw non-ASCII is percent-encoded as UTF-8, uppercase hex
        ("https://example.com/何世杰", "https://example.com/%E4%BD%95%E4%B8%96%E6%9D%B0"),
        ("https://example.com/%e4%bd%95", "https://example.com/%E4%BD%95"),  # hex uppercased
        ("https://example.com/%7Euser/%41b", "https://example.com/~user/Ab"),  # unreserved decoded
        ("https://example.com/a%2Fb%3F", "https://example.com/a%2Fb%3F"),  # reserved stay escaped
        ("https://example.com/a%2fb", "https://example.com/a%2Fb"),  # …with uppercase hex
        ("https://example.com/a b", "https://example.com/a%20b"),  # a raw space is encoded
        ("https://example.com/100%", "https://example.com/100%25"),  # a lone % is encoded
        ("https://example.com/s?q=%c3%a9+x&t=é", "https://example.com/s?q=%C3%A9+x&t=%C3%A9"),
        ("https://Bücher.Example/", "https://xn--bcher-kva.example"),  # IDNA host
        ("https://xn--BCHER-kva.example/", "https://xn--bcher-kva.example"),  # punycode as is
        ("https://straße.de/", "https://xn--strae-oqa.de"),  # UTS 46 non-transitional, as httpx
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


def test_a_path_in_its_raw_and_percent_encoded_spellings_is_one_key() -> None:
    raw = "https://zh.example.cn/数据库/日志"
    encoded = "https://zh.example.cn/%E6%95%B0%E6%8D%AE%E5%BA%93/%E6%97%A5%E5%BF%97"
    lower = encoded.lower().replace("https://zh.example.cn", "https://ZH.example.cn")
    assert canonical_url(raw) == canonical_url(encoded) == canonical_url(lower) == encoded


def test_an_idn_host_and_its_punycode_are_one_key() -> None:
    assert canonical_url("https://例子.测试/页") == canonical_url(
        "https://xn--fsqu00a.xn--0zwm56d/页"
    )


def test_a_host_idna_rejects_is_kept_lowercased() -> None:
    assert canonical_url("https://A_B.例子.com/") == "https://a_b.例子.com"


def test_www_and_bare_host_stay_apart() -> None:
    assert canonical_url("https://www.example.com/") != canonical_url("https://example.com/")


def test_unparseable_url_is_its_own_key() -> None:
    assert canonical_url("https://example.com:99999/") == "https://example.com:99999/"
    assert canonical_url("not a url") == "not a url"
