"""Fusion orders computed by hand (search.md §4 step 5)."""

from siftlib.hits import Hit
from siftlib.search.fusion import concatenate, fuse

ORDER = ("searxng", "brave_llm", "tavily")


def hit(url: str, source: str, snippet: str = "s", score: float = 0.0, title: str = "") -> Hit:
    return Hit(url, title or url, snippet, score, source)


def test_rrf_over_three_overlapping_sources() -> None:
    by_source = {
        "searxng": [hit("https://a.com", "searxng"), hit("https://b.com", "searxng")],
        "brave_llm": [hit("https://b.com/", "brave_llm"), hit("https://c.com", "brave_llm")],
        "tavily": [
            hit("https://c.com", "tavily"),
            hit("https://b.com#x", "tavily"),
            hit("https://a.com", "tavily"),
        ],
    }
    fused = fuse(by_source, order=ORDER)
    # b: 1/62 + 1/61 + 1/62; c: 1/62 + 1/61; a: 1/61 + 1/63 (less than c).
    assert [h.url for h in fused] == ["https://b.com", "https://c.com", "https://a.com"]
    assert fused[0].score == 1 / 62 + 1 / 61 + 1 / 62
    assert fused[1].score == 1 / 62 + 1 / 61
    assert fused[2].score == 1 / 61 + 1 / 63
    assert [h.source for h in fused] == ["searxng", "brave_llm", "searxng"]


def test_tie_breaks_by_best_rank_then_source_order_then_first_seen() -> None:
    by_source = {
        # x, y, w: 1/61 each, best rank 1: source order decides. z: 1/62.
        "searxng": [hit("https://x.com", "searxng"), hit("https://z.com", "searxng")],
        "brave_llm": [hit("https://y.com", "brave_llm")],
        "tavily": [hit("https://w.com", "tavily")],
    }
    fused = fuse(by_source, order=ORDER)
    assert [h.url for h in fused] == [
        "https://x.com",
        "https://y.com",
        "https://w.com",
        "https://z.com",
    ]


def test_exact_tie_falls_to_attribution_source_then_first_seen() -> None:
    # p and q both score 1/61 + 1/62 with best rank 1.
    by_source = {
        "searxng": [hit("https://p.com", "searxng"), hit("https://q.com", "searxng")],
        "tavily": [hit("https://q.com", "tavily"), hit("https://p.com", "tavily")],
    }
    fused = fuse(by_source, order=ORDER)
    assert [h.url for h in fused] == ["https://p.com", "https://q.com"]
    assert [h.source for h in fused] == ["searxng", "searxng"]


def test_a_tie_in_exact_arithmetic_is_a_tie_whatever_the_rounding() -> None:
    # x ranks 1, 7, 2 and y ranks 2, 1, 7: the same three terms, which a left-to-right float
    # sum rounds differently. The tie falls to best rank (both 1), source (both searxng),
    # then first seen: x.
    filler = [hit(f"https://f{i}.com", "s") for i in range(5)]
    x, y = hit("https://x.com", "s"), hit("https://y.com", "s")
    by_source = {
        "searxng": [x, y],
        "brave_llm": [y, *filler, x],
        "tavily": [hit("https://t.com", "t"), x, *filler[:4], y],
    }
    fused = fuse(by_source, order=ORDER)
    assert 1 / 61 + 1 / 67 + 1 / 62 != 1 / 62 + 1 / 61 + 1 / 67  # the rounding this guards
    first_two = [h for h in fused if h.url in ("https://x.com", "https://y.com")]
    assert [h.url for h in first_two] == ["https://x.com", "https://y.com"]
    assert first_two[0].score == first_two[1].score


def test_first_source_keeps_url_and_title_and_longer_snippet_wins() -> None:
    by_source = {
        "searxng": [hit("https://A.com/page/", "searxng", snippet="short", title="SearXNG title")],
        "tavily": [hit("https://a.com/page", "tavily", snippet="a much longer snippet", title="T")],
    }
    [only] = fuse(by_source, order=ORDER)
    assert only.url == "https://A.com/page/"
    assert only.title == "SearXNG title"
    assert only.snippet == "a much longer snippet"
    assert only.source == "searxng"


def test_a_repeated_url_within_one_source_counts_once_and_ranks_close_up() -> None:
    by_source = {
        "searxng": [
            hit("https://a.com", "searxng"),
            hit("https://a.com/", "searxng"),
            hit("https://b.com", "searxng"),
        ]
    }
    fused = fuse(by_source, order=ORDER)
    assert [h.url for h in fused] == ["https://a.com", "https://b.com"]
    assert fused[1].score == 1 / 62


