"""Turning pages into markdown (fetch.md §5), on the labelled pages of testdata/fetch."""

from __future__ import annotations

import pytest
from bodykit import TESTDATA_FETCH
from fetchkit import labelled_pages, shingle_f1

from siftlib.fetch.convert import Document, convert, decode

BASE = "https://news.example/2026/03/tram"
PAGES = labelled_pages()


def html(
    body: bytes | str, *, format: str = "markdown", main: bool = True, url: str = BASE
) -> Document:
    data = body.encode() if isinstance(body, str) else body
    return convert(
        data,
        content_type="text/html",
        media_type="text/html",
        url=url,
        format=format,
        main_content=main,
    )


def page(name: str) -> bytes:
    return (TESTDATA_FETCH / f"{name}.html").read_bytes()


def test_every_labelled_page_has_its_expected_text() -> None:
    assert {name for name, _, _ in PAGES} >= {
        "news-article",
        "docs-page",
        "forum-thread",
        "cookie-banner-blog",
        "non-utf8-page",
        "hyphenated-travel-blog",
    }


@pytest.mark.parametrize(("name", "body", "expected"), PAGES, ids=[p[0] for p in PAGES])
def test_main_content_matches_the_labelled_article(name: str, body: bytes, expected: str) -> None:
    assert shingle_f1(expected, html(body, format="text").content) >= 0.9


@pytest.mark.parametrize(("name", "body", "expected"), PAGES, ids=[p[0] for p in PAGES])
def test_main_content_loses_nothing_against_trafilaturas_own_extraction(
    name: str, body: bytes, expected: str
) -> None:
    import trafilatura

    # As the article benchmark calls it: its plain text, comments off.
    own = trafilatura.extract(decode(body, html_page=True), include_comments=False) or ""
    ours = html(body, format="text").content
    assert shingle_f1(expected, ours) >= shingle_f1(expected, own)


@pytest.mark.parametrize(("name", "body", "expected"), PAGES, ids=[p[0] for p in PAGES])
def test_the_whole_page_scores_lower_than_its_main_content(
    name: str, body: bytes, expected: str
) -> None:
    main = shingle_f1(expected, html(body, format="text").content)
    full = shingle_f1(expected, html(body, format="text", main=False).content)
    assert full < main


@pytest.mark.parametrize(
    ("name", "boilerplate"),
    [
        (
            "news-article",
            [
                "Most read",
                "Share this article",
                "About time!",
                "All rights reserved",
                "Skip to content",
                "morning briefing",
            ],
        ),
        (
            "cookie-banner-blog",
            ["Cookies", "Alle akzeptieren", "Teilen", "Newsletter", "Impressum", "Kommentare"],
        ),
        ("docs-page", ["Search docs", "Installation", "Built with", "Previous"]),
        ("forum-thread", ["Log in", "Powered by Discourse", "Reply"]),
    ],
)
def test_main_content_drops_navigation_banners_share_bars_and_comments(
    name: str, boilerplate: list[str]
) -> None:
    content = html(page(name)).content
    assert [phrase for phrase in boilerplate if phrase in content] == []


def test_the_whole_page_keeps_what_main_content_drops() -> None:
    content = html(page("news-article"), main=False).content
    assert "Most read" in content and "About time!" in content
    assert "gtag" not in content and "min-height" not in content  # scripts and styles
    assert "pixel.example-tracker.com" not in content
    assert "Sign up" not in content  # form controls


def test_markdown_keeps_structure_with_absolute_links() -> None:
    content = html(page("news-article")).content
    assert content.startswith("# City council approves new tram line after decade of debate\n")
    assert "\n## Why now?\n" in content
    assert "\n- Harbour Square\n- Old Customs House\n" in content
    assert "> The tram will carry as many people" in content
    assert "[city's website](https://news.example/documents/tram-plan.pdf)" in content


