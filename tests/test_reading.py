"""Page reading per page type: what an agent needs from a thread, a listing, a service page,
a product, a docs page and a short page, on realistic pages in testdata/fetch/ (issue 39)."""

from __future__ import annotations

import re

import pytest
from bodykit import TESTDATA_FETCH

from siftlib.fetch.convert import Document, convert, decode
from siftlib.fetch.convert.decode import parse
from siftlib.fetch.pagetype import page_type, structured_data
from siftlib.fetch.threads import thread


def read(name: str, url: str, *, main: bool = True) -> Document:
    body = (TESTDATA_FETCH / name).read_bytes()
    return convert(
        body, content_type="text/html", media_type="text/html", url=url, main_content=main
    )


def assert_in_order(text: str, *parts: str) -> None:
    """Assert that each part is in the text, in the order given."""
    places = [text.index(part) for part in parts]
    assert places == sorted(places), parts


def html(page: str, url: str = "https://example.org/notes/page") -> Document:
    return convert(page.encode(), content_type="text/html", media_type="text/html", url=url)


def test_a_thread_keeps_every_post_in_order_with_its_author_and_date() -> None:
    document = read("thread-phpbb.html", "https://board.example.org/viewtopic.php?t=4821")
    assert document.page_type == "forum"
    content = document.content
    openings = (
        "I back up my photo library",
        "Almost always an idle timeout",
        "The keepalive did it",
        "Worth adding `ServerAliveCountMax 10`",
    )
    assert_in_order(content, *openings)
    for author, date in (
        ("quietfan", "Mon Mar 02, 2026 7:04 pm"),
        ("packetpusher", "Mon Mar 02, 2026 8:11 pm"),
        ("quietfan", "Tue Mar 03, 2026 7:45 am"),
        ("lintroller", "Tue Mar 03, 2026 9:20 am"),
    ):
        assert re.search(rf"{author}\S*\*\* » {date}", content), (author, date)
    # The answer's three fixes stay a list, with their inline code.
    assert "1. Send keepalives from the client: `ServerAliveInterval 60`" in content
    assert "3. Run the transfer inside `tmux`" in content
    assert "Who is online" not in content and "Register" not in content


def test_a_simple_machines_thread_names_the_author_and_date_of_every_post() -> None:
    document = read("thread-smf.html", "https://forum.example.org/index.php?topic=5123.0")
    assert document.page_type == "forum"
    content = document.content
    assert_in_order(
        content,
        "**Biology Forums** · June 04, 2024, 11:23:55 AM\n\nI'm curious how members here",
        "**Arantor** · June 09, 2024, 03:29:46 AM\n\nMost boards that tried it used it",
        "**Biology Forums** · June 09, 2024, 09:12:05 AM\n\nThat matches what we saw",
        "**Kindred** · June 10, 2024, 06:40:31 PM\n\nSummaries of very long topics",
    )
    assert "Powered by coffee" not in content  # signatures are not posts


def test_a_thread_the_extractor_kept_whole_gets_each_posts_author_and_date() -> None:
    document = read("forum-thread.html", "https://discuss.example.org/t/wal-growing/4182")
    assert document.page_type == "forum"
    content = document.content
    assert_in_order(
        content,
        "**nodewatcher** · 2026-02-02T10:00:00Z\n\nMy home automation database uses WAL",
        "**pagecache** · 2026-02-02T11:30:00Z\n\nA WAL file only shrinks",
        "**nodewatcher** · 2026-02-03T08:15:00Z\n\nThat was it.",
    )
    assert content.count("**nodewatcher**") == 2  # one line per post, none in the wrong place


