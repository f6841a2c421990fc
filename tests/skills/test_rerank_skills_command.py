"""`sift rerank-skills`: output, tool errors, the `--stdio` session and the reranker hook."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clikit import sift
from pytest_httpserver import HTTPServer

from siftlib.cli import main
from siftlib.commands.rerank_skills import warn
from siftlib.errors import ToolError
from siftlib.skills.answer import render_json
from siftlib.skills.catalog import Catalog
from siftlib.skills.consent import RerankSettings
from siftlib.skills.keyword import SkillResult, keyword_search
from siftlib.skills.session import Session, Snapshot, serve_stdio

from .systemone_fake import FakeSystemOne, ranked, serve

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "ts-secret-key-0123456789"
# These tests pin the keyword baseline (spec §1), which local mode replaced as the default.
KEYWORD = ("--mode", "keyword")
READ_HINT = (
    "Read the SKILL.md of the skill that fits before using it;"
    " relative paths inside it resolve against its base directory."
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["rerank-skills", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def stdio(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    lines: list[str],
    *argv: str,
) -> tuple[int, list[dict[str, Any]], str]:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, err = run(capsys, "--stdio", *argv)
    return code, [json.loads(line) for line in out.splitlines()], err


@pytest.fixture
def config(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "global-config.toml"
        path.write_text(text)
        return path

    return write


# --- one search ------------------------------------------------------------------------


def test_text_output(capsys: pytest.CaptureFixture[str], catalog_dir: Path, tmp_path: Path) -> None:
    code, out, err = run(
        capsys,
        "pdf",
        "--limit",
        "1",
        *KEYWORD,
        "--skills-dir",
        str(catalog_dir),
        "--cwd",
        str(tmp_path),
    )
    assert code == 0
    assert out == (
        f"Found 2 matching skills, showing the best 1. {READ_HINT}\n"
        "\n"
        "1. pdf: Read, merge and split PDF documents.\n"
        f"   Read: {catalog_dir / 'pdf' / 'SKILL.md'}\n"
        f"   Base directory: {catalog_dir / 'pdf'}\n"
    )
    # The fixture catalog's own diagnostics go to stderr.
    assert "Bad_Name" in err and "broken" in err


def test_words_join_into_one_query(capsys: pytest.CaptureFixture[str], catalog_dir: Path) -> None:
    code, out, _ = run(capsys, "git", "worktree", "--skills-dir", str(catalog_dir))
    assert code == 0 and out.startswith(
        f"Found 1 matching skill. {READ_HINT}\n\n1. using-git-worktrees"
    )


def test_no_match_text(capsys: pytest.CaptureFixture[str], catalog_dir: Path) -> None:
    code, out, _ = run(capsys, "quantum chromodynamics", "--skills-dir", str(catalog_dir))
    assert (code, out) == (0, "No matching skills found.\n")


def test_json_output(capsys: pytest.CaptureFixture[str], catalog_dir: Path) -> None:
    code, out, _ = run(capsys, "Form fields", "--json", *KEYWORD, "--skills-dir", str(catalog_dir))
    assert code == 0
    answer = json.loads(out)
    forms, xlsx = catalog_dir / "pdf-forms", catalog_dir / "xlsx"
    assert answer["details"] == {
        "matches": [
            {
                "name": "pdf-forms",
                "description": "Fill in PDF forms and extract form fields.",
                "filePath": str(forms / "SKILL.md"),
                "baseDir": str(forms),
            },
            {
                "name": "xlsx",
                "description": "Create and edit Excel workbooks, formulas and charts.",
                "filePath": str(xlsx / "SKILL.md"),
                "baseDir": str(xlsx),
            },
        ],
        "total": 2,
        "mode": "keyword",  # every answer says how it was ranked
    }
    (content,) = answer["content"]
    assert content["type"] == "text" and content["text"].startswith("Found 2 matching skills.")
    assert str(forms / "SKILL.md") in content["text"] and str(xlsx) in content["text"]
    assert list(answer) == ["content", "details"]


def test_json_no_match(capsys: pytest.CaptureFixture[str], catalog_dir: Path) -> None:
    _, out, _ = run(capsys, "zzz", "--json", *KEYWORD, "--skills-dir", str(catalog_dir))
    assert json.loads(out) == {
        "content": [{"type": "text", "text": "No matching skills found."}],
        "details": {"matches": [], "total": 0, "mode": "keyword"},
    }


def test_project_skills_come_from_cwd(
    capsys: pytest.CaptureFixture[str], write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    write_skill(tmp_path / ".claude" / "skills", "deploy", "name: deploy", "description: Ship it.")
    code, out, _ = run(capsys, "deploy", "--json", "--cwd", str(tmp_path / "sub"))
    assert code == 0
    assert [m["name"] for m in json.loads(out)["details"]["matches"]] == ["deploy"]


def test_user_skills_come_from_home(
    capsys: pytest.CaptureFixture[str],
    write_skill: Callable[..., Path],
    user_home: Path,
    tmp_path: Path,
) -> None:
    write_skill(user_home / ".pi" / "agent" / "skills", "mine", "description: Mine alone.")
    _, out, _ = run(capsys, "mine", "--json", "--cwd", str(tmp_path))
    assert json.loads(out)["details"]["total"] == 1


def test_shadowed_skill_diagnostic_goes_to_stderr(
    capsys: pytest.CaptureFixture[str], write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path / "a", "x", "name: x", "description: first")
    write_skill(tmp_path / "b", "x", "name: x", "description: second")
    code, out, err = run(
        capsys,
        "x",
        "--json",
        "--skills-dir",
        str(tmp_path / "a"),
        "--skills-dir",
        str(tmp_path / "b"),
    )
    assert code == 0
    assert json.loads(out)["details"]["matches"][0]["description"] == "first"
    assert f"{tmp_path / 'b' / 'x' / 'SKILL.md'}: skill 'x' is shadowed by" in err


# --- tool errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["abc", "0", "21", "1.5", "-1", "", " ", "5x", "٣"])
def test_bad_limit_json(capsys: pytest.CaptureFixture[str], catalog_dir: Path, limit: str) -> None:
    code, out, err = run(
        capsys, "pdf", "--json", f"--limit={limit}", "--skills-dir", str(catalog_dir)
    )
    assert code == 2
    assert json.loads(out) == {"error": "limit must be an integer from 1 to 20"}
    assert err == "sift rerank-skills: limit must be an integer from 1 to 20\n"  # as every command


@pytest.mark.parametrize("limit", ["1", "20", "07"])
def test_good_limit(capsys: pytest.CaptureFixture[str], catalog_dir: Path, limit: str) -> None:
    code, out, _ = run(
        capsys, "and", "--json", *KEYWORD, "--limit", limit, "--skills-dir", str(catalog_dir)
    )
    assert code == 0
    assert len(json.loads(out)["details"]["matches"]) == min(int(limit), 5)


def test_bad_limit_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "pdf", "--limit", "abc")
    assert (code, out) == (2, "")
    assert err == "sift rerank-skills: limit must be an integer from 1 to 20\n"


@pytest.mark.parametrize("query", [[], ["  "], ["?!"], ["_-_", "..."]])
def test_query_without_terms(capsys: pytest.CaptureFixture[str], query: list[str]) -> None:
    code, out, err = run(capsys, *query, "--json")
    assert code == 2 and json.loads(out) == {
        "error": "the query has no search terms (letters or digits)"
    }
    code, out, err = run(capsys, *query)
    assert code == 2 and out == "" and err.count("\n") == 1 and "no search terms" in err


def test_cwd_must_be_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "pdf", "--json", "--cwd", str(tmp_path / "absent"))
    assert code == 2 and "is not a directory" in json.loads(out)["error"]


def test_stdio_takes_no_positional_query(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--stdio", "pdf")
    assert code == 2 and out == "" and "--stdio" in err


# --- consent, keys and the network --------------------------------------------------------

NON_CONSENT = {
    "no config": (None, SECRET),
    "no table": ("[search]\nk = 3\n", SECRET),
    "disabled": ("[skill_search.reranking]\nenabled = false\n", SECRET),
    "invalid": ("[skill_search.reranking]\nenabled = true\ntimeout_ms = 0\n", SECRET),
    "unknown key": ("[skill_search.reranking]\nenabled = true\nurl = 'x'\n", SECRET),
    "not literal": ("[skill_search.reranking]\nenabled = 'true'\n", SECRET),
    "no key": ("[skill_search.reranking]\nenabled = true\n", None),
    "blank key": ("[skill_search.reranking]\nenabled = true\n", "   "),
}


@pytest.mark.parametrize("case", sorted(NON_CONSENT))
def test_non_consent_cases_make_no_network_activity(
    case: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    httpserver: HTTPServer,
    catalog_dir: Path,
    tmp_path: Path,
    config: Callable[[str], Path],
    no_network: list[object],
) -> None:
    text, key = NON_CONSENT[case]
    if key is not None:
        monkeypatch.setenv("TYPESAFE_API_KEY", key)
    monkeypatch.setenv("TYPESAFE_BASE_URL", httpserver.url_for("/"))
    config_args = ["--config", str(config(text))] if text is not None else []

    # The snapshot a session searches with has no usable consent...
    session, _ = Session.open(
        config_path=config(text) if text is not None else tmp_path / "absent.toml",
        skills_dirs=[catalog_dir],
        cwd=tmp_path,
    )
    assert not (session.snapshot.settings.enabled and session.snapshot.key)

    # ...and the command, one-shot and in a session, opens no connection at all.
    code, out, err = run(
        capsys, "fill pdf form", "--json", *KEYWORD, "--skills-dir", str(catalog_dir), *config_args
    )
    assert code == 0 and json.loads(out)["details"]["total"] == 3
    code, answers, err2 = stdio(
        capsys,
        monkeypatch,
        ['{"query": "fill pdf form"}', '{"op": "reload"}', '{"query": "xlsx"}'],
        "--skills-dir",
        str(catalog_dir),
        *config_args,
    )
    assert code == 0 and len(answers) == 3
    assert no_network == []
    assert httpserver.log == []
    assert SECRET not in out + err + err2 + json.dumps(answers)


def test_consent_without_provider_returns_keyword_result(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    config: Callable[[str], Path],
    no_network: list[object],
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
    # The longest timeout: a deadline passed while a loaded machine sets up the client would
    # end the search before its one (refused) connection attempt.
    path = config("[skill_search.reranking]\nenabled = true\ntimeout_ms = 10000\n")
    code, out, err = run(
        capsys,
        "and",
        "--json",
        "--limit",
        "2",
        "--skills-dir",
        str(catalog_dir),
        "--config",
        str(path),
    )
    expected = keyword_search(
        Session.open(config_path=path, skills_dirs=[catalog_dir], cwd=catalog_dir)[
            0
        ].snapshot.catalog,
        "and",
        2,
    )
    # The keyword result, saying why reranking did not decide it, and said once on stderr.
    assert code == 0 and json.loads(out) == render_json(replace(expected, fallback="network"))
    assert err.count("reranking failed (network); showing keyword results") == 1
    assert SECRET not in out + err
    # Opted in with a key: one provider call (refused here), then the keyword fallback.
    assert [attempt[0] for attempt in no_network] == [("api.typesafe.ai", 443)]


def test_project_config_cannot_opt_in(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".sift").mkdir()
    (tmp_path / ".sift" / "config.toml").write_text("[skill_search.reranking]\nenabled = true\n")
    session, diagnostics = Session.open(
        config_path=tmp_path / "absent.toml", skills_dirs=[catalog_dir], cwd=tmp_path
    )
    assert session.snapshot.settings.enabled is False and session.snapshot.key is None
    code, _, err = run(capsys, "pdf", "--skills-dir", str(catalog_dir), "--cwd", str(tmp_path))
    assert code == 0 and "in a project config is ignored" in err


def test_invalid_config_keeps_keyword_search_working(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, config: Callable[[str], Path]
) -> None:
    path = config(
        f"[skill_search.reranking]\nenabled = true\nmodel = '{SECRET}' \nbogus = 1\n"
        "[search]\nk = 'x'\n"
    )
    code, out, err = run(
        capsys, "pdf", "--json", *KEYWORD, "--skills-dir", str(catalog_dir), "--config", str(path)
    )
    assert code == 0 and json.loads(out)["details"]["total"] == 2
    assert "key 'bogus'" in err and "skill reranking is disabled" in err
    assert SECRET not in err


# --- the reranker hook ------------------------------------------------------------------


class FakeReranker:
    """Stands in for part 2's reranker: reverses the baseline and records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Catalog, str, int, SkillResult]] = []
        self.cancels: list[threading.Event | None] = []
        self.closed = 0

    def search(
        self,
        catalog: Catalog,
        query: str,
        limit: int,
        baseline: SkillResult,
        *,
        cancel: threading.Event | None = None,
    ) -> SkillResult:
        self.calls.append((catalog, query, limit, baseline))
        self.cancels.append(cancel)
        return SkillResult(matches=baseline.matches[::-1], total=baseline.total)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def fixture_catalog(catalog_dir: Path, tmp_path: Path) -> Catalog:
    from siftlib.skills.catalog import discover

    return discover(skills_dirs=[catalog_dir], cwd=tmp_path)