def test_docs_page_keeps_code_with_its_language_inline_code_and_the_table() -> None:
    content = html(page("docs-page")).content
    assert "```python\nfrom pondlib import Client, Limits\n" in content
    assert "Every `Client` owns one connection pool." in content
    assert "| Setting | Default | Meaning |\n|---|---|---|\n| max_connections | 100 |" in content
    assert "¶" not in content


def test_forum_thread_keeps_every_post_and_the_code_language() -> None:
    content = html(page("forum-thread")).content
    for words in ("Is this normal", "Some process probably", "That was it."):
        assert words in content
    assert "```sql\nPRAGMA wal_checkpoint(TRUNCATE);\n```" in content


@pytest.mark.parametrize("format", ["markdown", "text"])
def test_words_stay_whole_without_invisible_marks_or_decomposed_letters(format: str) -> None:
    content = html(page("hyphenated-travel-blog"), format=format).content
    assert not {"\u00ad", "\u200b", "\u2060", "\ufeff"} & set(content)
    for word in ("Bodenseeradweg", "Naturschutzgebiet", "Fischbrötchen", "Regencape"):
        assert word in content
    assert "Die Fähre über den See" in content  # composed (NFC), as the page shows it
    assert "Fa\u0308hre" not in content


def test_spaces_at_the_edges_of_links_and_emphasis_are_kept() -> None:
    content = html(page("hyphenated-travel-blog")).content
    # The page's link text ends in a space: it goes after the link, not inside it.
    assert "[Naturschutzgebiet](https://naturschutz.example.org/rheindelta) vorbei" in content
    # trafilatura trims these two spaces away; the page's own text says they are there.
    assert "die Bäckerei von [Kurt Meier](https://baeckerei.example.ch/) in" in content
    assert "**Unser Fazit** nach drei Tagen" in content


def test_no_space_is_added_inside_a_word_the_page_writes_whole() -> None:
    words = "Ein Satz mit genug Wörtern, damit der Absatz als Inhalt zählt und bleibt. " * 5
    body = (
        f"<article><h1>Liste</h1><p>{words}</p>"
        '<ul><li><strong>Typen</strong><br><br>Zwei <a href="/d">dict</a>s und '
        "drei <b>H</b>äuser.</li><li>Noch ein Punkt.</li></ul>"
        f"<p>{words}</p></article>"
    )
    content = html(body).content
    assert "[dict](https://news.example/d)s" in content
    assert "**H**äuser" in content


@pytest.mark.parametrize(
    ("pre", "fence"),
    [("<pre>", "```"), ("<pre class='lang-sh'>", "```sh"), ("<pre class='brush: sh'>", "```sh")],
)
def test_a_pre_without_code_keeps_its_lines_in_a_fenced_block(pre: str, fence: str) -> None:
    words = "Run these two commands in a terminal to build the tool from its sources. " * 4
    body = (
        f"<article><h1>Install</h1><p>{words}</p>{pre}$ ./configure\n$ make</pre>"
        f"<p>{words}</p></article>"
    )
    assert f"\n\n{fence}\n$ ./configure\n$ make\n```\n\n" in html(body).content


def test_a_short_page_keeps_its_structure_and_not_its_menu() -> None:
    body = (
        "<nav><a href='/'>Home</a> <a href='/about'>About</a></nav><article><h1>Short</h1>"
        "<p>A short note, with a <a href='/more'>link</a>, is still an article.</p></article>"
        "<footer>Footer words</footer>"
    )
    content = html(body).content
    assert content.startswith("# Short\n\nA short note, with a [link](https://news.example/more)")
    assert "Home" not in content and "Footer words" not in content


def test_a_windows_1252_page_declared_in_http_equiv_is_decoded() -> None:
    document = html(page("non-utf8-page"))
    assert "Les marchés de Noël en Alsace" in document.content
    assert document.title == "Les marchés de Noël en Alsace – Voyages d’hiver"
    assert document.language == "fr"
    assert "\ufffd" not in document.content