def test_comments_under_the_answers_of_a_question_are_not_posts() -> None:
    body = (TESTDATA_FETCH / "thread-stackexchange.html").read_bytes()
    tree = parse(decode(body, "text/html", html_page=True))
    posts = thread(tree)
    assert posts is not None
    text = " ".join(posts.text_content().split())
    assert_in_order(
        text,
        "Why does rsync re-copy files",
        "rsync compares size and modification time",
        "FAT32 and exFAT store modification times",
    )
    assert "Same here on a Synology" not in text and "This fixed it for me" not in text
    # A platform whose every post is a comment (GitHub's issues) keeps them all.
    issue = parse(
        "<html><body><h1>Crash on start</h1>"
        + "".join(
            f"<div class='timeline-comment'><div class='comment-body js-comment-body'><p>{t}</p>"
            "</div></div>"
            for t in ("It crashes at start.", "Same on 2.1.", "Fixed by #4512.")
        )
        + "</body></html>"
    )
    assert [p.text_content() for p in thread(issue).iterchildren("div")] == [
        "It crashes at start.",
        "Same on 2.1.",
        "Fixed by #4512.",
    ]


def test_a_listing_keeps_every_item_with_its_link_and_text() -> None:
    document = read("listing-events.html", "https://library.example.org/events")
    assert document.page_type == "listing"
    items = {
        "Repair Café": "/events/repair-cafe",
        "Spring seed swap": "/events/seed-swap",
        "Code club for teens": "/events/code-club",
        "Author talk: Mara Lind": "/events/author-talk-mara-lind",
        "Family history drop-in": "/events/family-history",
        "Knit and natter": "/events/knit-and-natter",
    }
    for title, path in items.items():
        assert f"[{title}](https://library.example.org{path})" in document.content
    assert "volunteers fix it with you" in document.content
    assert "needles and wool to borrow" in document.content
    assert "Opening hours" not in document.content and "Catalogue" not in document.content


def test_a_news_river_keeps_each_teasers_summary_and_drops_the_cookie_banner() -> None:
    document = read("listing-river.html", "https://gadgetwire.example/news/")
    assert document.page_type == "listing"
    content = document.content
    # Each summary is a second link to its story, hidden from screen readers, not from view.
    assert_in_order(
        content,
        "## [Review: open-back studio monitors",
        "The new open-back monitors trade a little bass",
        "## [Earbuds now run a hearing test",
        "plays a short series of tones in each ear",
        "## [The last headphone-jack adapter",
        "find the small adapter second-hand",
        "## [Solar-charged earbuds",
        "the case never reached empty",
    )
    # The consent manager's dialog, and a dialog nothing marks but its talk of cookies.
    assert "Your Privacy" not in content and "Cookies" not in content
    assert "We use cookies" not in content and "Manage Cookie" not in content
    assert "Most read" not in content
    whole = read("listing-river.html", "https://gadgetwire.example/news/", main=False).content
    assert "The new open-back monitors trade a little bass" in whole


def test_a_dialog_about_cookies_is_not_the_products_content() -> None:
    url = "https://stagehaus.example/c/product/1825729-REG/portman_p1_retro_lrc4.html"
    document = read("product-notice.html", url)
    assert document.page_type == "product"
    assert_in_order(
        document.content,
        "# Portman P1 Retro roadcase, 4 units",
        "SKU # POP1RC4",
        "$429.00",
        "Expected availability: 2-4 weeks",
    )
    assert "cookies" not in document.content.lower()


@pytest.mark.parametrize("main", [True, False])
def test_headings_and_lists_inside_a_custom_element_stay_blocks(main: bool) -> None:
    content = read("service-tabs.html", "https://fernhost.example/", main=main).content
    assert "### Builds that finish before your coffee\n\n- Every push builds" in content
    assert "- Dependencies cached between builds\n- Preview links" in content
    if main:  # the hidden tabs are read in main-content mode only
        assert "\n- Transform images on demand without impacting build times\n" in content
        assert "### Storage for files and data" in content
    # A card's link keeps its heading and text apart: "Edge functions Run", not "functionsRun".
    assert "[Edge functions Run code close to your users, in forty regions.](" in content
    assert "functionsRun" not in content


