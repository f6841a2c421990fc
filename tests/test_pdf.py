"""PDFs read as markdown through `sift fetch`, `/v1/fetch` and `/v2/scrape` (issue 40)."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import random
import signal
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from bodykit import searxng_body
from fetchkit import PageServer, page
from gatewaykit import FakeUpstream, Gateway, call, gateway
from pdfkit import Pdf, Text, paragraph

from siftlib.cli import main
from siftlib.config import FetchConfig
from siftlib.fetch.pdf import read_pdf
from siftlib.fetch.workers import WorkerPool

TOKEN = "pdf-token"
INTRO = (
    "Zoë Brandt, who chairs the transport committee, said the fare would stay at €2.50 — "
    "“a promise we keep”, she added — and that the Straße along the harbour closes for "
    "eighteen months while the tracks are laid."
)
COSTS = (
    "Building costs three million euro per kilometre, two thirds of it paid by the region. "
    "The remaining third comes from a levy on parking in the city centre."
)
LEFT = " ".join(f"left{i} column words flow down first" for i in range(24))
RIGHT = " ".join(f"right{i} column words flow down after" for i in range(24))


def report() -> Pdf:
    """Three pages: a title, headings, paragraphs, non-ASCII text, a two-column page."""
    pdf = Pdf(title="Harbour tram: the decision", author="Zoë Brandt")
    first = [Text(72, 720, 24, "Harbour tram line approved", bold=True)]
    first += paragraph(72, 680, 11, INTRO)
    first += [Text(72, 600, 16, "What it costs", bold=True)]
    first += paragraph(72, 570, 11, COSTS)
    # A paragraph whose first line ends in a word broken with a hyphen.
    first += [Text(72, 500, 11, "Work starts in the spring, when the contrac-")]
    first += [Text(72, 485.15, 11, "tors move their machines to the depot.")]
    pdf.page(first)
    columns = paragraph(50, 700, 10, LEFT, width=230) + paragraph(320, 700, 10, RIGHT, width=230)
    # Interleaved as some writers set them: line 1 left, line 1 right, line 2 left, …
    half = len(columns) // 2
    interleaved = [
        line for pair in zip(columns[:half], columns[half:], strict=True) for line in pair
    ]
    pdf.page([Text(50, 740, 16, "Two columns", bold=True), *interleaved])
    pdf.page([Text(72, 720, 16, "Timeline", bold=True), *paragraph(72, 690, 11, COSTS)])
    return pdf


def garbage() -> bytes:
    return b"%PDF-1.7\n" + random.Random(7).randbytes(20_000)


def pages(count: int) -> bytes:
    pdf = Pdf(title="Many pages")
    for number in range(1, count + 1):
        pdf.page([Text(72, 720, 11, f"This is page number {number} of the long file.")])
    return pdf.bytes()


def scanned() -> bytes:
    return Pdf(title="Scan").scanned_page().scanned_page().bytes()


def test_markdown_keeps_headings_paragraphs_pages_and_non_ascii() -> None:
    read = read_pdf(report().bytes(), max_pages=200)
    assert read.problem == "" and read.warnings == []
    assert (read.title, read.author, read.num_pages) == (
        "Harbour tram: the decision",
        "Zoë Brandt",
        3,
    )
    first, second, third = read.markdown.split("\n\n---\n\n")
    assert first.startswith("# Harbour tram line approved\n\n" + INTRO + "\n\n## What it costs")
    assert COSTS in first  # lines joined into one paragraph
    assert "when the contractors move their machines" in first
    assert second.startswith("## Two columns\n\n")
    assert LEFT in second and RIGHT in second
    assert second.index("left23") < second.index("right0")
    assert third.startswith("## Timeline\n\n")
    text = read.text
    assert "#" not in text and "\f" in text and INTRO in text


def test_a_title_falls_back_to_the_first_heading() -> None:
    pdf = Pdf().page([Text(72, 720, 20, "Minutes of the meeting"), *paragraph(72, 690, 11, COSTS)])
    assert read_pdf(pdf.bytes(), max_pages=5).title == "Minutes of the meeting"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (scanned(), "the PDF has no text layer (a scanned document?); sift does no OCR"),
        (report().bytes(password="secret"), "the PDF is encrypted with a password"),
        (report().bytes()[:3000], "the PDF is broken (it does not parse)"),
        (garbage(), "the PDF is broken (it does not parse)"),
        (b"%PDF-", "the PDF is broken (it does not parse)"),
    ],
    ids=["scanned", "encrypted", "truncated", "garbage", "empty"],
)
def test_unreadable_pdfs_are_a_problem_not_an_empty_success(data: bytes, problem: str) -> None:
    read = read_pdf(data, max_pages=200)
    assert read.problem == problem
    assert read.markdown == ""


def test_a_scanned_page_among_text_pages_is_a_warning() -> None:
    pdf = report().scanned_page()
    read = read_pdf(pdf.bytes(), max_pages=200)
    assert read.problem == ""
    assert read.warnings == ["pdf: no text layer on page 4 (a scan?)"]


def test_a_page_tree_claiming_100000_pages() -> None:
    read = read_pdf(report().bytes(count=100_000), max_pages=200)
    assert read.num_pages == 3
    assert read.warnings == ["pdf: the PDF declares 100000 pages but only 3 can be read"]
    assert "Timeline" in read.markdown


def test_the_page_limit_says_what_is_left_out() -> None:
    read = read_pdf(pages(7), max_pages=3)
    assert read.num_pages == 7
    assert read.markdown.count("\n---\n") == 2
    assert "page number 3 " in read.markdown and "page number 4 " not in read.markdown
    assert read.warnings == ["pdf: read the first 3 of 7 pages (the page limit); 4 left out"]


# --- through the fetch routes and the CLI -------------------------------------------------------


def slow_pdf() -> bytes:
    """A small file that takes PDFium seconds: 400 pages sharing one long content stream."""
    pdf = Pdf()
    lines = [Text(40 + (i % 7) * 70, 40 + (i // 7) % 700, 6, "slow text " * 3) for i in range(6000)]
    pdf.page(lines)
    data = pdf.bytes()
    # Every page is the same page object's twin: same content stream, same resources.
    kids = data.index(b"/Kids [7 0 R]")
    return (
        data[:kids]
        + b"/Kids ["
        + b"7 0 R " * 400
        + b"]"
        + data[kids + 13 :].replace(b"/Count 1", b"/Count 400", 1)
    )


@functools.cache
def bomb_pdf() -> bytes:
    """A 0.4 MB file whose one content stream inflates to 400 MB of spaces.

    One megabyte is deflated once, not 400 times (2.5 CPU-s): after a full flush the
    compressor forgets what came before, so every megabyte is the same block of bytes.
    """
    megabyte = b" " * (1 << 20)
    packer = zlib.compressobj(9)
    first = packer.compress(megabyte) + packer.flush(zlib.Z_FULL_FLUSH)
    header, block = first[:2], first[2:]
    checksum = 1
    for _ in range(400):
        checksum = zlib.adler32(megabyte, checksum)
    # An empty last block, then the checksum of all 400 MB: a whole, valid zlib stream.
    stream = header + block * 400 + b"\x03\x00" + checksum.to_bytes(4, "big")
    return Pdf().compressed_page(stream).bytes()


@pytest.fixture(scope="module")
def served() -> Iterator[PageServer]:
    """The module's loopback site, every file built once."""
    pdf = "application/pdf"
    routes = {
        "/report.pdf": page(report().bytes(), content_type=pdf),
        "/download.pdf": page(report().bytes(), content_type="application/octet-stream"),
        "/download": page(report().bytes(), content_type="application/octet-stream"),
        "/fake.pdf": page(b"PK\x03\x04zip", content_type="application/octet-stream"),
        "/untyped": page(report().bytes(), content_type=None),
        "/scan.pdf": page(scanned(), content_type=pdf),
        "/locked.pdf": page(report().bytes(password="secret"), content_type=pdf),
        "/cut.pdf": page(report().bytes()[:3000], content_type=pdf),
        "/garbage.pdf": page(garbage(), content_type=pdf),
        "/claims.pdf": page(report().bytes(count=100_000), content_type=pdf),
        "/long.pdf": page(pages(7), content_type=pdf),
        "/slow.pdf": page(slow_pdf(), content_type=pdf),
        "/bomb.pdf": page(bomb_pdf(), content_type=pdf),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def site(served: PageServer) -> PageServer:
    """The module's site, with no request seen yet by this test."""
    served.hits.clear()
    served.peers.clear()
    return served


@pytest.fixture(scope="module")
def own_pool() -> Iterator[WorkerPool]:
    """Conversion workers of the kill tests' own: the ones they kill are not the suite's.

    One pool for the module: each killed worker is replaced at once, as in a gateway.
    """
    with WorkerPool(2, preload=("siftlib.fetch.fetcher", "siftlib.fetch.pdf")) as pool:
        pool.start()
        pool.run(len, b"", deadline=time.monotonic() + 120)  # started: the PDFs are the test
        yield pool


@pytest.fixture
def isolated(tmp_path: Path, site: PageServer, own_pool: WorkerPool) -> Iterator[Gateway]:
    """The gateway of the kill tests, on workers of its own."""
    # Every page of the slow PDF is read: five of them take PDFium under 2 s on a quiet machine,
    # inside the hung-parser test's 2.5 s deadline; all 400 take minutes.
    fetch = FetchConfig(allow=(site.allow,), timeout=30.0, pdf_max_pages=400)
    searxng = FakeUpstream(searxng_body(3))
    with gateway(
        tmp_path,
        callers={"agent": TOKEN},
        fetch=fetch,
        searxng=searxng.url,
        fetch_pool=own_pool,
    ) as running:
        yield running
    searxng.close()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, served: PageServer) -> Iterator[Gateway]:
    """The module's gateway (no fetch cache: every test's fetch reaches the site)."""
    fetch = FetchConfig(allow=(served.allow,), timeout=30.0, pdf_max_pages=5)
    searxng = FakeUpstream(searxng_body(3))
    with gateway(
        tmp_path_factory.mktemp("gw"), callers={"agent": TOKEN}, fetch=fetch, searxng=searxng.url
    ) as running:
        yield running
    searxng.close()