def test_reranker_is_used_only_with_consent_and_key(fixture_catalog: Catalog) -> None:
    baseline = keyword_search(fixture_catalog, "pdf", 5)
    for settings, key, fallback in [
        (RerankSettings(), SECRET, None),
        (RerankSettings(enabled=True), None, "missing_key"),
        (RerankSettings(enabled=True), "", "missing_key"),
    ]:
        fake = FakeReranker()
        session = Session(Snapshot(fixture_catalog, settings, key, mode="keyword"), reranker=fake)
        assert session.search("pdf", 5) == replace(baseline, fallback=fallback)
        assert fake.calls == []

    fake = FakeReranker()
    session = Session(
        Snapshot(fixture_catalog, RerankSettings(enabled=True), SECRET), reranker=fake
    )
    result = session.search("pdf", 5)
    assert [s.name for s in result.matches] == ["pdf-forms", "pdf"]
    assert fake.calls == [(fixture_catalog, "pdf", 5, baseline)]
    session.close()
    assert fake.closed == 1


def test_a_search_hands_its_cancel_event_to_the_reranker(fixture_catalog: Catalog) -> None:
    fake = FakeReranker()
    session = Session(
        Snapshot(fixture_catalog, RerankSettings(enabled=True), SECRET), reranker=fake
    )
    cancel = threading.Event()
    session.search("pdf", 5, cancel=cancel)
    session.search("pdf", 5)
    assert fake.cancels == [cancel, None]