def test_a_service_page_keeps_every_section_not_the_hero_alone() -> None:
    document = read("service-page.html", "https://ledgerline.example.co.uk/")
    assert document.page_type == "service"
    content = document.content
    for heading in ("# Bookkeeping that is done", "## What we do", "## Pricing", "## Questions"):
        assert heading in content
    for part in ("### Payroll", "£190 a month", "Priya Shah", "Xero or QuickBooks"):
        assert part in content
    assert "14 Mill Street" not in content


def test_a_product_keeps_its_name_price_description_and_specs_from_a_hidden_tab() -> None:
    document = read("product-page.html", "https://shop.example.com/p/trailhead-28")
    assert document.page_type == "product"
    content = document.content
    assert content.startswith("# Trailhead 28 L hiking backpack")
    assert "€89.00" in content and "ventilated back panel" in content
    # A key-value table: its first row is data, under an empty head.
    assert "| | |\n|---|---|\n| Volume | 28 litres |" in content
    assert "| Warranty | Five years |" in content
    assert "You may also like" not in content


def test_a_product_answer_without_the_products_name_gets_it_as_its_heading() -> None:
    url = "https://brightworks.example/lamps/desk/lumen-40"
    content = read("product-offer.html", url).content
    # The description and specs were kept without the buy box, where the name is.
    assert_in_order(
        content,
        "# Lumen 40 LED desk lamp\n\n## Light that follows your work",
        "- Light output: 900 lumens at full brightness",
    )
    assert content.count("Lumen 40 LED desk lamp") == 1
    assert "You may also like" not in content


def test_a_page_with_review_stars_but_nothing_for_sale_gets_no_name_line() -> None:
    body = (TESTDATA_FETCH / "product-offer.html").read_text(encoding="utf-8")
    body = body.replace(
        '"offers": {"@type": "Offer", ', '"aggregateRating": {"@type": "AggregateRating", '
    )
    body = body.replace('<meta property="og:type" content="product">', "")
    content = html(body, "https://brightworks.example/lamps/desk/lumen-40").content
    assert "Light that follows your work" in content
    assert "Lumen 40 LED desk lamp" not in content


PRODUCT_SHEET = "https://www.tidewear.example/products/harbour-crew-t-shirt-navy"


def test_a_product_answer_holding_its_own_described_text_is_kept() -> None:
    # The extractor kept under half of the page (a store-stock list sits outside <main>), but
    # it holds the description the product gives of itself in JSON-LD: it found the product.
    document = read("product-sheet.html", PRODUCT_SHEET)
    assert document.page_type == "product"
    content = document.content
    assert "# Harbour Crew T-Shirt" in content and "£32.00" in content
    assert "is cut from heavyweight organic cotton that keeps its shape" in content
    assert "- 220 gsm organic cotton jersey" in content
    assert "ready to collect" not in content
    assert document.warnings == []


def test_the_fuller_pass_keeps_a_dialog_made_of_what_the_extractor_kept() -> None:
    # Without structured data the same page falls back to the fuller pass; the description
    # sits in a `modal` dialog, which that pass drops as boilerplate unless the extractor
    # kept its text.
    body = (TESTDATA_FETCH / "product-sheet.html").read_bytes()
    body = re.sub(rb'<script type="application/ld\+json">.*?</script>', b"", body, flags=re.S)
    document = convert(body, content_type="text/html", media_type="text/html", url=PRODUCT_SHEET)
    assert document.warnings and "the extractor kept" in document.warnings[0]
    content = document.content
    assert "Falmouth, 2 High Street: 1 in stock" in content  # the fuller pass
    assert "is cut from heavyweight organic cotton that keeps its shape" in content
    assert "- Machine wash at 30 °C" in content
    assert "Tidewear Ltd" not in content and "[Sale]" not in content


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://northwind.example/", "service"),
        # Nothing marks this one: it is called an article, but not read as one.
        ("https://northwind.example/what-we-do/data-and-ai/consulting", "article"),
    ],
)
def test_a_service_page_keeps_the_blocks_the_extractor_skipped_between_its_own(
    url: str, kind: str
) -> None:
    # The extractor keeps the prose but skips the service cards of a slider between them
    # (and the section headings): the fuller pass from its first to its last kept block has them.
    document = read("service-cards.html", url)
    assert document.page_type == kind
    content = document.content
    assert_in_order(
        content,
        "Northwind Analytics helps mid-sized firms",
        "## What we do",
        "Data architecture\n\nWe map the systems you run today",
        "Training your team\n\nHands-on sessions for your analysts",
        "## How an engagement runs",
        "Most engagements take three to six months.",
    )
    assert "12 Wharf Street" not in content and "[Careers]" not in content