def scrape(gw: Gateway, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    reply = call(gw.url, "POST", "/v2/scrape", body, token=TOKEN)
    return reply.status, reply.json


def native(gw: Gateway, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    reply = call(gw.url, "POST", "/v1/fetch", body, token=TOKEN)
    return reply.status, reply.json


def test_scrape_reads_a_pdf_as_markdown(gw: Gateway, site: PageServer) -> None:
    status, body = scrape(gw, {"url": site.url + "/report.pdf", "formats": ["markdown", "links"]})
    assert status == 200 and body["success"] is True
    data = body["data"]
    assert isinstance(data, dict)
    assert data["markdown"].startswith("# Harbour tram line approved\n\n" + INTRO)
    assert data["links"] == []
    metadata = data["metadata"]
    assert metadata["title"] == "Harbour tram: the decision"
    assert metadata["author"] == "Zoë Brandt"
    assert metadata["numPages"] == 3
    assert metadata["contentType"] == "application/pdf"
    assert "warning" not in body


def test_native_fetch_reads_a_pdf_as_text(gw: Gateway, site: PageServer) -> None:
    status, body = native(gw, {"url": site.url + "/report.pdf", "format": "text"})
    assert status == 200
    assert body["content_type"] == "application/pdf"
    assert (body["title"], body["author"], body["num_pages"]) == (
        "Harbour tram: the decision",
        "Zoë Brandt",
        3,
    )
    assert "#" not in str(body["content"]) and INTRO in str(body["content"])


@pytest.mark.parametrize("path", ["/download.pdf", "/untyped"])
def test_a_pdf_sent_as_octet_stream_or_untyped(gw: Gateway, site: PageServer, path: str) -> None:
    status, body = native(gw, {"url": site.url + path})
    assert status == 200 and body["num_pages"] == 3


@pytest.mark.parametrize("path", ["/download", "/fake.pdf"])
def test_other_octet_streams_stay_refused(gw: Gateway, site: PageServer, path: str) -> None:
    status, body = native(gw, {"url": site.url + path})
    assert status == 415
    assert body["error"] == "unsupported content type: application/octet-stream"
    assert body["code"] == "unsupported content type"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/scan.pdf", "the PDF has no text layer (a scanned document?); sift does no OCR"),
        ("/locked.pdf", "the PDF is encrypted with a password"),
        ("/cut.pdf", "the PDF is broken (it does not parse)"),
        ("/garbage.pdf", "the PDF is broken (it does not parse)"),
    ],
)
def test_unreadable_pdfs_are_a_415_with_the_reason(
    gw: Gateway, site: PageServer, path: str, reason: str
) -> None:
    status, body = scrape(gw, {"url": site.url + path})
    assert status == 415
    assert body["success"] is False
    assert body["error"] == f"unsupported content: {reason}"
    assert body["code"] == "unsupported content"
    status, body = native(gw, {"url": site.url + path})
    assert (status, body["code"]) == (415, "unsupported content")