def test_tool_errors_never_reach_the_reranker(fixture_catalog: Catalog) -> None:
    fake = FakeReranker()
    session = Session(
        Snapshot(fixture_catalog, RerankSettings(enabled=True), SECRET), reranker=fake
    )
    with pytest.raises(ToolError):
        session.search("?!", 5)
    with pytest.raises(ToolError):
        session.search("pdf", 0)
    assert fake.calls == []


def test_snapshot_never_shows_the_key(fixture_catalog: Catalog) -> None:
    assert SECRET not in repr(Snapshot(fixture_catalog, RerankSettings(enabled=True), SECRET))


def test_session_open_reads_the_key_only_with_consent(
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    tmp_path: Path,
    config: Callable[[str], Path],
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", f" {SECRET} ")
    on = config("[skill_search.reranking]\nenabled = true\n")
    session, _ = Session.open(config_path=on, skills_dirs=[catalog_dir], cwd=tmp_path)
    assert session.snapshot.key == SECRET
    off = config("[skill_search.reranking]\nenabled = false\n")
    session, _ = Session.open(config_path=off, skills_dirs=[catalog_dir], cwd=tmp_path)
    assert session.snapshot.key is None


# --- the --stdio session --------------------------------------------------------------------


def test_stdio_session(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    write_skill: Callable[..., Path],
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", "name: pdf", "description: Read PDF files.")
    lines = [
        '{"query": "pdf"}',
        "",
        "not json",
        "[1, 2]",
        '{"op": "restart"}',
        '{"limit": 3}',
        '{"query": 7}',
        '{"query": "pdf", "limit": 0}',
        '{"query": "pdf", "limit": "5"}',
        '{"query": "?!"}',
        '{"query": "excel"}',
        '{"op": "reload"}',
        '{"query": "excel", "limit": 1}',
    ]

    # The reload must see a skill written after the session started, so write it on reading.
    class Stdin(io.RawIOBase):
        def __init__(self) -> None:
            self.lines = [(line + "\n").encode() for line in lines]

        def readable(self) -> bool:
            return True

        def readline(self, size: int | None = -1) -> bytes:
            if not self.lines:
                return b""
            line = self.lines.pop(0)
            if b"reload" in line:
                write_skill(root, "xlsx", "name: xlsx", "description: Excel workbooks.")
            return line

    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=Stdin()))
    code, out, _ = run(capsys, "--stdio", *KEYWORD, "--skills-dir", str(root))
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert len(answers) == 12  # the blank line is skipped
    assert answers[0]["details"]["matches"][0]["name"] == "pdf"
    assert answers[1] == {"error": "each line must be one JSON object in UTF-8"}
    assert answers[2] == {"error": "each line must be one JSON object in UTF-8"}
    assert answers[3] == {"error": 'the only op is "reload"'}
    assert (
        answers[4]
        == answers[5]
        == {"error": 'a request needs a "query" string (or "op": "reload")'}
    )
    assert answers[6] == answers[7] == {"error": "limit must be an integer from 1 to 20"}
    assert answers[8] == {"error": "the query has no search terms (letters or digits)"}
    assert answers[9]["details"] == {"matches": [], "total": 0, "mode": "keyword"}
    assert answers[10] == {"ok": True}
    assert [m["name"] for m in answers[11]["details"]["matches"]] == ["xlsx"]