@pytest.mark.parametrize(
    ("name", "title", "description", "language"),
    [
        (
            "news-article",
            "City council approves new tram line after decade of debate | The Riverside Courier",
            "The 14-kilometre line will link the harbour district with the university campus"
            " by 2030.",
            "en-GB",
        ),
        (
            "cookie-banner-blog",
            "Sauerteig ohne Stress: mein Wochenplan – Brot & Zeit",
            "Wie ich mit zehn Minuten am Tag jede Woche zwei Brote backe.",
            "de",
        ),
        (
            "docs-page",
            "Configuring connection pools — Pondlib 3.2 documentation",
            "How to size and tune Pondlib's connection pools.",
            "en",
        ),
    ],
)
def test_metadata(name: str, title: str, description: str, language: str) -> None:
    document = html(page(name))
    assert (document.title, document.description, document.language) == (
        title,
        description,
        language,
    )


def test_links_are_absolute_deduplicated_and_web_only() -> None:
    document = html(
        "<html><head><base href='https://cdn.example/root/'></head><body>"
        "<a href='a'>1</a><a href='/b'>2</a><a href='a'>again</a><a href='https://x.example/c'>3</a>"
        "<a href='mailto:me@example.org'>mail</a><a href='javascript:void(0)'>js</a>"
        "<a href='#top'>top</a>"
        "</body></html>",
        format="links",
    )
    assert document.links == [
        "https://cdn.example/root/a",
        "https://cdn.example/b",
        "https://x.example/c",
    ]
    assert document.content == "\n".join(document.links)


def test_hidden_elements_base64_images_and_pixels_are_dropped() -> None:
    document = html(
        "<body><article><p>Visible words stay in the page for the reader to see.</p>"
        "<p hidden>hidden one</p><p aria-hidden='true'>hidden two</p>"
        "<p style='display: none'>hidden three</p><p style='visibility :hidden'>hidden four</p>"
        "<p style='border: none; overflow: hidden'>A bordered note stays too.</p>"
        "<img src='data:image/png;base64,AAAA' alt='inline'>"
        "<img src='/t.gif' width='1' height='1' alt='pixel'>"
        "<img src='/photo.jpg' alt='A photo'><template><p>template</p></template>"
        "<noscript>enable js</noscript></article></body>",
        main=False,
    )
    assert "Visible words stay" in document.content
    assert "A bordered note stays too." in document.content
    assert "hidden" not in document.content and "template" not in document.content
    assert "inline" not in document.content and "pixel" not in document.content
    assert "enable js" not in document.content
    assert "![A photo](https://news.example/photo.jpg)" in document.content


@pytest.mark.parametrize("main", [True, False])
def test_hidden_styles_and_pixels_are_read_as_css_reads_them(main: bool) -> None:
    words = "Visible words stay in the page for the reader to see, as its article. " * 4
    content = html(
        f"<body><article><h1>Page</h1><p>{words}</p>"
        "<p style='Display: None'>hidden one</p><p style='VISIBILITY :\tHidden'>hidden two</p>"
        "<p aria-hidden='TRUE'>hidden three</p>"
        "<img src='/a.gif' width='1px' height='1PX' alt='pixel one'>"
        "<img src='/b.gif' style='Width: 1px; height:0' alt='pixel two'>"
        "<img src='/wide.jpg' width='1' height='1' style='width: 300px; height: 200px' alt='Wide'>"
        f"<p>{words}</p></article></body>",
        main=main,
    ).content
    assert "Visible words stay" in content
    assert "hidden" not in content and "pixel" not in content
    if not main:  # images are kept in the whole page only; CSS sizes this one 300×200
        assert "![Wide](https://news.example/wide.jpg)" in content


def test_cleaned_html_format_has_no_scripts() -> None:
    content = html(page("news-article"), format="html").content
    assert content.startswith("<") and "<h1>" in content
    assert "<script" not in content and "Most read" not in content


def test_text_format_has_no_markdown_syntax() -> None:
    content = html(page("news-article"), format="text").content
    assert "](" not in content and "#" not in content and "**" not in content