def test_a_docs_table_with_code_cells_stays_a_markdown_table() -> None:
    document = read("docs-reference.html", "https://docs.pondlib.example/settings.html")
    assert document.page_type == "documentation"
    content = document.content
    assert "| Setting | Default | Meaning |\n|---|---|---|\n" in content
    assert "| `max_connections` | `100` | Connections open at once, idle or busy |" in content
    assert "see [pools](https://docs.pondlib.example/pools.html) |" in content
    assert "| Seconds an idle connection is kept<br>before it is closed |" in content
    assert "```python\nfrom pondlib import Client, Limits\n" in content
    assert "max_connections` above the server's own limit" in content  # the admonition
    assert "Quick search" not in content and "Table of contents" not in content


@pytest.mark.parametrize("main", [True, False], ids=["main content", "whole page"])
def test_code_blocks_keep_their_code_without_the_line_number_gutter(main: bool) -> None:
    document = read("docs-line-numbers.html", "https://docs.pondlib.example/retry.html", main=main)
    content = document.content
    # Pygments' marked gutter: the code is one fenced block, with its language.
    assert (
        "```python\nfrom pondlib import Client, Retry\n\nretry = Retry(attempts=3, backoff=0.5)\n"
    ) in content
    # An unmarked column of numbers counting up beside a cell of code.
    assert '```\n$ pond post https://api.example.org/orders \\\n    --header "Idem' in content
    for gutter in ("1\n2\n3", "1 2 3", "| 1"):
        assert gutter not in content
    assert "Without such a key, a retried `POST` may create the order twice." in content


def test_a_short_page_keeps_its_heading_list_and_links_in_main_content_mode() -> None:
    document = html(
        "<html><body><h1>Nested</h1><ul><li>outer one<ul><li>inner one</li></ul></li>"
        "<li>outer two</li></ul><p>See <a href='/up'>up</a> and <a href='/here'>here</a>.</p>"
        "</body></html>"
    )
    assert document.content == (
        "# Nested\n\n- outer one\n  - inner one\n- outer two\n\n"
        "See [up](https://example.org/up) and [here](https://example.org/here).\n"
    )


def test_a_bare_heading_on_a_short_page_is_kept() -> None:
    document = html("<html><body><h1>Release notes</h1><p>Nothing changed.</p></body></html>")
    assert document.content.startswith("# Release notes\n")


def test_an_extraction_that_keeps_a_small_share_falls_back_and_warns() -> None:
    cards = "".join(
        f"<li class='tile'><a href='/courses/{n}'>Course {n}: evening class in room {n}</a></li>"
        for n in range(1, 31)
    )
    page = (
        "<html><body><nav><a href='/'>Home</a></nav><article><h1>Courses</h1>"
        "<p>All our evening courses for the spring term, from pottery to Portuguese, are "
        "listed below; booking opens on the first of the month at nine.</p></article>"
        f"<ul class='catalogue'>{cards}</ul><footer>(c) School</footer></body></html>"
    )
    document = html(page, "https://school.example.org/courses/")
    assert document.page_type == "listing"
    for n in (1, 15, 30):
        assert f"[Course {n}: evening class in room {n}]" in document.content
    assert "Home" not in document.content and "(c) School" not in document.content
    # Not silent: under 0.4 of the page's text kept, the answer says it took the fuller pass.
    assert document.warnings == [
        "main content: the extractor kept 122 of the page's 974 characters; "
        "this is the page without its navigation, header and footer"
    ]


