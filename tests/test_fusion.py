"""Fusion orders computed by hand (search.md §4 step 5)."""

from siftlib.fusion import concatenate, fuse
from siftlib.hits import Hit

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