def test_tavily_prefix_keeps_its_order_and_attribution() -> None:
    by_source = {
        "searxng": [hit("https://a.com", "searxng"), hit("https://b.com", "searxng")],
        "brave_llm": [hit("https://d.com", "brave_llm"), hit("https://a.com", "brave_llm")],
        "tavily": [hit("https://c.com", "tavily"), hit("https://b.com", "tavily", title="tav b")],
    }
    fused = fuse(by_source, order=ORDER, prefix="tavily")
    # prefix: c, b (Tavily's order, attributed to Tavily); then a (1/61+1/62) before d (1/61).
    assert [h.url for h in fused] == [
        "https://c.com",
        "https://b.com",
        "https://a.com",
        "https://d.com",
    ]
    assert [h.source for h in fused] == ["tavily", "tavily", "searxng", "brave_llm"]
    assert fused[1].title == "tav b"
    assert fused[1].score == 1 / 62 + 1 / 62


def test_prefix_without_tavily_hits_is_plain_fusion() -> None:
    by_source = {"searxng": [hit("https://a.com", "searxng")], "tavily": []}
    assert [h.url for h in fuse(by_source, order=ORDER, prefix="tavily")] == ["https://a.com"]


def test_concatenation_keeps_source_order_and_own_scores() -> None:
    by_source = {
        "searxng": [
            hit("https://a.com", "searxng", score=3.0),
            hit("https://b.com", "searxng", score=1.0),
        ],
        "brave_llm": [hit("https://b.com/", "brave_llm"), hit("https://c.com", "brave_llm")],
        "tavily": [hit("https://d.com", "tavily", score=0.7)],
    }
    joined = concatenate(by_source, order=ORDER)
    assert [(h.url, h.score, h.source) for h in joined] == [
        ("https://a.com", 3.0, "searxng"),
        ("https://b.com", 1.0, "searxng"),
        ("https://c.com", 0.0, "brave_llm"),
        ("https://d.com", 0.7, "tavily"),
    ]


def test_fusion_is_deterministic() -> None:
    by_source = {
        "searxng": [hit(f"https://s{i}.com", "searxng") for i in range(10)],
        "tavily": [hit(f"https://s{9 - i}.com", "tavily") for i in range(10)],
    }
    first = fuse(by_source, order=ORDER)
    assert all(fuse(by_source, order=ORDER) == first for _ in range(5))


def test_within_one_source_the_longer_snippet_wins_as_between_sources() -> None:
    short = "twenty characters ok"
    long = "a snippet of seventy-nine characters, which is what a person would rather read."
    by_source = {
        "searxng": [
            hit("https://example.com/shared/", "searxng", snippet=short, title="first"),
            hit("https://example.com/other", "searxng"),
            hit("https://example.com/shared", "searxng", snippet=long, title="third"),
        ]
    }
    for merged in (fuse(by_source, order=ORDER), concatenate(by_source, order=ORDER)):
        assert [h.url for h in merged] == [
            "https://example.com/shared/",
            "https://example.com/other",
        ]
        assert merged[0].title == "first"
        assert merged[0].snippet == long
        assert len(short) == 20 and len(long) == 79


def test_the_percent_encoded_and_raw_spellings_of_a_path_fuse() -> None:
    by_source = {
        "searxng": [hit("https://zh.example.cn/数据库/日志", "searxng")],
        "tavily": [
            hit("https://zh.example.cn/%E6%95%B0%E6%8D%AE%E5%BA%93/%E6%97%A5%E5%BF%97", "tavily")
        ],
    }
    [only] = fuse(by_source, order=ORDER)
    assert only.url == "https://zh.example.cn/数据库/日志"
    assert only.score == 2 / 61


def engined(url: str, source: str, engines: int, published: str | None = None) -> Hit:
    return Hit(url, url, "s", 0.0, source, published=published, engines=engines)


def test_engines_add_up_across_sources_and_a_lone_source_counts_one() -> None:
    by_source = {
        "searxng": [engined("https://a.com", "searxng", 2), engined("https://b.com", "searxng", 1)],
        "brave_llm": [
            engined("https://a.com/", "brave_llm", 0),
            engined("https://c.com", "brave_llm", 0),
        ],
        "tavily": [engined("https://a.com", "tavily", 0), engined("https://c.com", "tavily", 0)],
    }
    counts = {h.url: h.engines for h in fuse(by_source, order=ORDER)}
    assert counts == {"https://a.com": 4, "https://b.com": 1, "https://c.com": 2}
    lone = fuse({"tavily": [engined("https://d.com", "tavily", 0)]}, order=ORDER)
    assert lone[0].engines == 1 and lone[0].to_dict()["engines"] == 1
    [brave] = concatenate({"brave_llm": [engined("https://e.com", "brave_llm", 0)]}, order=ORDER)
    assert brave.to_dict()["engines"] == 1


def test_a_repeat_within_a_source_keeps_the_larger_engine_count_and_a_known_date() -> None:
    by_source = {
        "searxng": [
            engined("https://a.com/x", "searxng", 1),
            engined("https://a.com/x/", "searxng", 3, published="2026-03-02T00:00:00"),
        ],
        "tavily": [engined("https://a.com/x", "tavily", 0, published="2020-01-01")],
    }
    [only] = concatenate(by_source, order=ORDER)
    assert only.engines == 4
    assert only.published == "2026-03-02T00:00:00"
    assert only.to_dict()["published"] == "2026-03-02T00:00:00"