def test_a_page_with_no_text_says_so() -> None:
    document = html("<html><body><div id='app'></div><script>render()</script></body></html>")
    assert document.content.strip() == ""
    assert document.warnings == ["main content: the page has no text (a page built by script?)"]


def test_the_full_page_pass_drops_hidden_parts_whatever_their_size() -> None:
    hidden = "<div hidden class='tab-panel'>" + "secret words " * 40 + "</div>"
    body = f"<html><body><p>Visible text.</p>{hidden}</body></html>".encode()
    full = convert(
        body,
        content_type="text/html",
        media_type="text/html",
        url="https://example.org/",
        main_content=False,
    )
    assert "secret" not in full.content


@pytest.mark.parametrize(
    ("url", "head", "expected"),
    [
        ("https://forum.example.org/t/wal-growing/4182", "", "forum"),
        ("https://board.example.org/thread-222085.html", "", "forum"),  # MyBB
        ("https://example.org/community/index.php?topic=589061.0", "", "forum"),  # SMF
        ("https://example.org/index.php?showtopic=4411", "", "forum"),  # Invision
        ("https://www.camera-forum.example/topic/423897-best-camera/", "", "forum"),
        ("https://example.org/discussions/topic/first-dovetails/", "", "forum"),  # bbPress
        ("https://community.example.com/t5/laptops/fan-noise/td-p/8812", "", "forum"),  # Khoros
        ("https://news.example.edu/topic/software", "", "service"),  # a tag page, not a topic
        ("https://www.example.com/community/tutorials/n8n-guide", "", "documentation"),
        ("https://example.org/x", '<meta name="generator" content="Discourse 3.2">', "forum"),
        ("https://docs.example.org/en/latest/intro.html", "", "documentation"),
        (
            "https://shop.example.org/x",
            '<script type="application/ld+json">{"@type": "Product", "name": "Mug"}</script>',
            "product",
        ),
        ("https://shop.example.org/collections/mugs", "", "collection"),
        ("https://shop.example.org/collections/mugs/products/trail-mug", "", "product"),
        ("https://www.example.com/us/store/products/trail-mug-white", "", "product"),
        ("https://www.example.com/shop/buy-mugs/trail-mug", "", "collection"),
        ("https://news.example.org/2026/03/04/tram-line", "", "article"),
        (
            "https://news.example.org/tram-line",
            '<meta property="article:published_time" content="2026-03-04T08:00:00Z">',
            "article",
        ),
        ("https://example.org/", "", "service"),
    ],
)
def test_the_page_type_comes_from_cheap_signals(url: str, head: str, expected: str) -> None:
    from siftlib.fetch.convert.decode import parse as _parse

    tree = _parse(f"<html><head>{head}</head><body><p>Some text.</p></body></html>")
    assert page_type(tree, url, structured_data(tree)) == expected


def test_json_ld_graphs_and_lists_are_read_and_broken_json_ld_is_ignored() -> None:
    from siftlib.fetch.convert.decode import parse as _parse

    tree = _parse(
        '<html><head><script type="application/ld+json">{"@graph": [{"@type": "WebPage"},'
        '{"@type": ["Product"], "offers": {"@type": "Offer"}}]}</script>'
        '<script type="application/ld+json">{not json</script></head><body></body></html>'
    )
    kinds = sorted(str(item["@type"]) for item in structured_data(tree) if "@type" in item)
    assert kinds == ["Offer", "WebPage", "['Product']"]