def test_ordered_lists_are_numbered_in_markdown_and_marked_in_text() -> None:
    markdown = html(page("cookie-banner-blog")).content
    text = html(page("cookie-banner-blog"), format="text").content
    assert "\n1. Zwanzig Minuten mit Deckel backen.\n2. Deckel abnehmen" in markdown
    assert "\n- Zwanzig Minuten mit Deckel backen.\n- Deckel abnehmen" in text


def test_other_types_pass_through_and_json_is_fenced() -> None:
    def other(body: bytes, media_type: str, format: str = "markdown") -> str:
        return convert(
            body, content_type=media_type, media_type=media_type, url=BASE, format=format
        ).content

    assert other(b"# Already markdown\n", "text/markdown") == "# Already markdown\n"
    assert other(b"plain words", "text/plain") == "plain words"
    assert other(b'{"k": [1, 2]}', "application/json") == '```json\n{"k": [1, 2]}\n```'
    assert other(b'{"k": 1}', "application/json", "text") == '{"k": 1}'


@pytest.mark.parametrize(
    "body", [b"", b"   ", b"\x00\x01\x02", b"<", b"<html><body></body></html>", b"\xff\xfe\xfa"]
)
def test_broken_or_empty_pages_convert_without_an_exception(body: bytes) -> None:
    document = html(body)
    assert isinstance(document.content, str)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        ("é".encode(), "", "é"),
        ("é".encode("cp1252"), "", "é"),
        (b"\x81", "", "\ufffd"),
        ("é".encode("cp1252"), "text/html; charset=latin1", "é"),
        ("é".encode("utf-16-le"), "text/html; charset=utf-16le", "é"),
        ("①".encode("cp932"), "text/html; charset=Shift_JIS", "①"),  # windows-31J, as browsers
    ],
)
def test_decode_never_raises(body: bytes, content_type: str, expected: str) -> None:
    assert decode(body, content_type) == expected


@pytest.mark.parametrize(
    "label", ["undefined", "idna", "punycode", "utf-7", "unicode_escape", "rot13", "cp500"]
)
def test_a_charset_no_browser_knows_falls_back_to_utf8_then_windows_1252(label: str) -> None:
    # Python codecs, not web encodings: `undefined` and `idna` raise, `punycode` drops bytes,
    # `utf-7` turns "+ADw-" into "<"; a browser ignores such a label, and so does sift.
    for text, encoding in (("<p>+ADw-é</p>", "utf-8"), ("<p>+ADw-é \\x41</p>", "cp1252")):
        body = text.encode(encoding)
        assert decode(body, f"text/html; charset={label}") == text
        meta = f"<meta charset={label}>".encode()
        assert decode(meta + body, "text/html", html_page=True) == meta.decode() + text


def test_the_html_format_keeps_no_event_handler_or_script_url() -> None:
    body = (
        b"<html><body><article><h1 onclick='steal()'>Title</h1>"
        b"<p onmouseover=\"x()\">Read <a href='javascript:alert(1)'>this</a>, "
        b"<a href=' JaVa&#9;ScRiPt:alert(2)'>that</a>, <a href='vbscript:x'>old</a>, "
        b"<a href='data:text/html,<script>y()</script>'>inline</a> and "
        b"<a href='https://example.org/ok' title='kept'>a real link</a>.</p>"
        b"<img src='https://example.org/i.png' onerror='z()' alt='pic'>"
        b"<form action='javascript:w()'><p>inside a form</p></form>"
        b"</article></body></html>"
    )
    for main in (True, False):
        content = html(body, format="html", main=main).content
        lowered = content.lower()
        assert "onclick" not in lowered and "onmouseover" not in lowered
        assert "onerror" not in lowered
        assert "javascript" not in lowered and "vbscript" not in lowered
        assert "data:text/html" not in lowered
        assert 'href="https://example.org/ok"' in content
        assert "a real link" in content