def test_stdio_bad_utf8_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"query": "caf\xe9"}\n{"query": "ok"}\n'))
    )
    code, out, _ = run(capsys, "--stdio")
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and answers[0] == {"error": "each line must be one JSON object in UTF-8"}
    assert answers[1]["details"]["total"] == 0


def test_stdio_answers_concurrently_in_request_order(fixture_catalog: Catalog) -> None:
    both_inside = threading.Barrier(2, timeout=10)
    threads: set[str] = set()

    class MeetingReranker(FakeReranker):
        def search(
            self,
            catalog: Catalog,
            query: str,
            limit: int,
            baseline: SkillResult,
            *,
            cancel: threading.Event | None = None,
        ) -> SkillResult:
            threads.add(threading.current_thread().name)
            if query in ("pdf", "test"):
                both_inside.wait()  # returns only if both searches run at the same time
            return super().search(catalog, query, limit, baseline, cancel=cancel)

    reranker = MeetingReranker()
    snapshot = Snapshot(fixture_catalog, RerankSettings(enabled=True), SECRET)
    queries = ["pdf", "test", *[f"q{n} and" for n in range(40)]]
    stdin = io.BytesIO("".join(json.dumps({"query": q}) + "\n" for q in queries).encode())
    stdout = io.StringIO()
    assert (
        serve_stdio(lambda: (Session(snapshot, reranker=reranker), []), stdin, stdout, warn=warn)
        == 0
    )
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert len(answers) == len(queries) and len(threads) >= 2
    assert [m["name"] for m in answers[0]["details"]["matches"]] == ["pdf-forms", "pdf"]
    assert [m["name"] for m in answers[1]["details"]["matches"]] == [
        "systematic-debugging",
        "webapp-testing",
    ]
    assert all(a["details"]["total"] == 5 for a in answers[2:])
    assert reranker.closed == 1  # at EOF


