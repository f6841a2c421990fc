"""`sift search`: output format and exit codes (search.md §1), in-process and as typed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from bodykit import fixture_bytes
from clikit import sift
from pytest_httpserver import HTTPServer

from siftlib.cli import main


def config(tmp_path: Path, httpserver: HTTPServer, *, sources: str = "searxng") -> str:
    text = f'[server]\ndb = "{tmp_path / "server.db"}"\nsecret_env = "{tmp_path / "secret.env"}"\n'
    # No test here is about the deadline; 2 s, which a child process's start under eight busy
    # xdist workers can use up, failed a search whose fake had answered.
    text += '[search]\ntimeout = "10s"\n'
    for name in sources.split(","):
        text += f'[search.{name}]\nenabled = true\nurl = "{httpserver.url_for(name)}"\n'
    path = tmp_path / "config.toml"
    path.write_text(text)
    (tmp_path / "secret.env").write_text("TAVILY_API_KEY=tvly-secret\nBRAVE_API_KEY=brave-secret\n")
    (tmp_path / "secret.env").chmod(0o600)
    return str(path)


def test_prints_title_url_snippet_blocks(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_data(
        fixture_bytes("searxng/wal-typed-and-legacy.json"),
        content_type="application/json",
    )
    code = main(["search", "sqlite wal mode", "--k", "2", "--config", config(tmp_path, httpserver)])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == (
        "Write-Ahead Logging\n"
        "https://www.sqlite.org/wal.html\n"
        "The default method by which SQLite implements atomic commit and rollback is a rollback"
        " journal.\n"
        "\n"
        "SQLite WAL mode explained — checkpoints and readers\n"
        "https://blog.example.net/sqlite-wal-explained/\n"
        "How write-ahead logging lets readers and a writer run at once, and when checkpoints"
        " run.\n"
    )
    assert err == ""


def test_an_empty_snippet_leaves_no_empty_line_in_its_block(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json(
        {
            "results": [
                {"url": "https://a.com", "title": "A", "content": " \n ", "score": 2},
                {"url": "https://b.com", "title": "B", "content": "b", "score": 1},
            ]
        }
    )
    assert main(["search", "q", "--config", config(tmp_path, httpserver)]) == 0
    out = capsys.readouterr().out
    assert out == "A\nhttps://a.com\n\nB\nhttps://b.com\nb\n"
    assert [block.splitlines()[1] for block in out.split("\n\n")] == [
        "https://a.com",
        "https://b.com",
    ]


def test_json_prints_the_native_envelope(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json(
        {"results": [{"url": "https://a.com", "title": "A", "content": "a", "score": 1}]}
    )
    path = config(tmp_path, httpserver)
    assert main(["search", "q", "--json", "--local", "--config", path]) == 0
    envelope = json.loads(capsys.readouterr().out)
    assert envelope["results"] == [
        {
            "url": "https://a.com",
            "title": "A",
            "snippet": "a",
            "score": 1 / 61,
            "source": "searxng",
            "engines": 1,
        }
    ]
    assert envelope["cached"] is False and envelope["warnings"] == []
    assert set(envelope) == {"results", "warnings", "sizes", "timings", "cached"}


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_warnings_go_to_stderr_in_both_output_modes(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_data(
        fixture_bytes("searxng/partial-three-unresponsive.json"),
        content_type="application/json",
    )
    path = config(tmp_path, httpserver)
    argv = ["search", "q", "--local", "--config", path, *(["--json"] if as_json else [])]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == "sift: warning: searxng: partial (3 engines unresponsive)\n"
    if as_json:
        assert json.loads(out)["warnings"] == ["searxng: partial (3 engines unresponsive)"]
    else:
        assert "partial" not in out


def test_zero_hits_says_no_results_and_succeeds(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json({"results": []})
    assert main(["search", "q", "--config", config(tmp_path, httpserver)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == "no results\n"


def test_no_source_enabled_names_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text("")
    assert main(["search", "q", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    for key in ("search.searxng.enabled", "search.brave_llm.enabled", "search.tavily.enabled"):
        assert key in err
    assert err.count("\n") == 1


def test_every_source_failed_exits_1_with_warnings(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_data("no", status=500)
    assert main(["search", "q", "--config", config(tmp_path, httpserver)]) == 1
    err = capsys.readouterr().err
    assert "searxng: 500" in err and "no search results" in err


@pytest.mark.parametrize("query", ["", "   ", "x" * 1501])
def test_invalid_query_exits_2(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    assert main(["search", query, "--config", config(tmp_path, httpserver)]) == 2
    assert "invalid query" in capsys.readouterr().err
    assert httpserver.log == []


def test_config_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[search]\nk = 'eight'\n")
    assert main(["search", "q", "--config", str(path)]) == 2
    assert capsys.readouterr().err == f"sift search: {path}: search.k must be an integer, not str\n"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["search"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        main(["search", "q", "--k", "many"])
    assert exited.value.code == 2


def test_public_sources_on_loopback_are_refused_without_the_test_switch(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json({"results": []})
    path = config(tmp_path, httpserver, sources="searxng,tavily")
    assert main(["search", "q", "--config", path]) == 0
    assert "tavily: upstream refused" in capsys.readouterr().err
    assert [r.path for r, _ in httpserver.log] == ["/searxng/search"]


def test_the_test_switch_lets_public_sources_use_loopback_loudly(
    tmp_path: Path,
    httpserver: HTTPServer,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    httpserver.expect_request("/tavily", method="POST").respond_with_json(
        {"results": [{"url": "https://t.com", "title": "T", "content": "t", "score": 0.5}]}
    )
    path = config(tmp_path, httpserver, sources="tavily")
    assert main(["search", "q", "--allow-private-upstreams", "--config", path]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("T\nhttps://t.com\n")
    assert "tests only" in caplog.text  # logged as a warning (stderr outside pytest)
    assert "tvly-secret" not in out + err + caplog.text


def test_second_search_is_served_from_the_cache(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json(
        {"results": [{"url": "https://a.com", "title": "A", "content": "a"}]}
    )
    path = config(tmp_path, httpserver)
    assert main(["search", "q", "--json", "--config", path]) == 0
    assert main(["search", "  Q ", "--json", "--config", path]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["results"] == first["results"]
    assert len(httpserver.log) == 1
    assert (tmp_path / "server.db").exists()


@pytest.mark.parametrize("server", ["ftp://127.0.0.1:8787", "http://", "127.0.0.1:8787"])
def test_a_server_without_scheme_is_a_usage_error(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    said = f"--server must be a URL such as http://127.0.0.1:8787, not {server!r}"
    assert main(["search", "q", "--server", server]) == 2
    assert capsys.readouterr().err == f"sift search: {said}\n"
    assert main(["search", "q", "--server", server, "--json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"error": said}


def test_limit_is_an_alias_of_k_that_help_does_not_show(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_data(
        fixture_bytes("searxng/wal-typed-and-legacy.json"),
        content_type="application/json",
    )
    path = config(tmp_path, httpserver)
    assert main(["search", "wal", "--k", "1", "--json", "--config", path]) == 0
    by_k = json.loads(capsys.readouterr().out)["results"]
    assert main(["search", "wal", "--limit", "1", "--json", "--config", path]) == 0
    by_limit = json.loads(capsys.readouterr().out)["results"]
    assert len(by_k) == 1 and by_limit == by_k
    with pytest.raises(SystemExit) as exited:
        main(["search", "--help"])
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    assert "--k N" in help_text and "--limit" not in help_text


# Through the command line, as a person types it.


def test_unquoted_words_are_one_query(tmp_path: Path, httpserver: HTTPServer) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json({"results": []})
    done = sift("search", "sqlite", "wal", "mode", "--config", config(tmp_path, httpserver))
    assert (done.returncode, done.stderr) == (0, "no results\n")
    [(request, _)] = httpserver.log
    assert request.args["q"] == "sqlite wal mode"


def test_a_server_without_scheme_exits_2_as_typed() -> None:
    done = sift("search", "q", "--server", "127.0.0.1:8787")
    assert done.returncode == 2  # not 5: SKILL.md sends exit 5 to the built-in search
    assert done.stderr == (
        "sift search: --server must be a URL such as http://127.0.0.1:8787, not '127.0.0.1:8787'\n"
    )


def test_json_failure_of_the_search_itself(tmp_path: Path, httpserver: HTTPServer) -> None:
    httpserver.expect_request("/searxng/search").respond_with_data("no", status=500)
    done = sift("search", "q", "--json", "--config", config(tmp_path, httpserver))
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"error": "no search results: every source failed"}
    assert done.stderr.splitlines() == [
        "sift: warning: searxng: 500",
        "sift search: no search results: every source failed",
    ]


def test_a_secret_env_open_to_others_is_warned_about_once(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json({"results": []})
    path = config(tmp_path, httpserver)
    secret = tmp_path / "secret.env"
    secret.chmod(0o644)
    done = sift("search", "q", "--config", path)
    assert done.returncode == 0
    assert done.stderr == (
        f"sift: {secret} has mode 0644, so other users may read its keys: "
        f"run chmod 600 {secret}\nno results\n"
    )
    secret.chmod(0o600)
    assert sift("search", "q", "--config", path).stderr == "no results\n"


def test_a_configured_secret_env_that_is_missing_is_warned_about_once(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json({"results": []})
    path = config(tmp_path, httpserver)
    secret = tmp_path / "secret.env"
    secret.unlink()
    done = sift("search", "q", "--config", path)
    assert done.returncode == 0
    assert done.stderr == (
        f"sift: {secret} (server.secret_env) does not exist: keys come from the environment "
        "only\nno results\n"
    )


def test_the_default_secret_env_may_be_missing_quietly(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    httpserver.expect_request("/searxng/search").respond_with_json({"results": []})
    path = tmp_path / "config.toml"
    path.write_text(
        f'[server]\ndb = "{tmp_path / "server.db"}"\n'
        f'[search.searxng]\nenabled = true\nurl = "{httpserver.url_for("searxng")}"\n'
    )
    done = sift("search", "q", "--config", str(path))
    assert (done.returncode, done.stderr) == (0, "no results\n")


class Terminal(io.StringIO):
    """Standard output as a terminal: sift neutralises what a terminal would act on."""

    def isatty(self) -> bool:
        return True


def test_terminal_escapes_in_titles_never_reach_a_terminal(
    tmp_path: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    title = "Clear\x1b[2J and copy\x1b]52;c;cm0gLXJmIH4=\x07 and \x9b31m"
    httpserver.expect_request("/searxng/search").respond_with_json(
        {"results": [{"url": "https://a.com", "title": title, "content": "a", "score": 1}]}
    )
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    assert main(["search", "q", "--config", config(tmp_path, httpserver)]) == 0
    first = terminal.getvalue().splitlines()[0]
    assert first == "Clear\ufffd[2J and copy\ufffd]52;c;cm0gLXJmIH4=\ufffd and \ufffd31m"
