"""`sift fetch` in-process: output and exit codes 0/1/2/4/5 (fetch.md §1)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fetchkit import Listener, PageServer, page
from gatewaykit import free_port

from siftlib.cli import main

ARTICLE = (
    b"<html lang='en'><head><title>Reading</title></head><body><nav><a href='/'>Home</a></nav>"
    b"<article><h1>Reading pages</h1><p>One page, read as markdown, with a "
    b"<a href='/next'>link</a> that stays absolute for the agent reading it.</p></article>"
    b"<footer>Footer words</footer></body></html>"
)


def config(tmp_path: Path, *allow: str, extra: str = "") -> str:
    path = tmp_path / "config.toml"
    path.write_text(f'[fetch]\nallow = {json.dumps(list(allow))}\ntimeout = "5s"\n{extra}')
    return str(path)


def test_prints_the_main_content_as_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PageServer({"/a": page(ARTICLE)}) as site:
        code = main(["fetch", site.url + "/a", "--config", config(tmp_path, site.allow)])
        out, err = capsys.readouterr()
    assert code == 0
    assert out.startswith("# Reading pages\n\nOne page, read as markdown, with a ")
    assert f"[link]({site.url}/next)" in out
    assert "Footer words" not in out and "Home" not in out
    assert err == ""


def test_full_text_json_and_max_chars(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with PageServer({"/a": page(ARTICLE)}) as site:
        path = config(tmp_path, site.allow)
        assert main(["fetch", site.url + "/a", "--full", "--format", "text", "--config", path]) == 0
        full = capsys.readouterr().out
        assert (
            main(["fetch", site.url + "/a", "--json", "--max-chars", "10", "--config", path]) == 0
        )
        envelope = json.loads(capsys.readouterr().out)
        assert main(["fetch", site.url + "/a", "--format", "links", "--config", path]) == 0
        links = capsys.readouterr().out
    assert "Footer words" in full and "Home" in full and "](" not in full
    assert envelope["content"] == "# Reading "
    assert envelope["truncated"] is True
    assert envelope["url"] == envelope["final_url"] == site.url + "/a"
    assert envelope["status"] == 200 and envelope["content_type"] == "text/html"
    assert envelope["title"] == "Reading" and envelope["language"] == "en"
    assert set(envelope["timings"]) == {"fetch_ms", "convert_ms"}
    assert links == f"{site.url}/\n{site.url}/next\n"


def test_a_404_page_is_printed_with_its_status_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PageServer({}) as site:
        code = main(["fetch", site.url + "/missing", "--config", config(tmp_path, site.allow)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "not found" in out
    assert err == "sift fetch: the page answered 404\n"


def test_a_404_page_in_json_has_its_status_on_stderr_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PageServer({}) as site:
        path = config(tmp_path, site.allow)
        code = main(["fetch", site.url + "/missing", "--json", "--config", path])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["status"] == 404
    assert err == "sift fetch: the page answered 404\n"


def test_exit_4_when_the_guard_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Listener() as idle:
        code = main(["fetch", f"http://127.0.0.1:{idle.port}/", "--config", config(tmp_path)])
    assert code == 4
    assert capsys.readouterr().err == (
        "sift fetch: blocked: 127.0.0.1 is a loopback address "
        f'(to read it on this machine, add "127.0.0.1:{idle.port}" to [fetch] allow)\n'
    )
    assert idle.connections == 0


def test_exit_4_for_an_unsupported_content_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PageServer({"/f.png": page(b"\x89PNG\r\n", content_type="image/png")}) as site:
        code = main(["fetch", site.url + "/f.png", "--config", config(tmp_path, site.allow)])
    assert code == 4
    assert capsys.readouterr().err == "sift fetch: unsupported content type: image/png\n"


def test_exit_1_when_the_fetch_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    code = main(
        ["fetch", f"http://127.0.0.1:{port}/", "--config", config(tmp_path, f"127.0.0.1:{port}")]
    )
    assert code == 1
    assert capsys.readouterr().err == "sift fetch: fetch failed: connect\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fetch", "not-a-url"], "invalid url"),
        (["fetch", "https://example.org/", "--max-chars", "0"], "--max-chars"),
    ],
)
def test_exit_2_for_usage_errors(
    tmp_path: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--config", config(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_exit_2_for_a_bad_fetch_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config(tmp_path, extra='max_bytes = "lots"\n')
    assert main(["fetch", "https://example.org/", "--config", path]) == 2
    err = capsys.readouterr().err
    assert "fetch.max_bytes" in err and str(tmp_path) in err


def test_exit_2_when_fetch_is_disabled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config(tmp_path, extra="enabled = false\n")
    assert main(["fetch", "https://example.org/", "--config", path]) == 2
    assert "fetch.enabled" in capsys.readouterr().err


def test_exit_5_when_the_server_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    code = main(["fetch", "https://example.org/", "--server", f"http://127.0.0.1:{port}"])
    assert code == 5
    assert "unreachable" in capsys.readouterr().err


def test_client_mode_reads_through_the_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gatewaykit import gateway

    from siftlib.config import FetchConfig

    monkeypatch.setenv("SIFT_TOKEN", "cli-token")
    with (
        PageServer(
            {"/a": page(ARTICLE), "/f.png": page(b"\x89PNG", content_type="image/png")}
        ) as site,
        gateway(
            tmp_path, callers={"cli": "cli-token"}, fetch=FetchConfig(allow=(site.allow,))
        ) as gw,
        Listener() as idle,
    ):
        assert main(["fetch", site.url + "/a", "--server", gw.url]) == 0
        out = capsys.readouterr().out
        assert out.startswith("# Reading pages\n")
        blocked = main(["fetch", f"http://127.0.0.1:{idle.port}/", "--server", gw.url])
        blocked_err = capsys.readouterr().err
        unsupported = main(["fetch", site.url + "/f.png", "--server", gw.url])
        unsupported_err = capsys.readouterr().err
        invalid = main(["fetch", "nope", "--server", gw.url])
        invalid_err = capsys.readouterr().err
        monkeypatch.setenv("SIFT_TOKEN", "wrong")
        refused = main(["fetch", site.url + "/a", "--server", gw.url])
        refused_err = capsys.readouterr().err
    assert (blocked, blocked_err) == (
        4,
        "sift fetch: blocked: 127.0.0.1 is a loopback address "
        f'(to read it on this machine, add "127.0.0.1:{idle.port}" to [fetch] allow)\n',
    )
    assert (unsupported, unsupported_err) == (
        4,
        "sift fetch: unsupported content type: image/png\n",
    )
    assert invalid == 2 and "invalid url" in invalid_err
    assert refused == 3 and "refused the request (401)" in refused_err
    assert idle.connections == 0


def test_the_agent_skill_reads_result_pages_with_sift_fetch() -> None:
    skill = Path(__file__).resolve().parent.parent / "skill" / "SKILL.md"
    text = skill.read_text()
    assert "sift fetch https://" in text
    assert "| 4 | `sift fetch` only" in text
    assert "read a result page with `sift fetch`" in text.split("---")[1]


def test_the_format_choices_are_the_native_routes_formats() -> None:
    from siftlib.commands.fetch import FORMATS
    from siftlib.gateway.scrape import NATIVE_FORMATS

    assert FORMATS == NATIVE_FORMATS


class Terminal(io.StringIO):
    """Standard output as a terminal: sift neutralises what a terminal would act on."""

    def isatty(self) -> bool:
        return True


HOSTILE_TEXT = b"before\x1b]52;c;cm0gLXJmIH4=\x07 middle\x1b[2J\x1b[H after\n"


def test_terminal_escapes_in_a_page_never_reach_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PageServer({"/t": page(HOSTILE_TEXT, content_type="text/plain")}) as site:
        terminal = Terminal()
        monkeypatch.setattr("sys.stdout", terminal)
        code = main(["fetch", site.url + "/t", "--config", config(tmp_path, site.allow)])
    assert code == 0
    assert (
        terminal.getvalue()
        == "before\ufffd]52;c;cm0gLXJmIH4=\ufffd middle\ufffd[2J\ufffd[H after\n"
    )


def test_a_page_piped_elsewhere_keeps_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PageServer({"/t": page(HOSTILE_TEXT, content_type="text/plain")}) as site:
        assert main(["fetch", site.url + "/t", "--config", config(tmp_path, site.allow)]) == 0
    assert capsys.readouterr().out == HOSTILE_TEXT.decode()