def test_reload_closes_the_previous_session(fixture_catalog: Catalog) -> None:
    opened: list[FakeReranker] = []

    def open_session() -> tuple[Session, list[str]]:
        opened.append(FakeReranker())
        snapshot = Snapshot(fixture_catalog, RerankSettings(enabled=True), SECRET)
        return Session(snapshot, reranker=opened[-1]), []

    stdin = io.BytesIO(b'{"query": "pdf"}\n{"op": "reload"}\n{"query": "pdf"}\n')
    stdout = io.StringIO()
    serve_stdio(open_session, stdin, stdout, warn=warn)
    assert len(opened) == 2
    assert [len(r.calls) for r in opened] == [1, 1]
    assert [r.closed for r in opened] == [1, 1]
    assert stdout.getvalue().splitlines()[1] == '{"ok": true}'


def test_stdio_in_a_real_process(catalog_dir: Path, tmp_path: Path, user_home: Path) -> None:
    requests = [{"query": "pdf", "limit": 1}, {"op": "reload"}, {"query": "and"}] * 20
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "sift.py"),
            "rerank-skills",
            "--stdio",
            *KEYWORD,
            "--skills-dir",
            str(catalog_dir),
        ],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            "HOME": str(user_home),
            "PATH": "/usr/bin:/bin",
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        },
        timeout=60,
    )
    assert proc.returncode == 0
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(requests)
    for request, answer in zip(requests, answers, strict=True):
        if "op" in request:
            assert answer == {"ok": True}
        elif request["query"] == "pdf":
            assert [m["name"] for m in answer["details"]["matches"]] == ["pdf"]
        else:
            assert answer["details"]["total"] == 5