def test_page_limits_and_a_lying_page_count_are_warnings(gw: Gateway, site: PageServer) -> None:
    status, body = scrape(gw, {"url": site.url + "/long.pdf"})
    assert status == 200
    assert body["warning"] == "pdf: read the first 5 of 7 pages (the page limit); 2 left out"
    assert body["data"]["metadata"]["numPages"] == 7  # type: ignore[index]
    parsers = [{"type": "pdf", "maxPages": 2}]
    status, body = scrape(gw, {"url": site.url + "/long.pdf", "parsers": parsers})
    assert body["warning"] == "pdf: read the first 2 of 7 pages (the page limit); 5 left out"
    status, body = scrape(gw, {"url": site.url + "/claims.pdf", "parsers": ["pdf"]})
    assert status == 200
    assert body["warning"] == "pdf: the PDF declares 100000 pages but only 3 can be read"
    assert body["data"]["metadata"]["numPages"] == 3  # type: ignore[index]


def test_parsers_empty_returns_the_file_unparsed(gw: Gateway, site: PageServer) -> None:
    status, body = scrape(gw, {"url": site.url + "/report.pdf", "parsers": []})
    assert status == 200
    data = body["data"]
    assert isinstance(data, dict)
    assert base64.b64decode(data["markdown"]) == report().bytes()
    assert "numPages" not in data["metadata"]


def test_invalid_parsers_are_refused(gw: Gateway, site: PageServer) -> None:
    status, body = scrape(gw, {"url": site.url + "/report.pdf", "parsers": ["docx"]})
    assert (status, body["error"]) == (400, "unsupported option: parsers 'docx'")
    status, body = scrape(gw, {"url": site.url + "/report.pdf", "parsers": "pdf"})
    assert (status, body["code"]) == (400, "invalid request")
    assert site.hits == []


def _busy_worker(limit: float = 10.0) -> int:
    """Return the id of this process's conversion worker that is reading a PDF right now."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    command = cmdline.read()
            except OSError:
                continue
            if (
                int(fields[1]) != os.getpid()
                or fields[0] != "R"
                or b"siftlib.fetch.workers" not in command
            ):
                continue
            with contextlib.suppress(OSError), open(f"/proc/{entry}/maps") as maps:
                if "pdfium" in maps.read():  # reading a PDF, not starting up or converting
                    return int(entry)
        time.sleep(0.02)
    raise AssertionError("no conversion worker got busy reading a PDF")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _others_answer(gw: Gateway, site: PageServer) -> None:
    """Another fetch and a search are answered. The fetch is another PDF: each killed worker's
    replacement answers it, and an HTML page would first cost it trafilatura's import (~0.35
    CPU-s per kill) for nothing these tests are about."""
    status, body = native(gw, {"url": site.url + "/long.pdf"})
    assert status == 200 and "page number 1 " in str(body["content"])
    search = call(gw.url, "POST", "/v1/search", {"query": "tram"}, token=TOKEN)
    assert search.status == 200 and search.json["results"]


def test_a_hung_parser_is_killed_at_the_deadline_while_others_are_answered(
    isolated: Gateway, site: PageServer
) -> None:
    assert scrape(isolated, {"url": site.url + "/report.pdf"})[0] == 200  # a worker has PDFium
    answers: list[tuple[int, dict[str, object]]] = []
    worker = threading.Thread(
        target=lambda: answers.append(
            scrape(isolated, {"url": site.url + "/slow.pdf", "timeout": 2500})
        )
    )
    worker.start()
    busy = _busy_worker()
    # Frozen mid-read, the parser hangs without taking a core from the rest of the suite for
    # the whole deadline: to the pool a stopped reader and a spinning one look alike (no
    # answer), and SIGKILL ends either.
    os.kill(busy, signal.SIGSTOP)
    _others_answer(isolated, site)
    worker.join(timeout=20)
    assert answers and answers[0][0] == 408, answers
    assert answers[0][1]["code"] == "deadline"
    time.sleep(0.2)
    assert _gone(busy)  # killed at the deadline, not left running
    _others_answer(isolated, site)


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_crashed_parser_is_one_failed_fetch(
    isolated: Gateway, site: PageServer, sig: signal.Signals
) -> None:
    assert scrape(isolated, {"url": site.url + "/report.pdf"})[0] == 200  # a worker has PDFium
    answers: list[tuple[int, dict[str, object]]] = []
    worker = threading.Thread(
        target=lambda: answers.append(scrape(isolated, {"url": site.url + "/slow.pdf"}))
    )
    worker.start()
    os.kill(_busy_worker(), sig)
    worker.join(timeout=20)
    assert answers and answers[0][0] == 415, answers
    assert answers[0][1]["error"] == "unsupported content: the PDF reader crashed on this file"
    _others_answer(isolated, site)


def test_a_parser_past_its_memory_limit_is_one_failed_fetch(
    isolated: Gateway, site: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("siftlib.fetch.conversion.PDF_MEMORY", 200 * 1024 * 1024)
    status, body = scrape(isolated, {"url": site.url + "/bomb.pdf"})
    assert status == 415, body
    assert body["error"] in (
        "unsupported content: the PDF reader passed its memory limit (209715200 bytes)",
        "unsupported content: the PDF reader crashed on this file",
    )
    _others_answer(isolated, site)


def test_cli_reads_a_pdf_and_exits_4_on_a_scan(
    tmp_path: Path, site: PageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[fetch]\nallow = ["{site.allow}"]\ntimeout = "8s"\npdf_max_pages = 2\n')
    assert main(["fetch", site.url + "/long.pdf", "--config", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    envelope = json.loads(out)
    assert envelope["num_pages"] == 7
    assert envelope["warnings"] == ["pdf: read the first 2 of 7 pages (the page limit); 5 left out"]
    assert main(["fetch", site.url + "/report.pdf", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# Harbour tram line approved\n")
    assert err == "sift: warning: pdf: read the first 2 of 3 pages (the page limit); 1 left out\n"
    assert main(["fetch", site.url + "/scan.pdf", "--config", str(path)]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "sift fetch: unsupported content: the PDF has no text layer (a scanned document?);"
        " sift does no OCR\n"
    )