# --- eval is a command of its own -------------------------------------------------------------


def test_eval_is_handed_to_its_own_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from siftlib.commands import rerank_skills_eval

    seen: list[Any] = []
    monkeypatch.setattr(rerank_skills_eval, "run", lambda args: seen.append(args) or 7)
    code, _, _ = run(capsys, "eval", "--fixtures", "f.jsonl", "--max-requests", "3")
    assert code == 7
    assert seen[0].fixtures == "f.jsonl" and seen[0].max_requests == "3"


@pytest.mark.parametrize("option", ["--fixtures", "--max-requests"])
def test_eval_options_are_refused_on_a_search(
    capsys: pytest.CaptureFixture[str], option: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["rerank-skills", "pdf form", option, "3"])
    assert exited.value.code == 2
    assert f"unrecognized arguments: {option} 3" in capsys.readouterr().err


# As typed, in a subprocess: one grammar with `sift search`.


def test_unquoted_words_and_k_as_typed(
    catalog_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quoted = sift(
        "rerank-skills", "pdf form", "--limit", "1", "--json", "--skills-dir", str(catalog_dir)
    )
    unquoted = sift(
        "rerank-skills", "pdf", "form", "--k", "1", "--json", "--skills-dir", str(catalog_dir)
    )
    assert quoted.returncode == unquoted.returncode == 0
    assert json.loads(unquoted.stdout) == json.loads(quoted.stdout)
    assert len(json.loads(quoted.stdout)["details"]["matches"]) == 1
    with pytest.raises(SystemExit) as exited:  # the help needs no process of its own
        main(["rerank-skills", "--help"])
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    assert "--limit N" in help_text and "--k" not in help_text


def test_a_json_tool_error_speaks_on_both_streams(catalog_dir: Path) -> None:
    done = sift("rerank-skills", "!!", "--json", "--skills-dir", str(catalog_dir))
    assert done.returncode == 2
    message = "the query has no search terms (letters or digits)"
    assert json.loads(done.stdout) == {"error": message}
    assert done.stderr.endswith(f"sift rerank-skills: {message}\n")


@pytest.fixture
def provider() -> Iterator[FakeSystemOne]:
    yield from serve()


def opted_in(tmp_path: Path) -> Path:
    path = tmp_path / "global.toml"
    # A generous deadline: a loaded machine must not turn the fake's answer into a timeout.
    path.write_text("[skill_search.reranking]\nenabled = true\ntimeout_ms = 10000\n")
    return path


def stdio_session(tmp_path: Path, catalog_dir: Path, lines: list[str], **env: str) -> Any:
    return sift(
        "rerank-skills", "--stdio", "--skills-dir", str(catalog_dir), "--cwd", str(tmp_path),
        "--config", str(opted_in(tmp_path)),
        stdin="".join(line + "\n" for line in lines), env={"HOME": str(tmp_path), **env},
    )  # fmt: skip


def test_opted_in_without_a_key_says_so_once_and_in_each_answer(
    tmp_path: Path, catalog_dir: Path
) -> None:
    done = stdio_session(tmp_path, catalog_dir, ['{"query": "pdf"}', '{"query": "slides"}'])
    assert done.returncode == 0
    assert done.stderr.count("reranking is enabled but TYPESAFE_API_KEY is not set") == 1
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["details"]["mode"] for a in answers] == ["keyword", "keyword"]
    assert [a["details"]["fallback"] for a in answers] == ["missing_key", "missing_key"]


def test_a_failing_provider_is_said_once_per_session(
    tmp_path: Path, catalog_dir: Path, provider: FakeSystemOne
) -> None:
    provider.handler = lambda body: (503, b"{}")
    queries = ['{"query": "pdf form"}', '{"query": "slides deck"}', '{"query": "git worktree"}']
    done = stdio_session(
        tmp_path, catalog_dir, queries, TYPESAFE_API_KEY=SECRET, TYPESAFE_BASE_URL=provider.url
    )
    assert done.returncode == 0
    assert done.stderr.count("reranking failed") == 1
    assert (
        done.stderr.count(
            "sift rerank-skills: reranking failed (server_error); showing keyword results"
            " (said once per session)\n"
        )
        == 1
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["details"]["fallback"] for a in answers] == ["server_error"] * 3
    assert {a["details"]["mode"] for a in answers} == {"keyword"}
    assert len(provider.requests) == 3
    assert SECRET not in done.stdout + done.stderr


def test_a_reranked_answer_says_its_mode(
    tmp_path: Path, catalog_dir: Path, provider: FakeSystemOne
) -> None:
    provider.handler = ranked({"pdf-forms": 0.9}, none=0.1)
    done = sift(
        "rerank-skills", "fill in a pdf form", "--json", "--skills-dir", str(catalog_dir),
        "--cwd", str(tmp_path), "--config", str(opted_in(tmp_path)),
        env={"HOME": str(tmp_path), "TYPESAFE_API_KEY": SECRET, "TYPESAFE_BASE_URL": provider.url},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    details = json.loads(done.stdout)["details"]
    assert details["mode"] == "reranked" and "fallback" not in details
    assert details["matches"][0]["name"] == "pdf-forms"


def test_an_empty_catalog_names_the_folders_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "skills"
    empty.mkdir()
    (tmp_path / ".git").mkdir()  # the project ends here
    args = ("rerank-skills", "pdf", "--skills-dir", str(empty), "--cwd", str(tmp_path))
    done = sift(*args, env={"HOME": str(tmp_path)})
    folders = [
        empty,
        *(tmp_path / sub for sub in (".agents/skills", ".pi/agent/skills", ".claude/skills")),
        *(tmp_path / sub for sub in (".agents/skills", ".pi/skills", ".claude/skills")),
    ]
    assert done.returncode == 0
    assert done.stdout == "No skills found in: " + ", ".join(map(str, folders)) + "\n"
    monkeypatch.setenv("HOME", str(tmp_path))  # the JSON answer: in-process is enough
    assert main([*args, "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["content"][0]["text"].startswith("No skills found in: ")
    assert as_json["details"] == {"matches": [], "total": 0, "mode": "local", "selection": "none"}


def test_an_opted_in_session_sets_up_its_client_at_open_without_connecting(
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    config: Callable[[str], Path],
    no_network: list[object],
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
    path = config("[skill_search.reranking]\nenabled = true\n")
    session, _ = Session.open(config_path=path, skills_dirs=[catalog_dir], cwd=catalog_dir)
    try:
        # Ready before the first search, so its deadline goes to the provider (§8) ...
        assert session.reranker is not None and session.reranker._client is not None  # type: ignore[attr-defined]
        assert no_network == []  # ... and yet nothing was sent or connected
    finally:
        session.close()
