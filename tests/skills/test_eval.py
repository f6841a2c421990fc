"""`sift rerank-skills eval`: figures on the fixture set, reranked runs and the request ceiling."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from siftlib.cli import main
from siftlib.skills.consent import RerankSettings
from siftlib.skills.eval import ModeReport, load_catalog, load_fixtures
from siftlib.skills.keyword import keyword_search
from siftlib.skills.shortlist import OutboundRequest, build_request

from .systemone_fake import FakeSystemOne, ranked, serve

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "testdata" / "skills" / "eval" / "queries.jsonl"
CATALOG = FIXTURES.parent / "catalog"


@pytest.fixture
def fake() -> Iterator[FakeSystemOne]:
    yield from serve()


@pytest.fixture(autouse=True)
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from an empty folder, so no project config or skill folder joins in."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(["rerank-skills", "eval", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def opt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeSystemOne) -> Path:
    config = tmp_path / "config.toml"
    config.write_text("[skill_search.reranking]\nenabled = true\n")
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-eval-key")
    monkeypatch.setenv("TYPESAFE_BASE_URL", fake.url)
    return config


def oracle(fixtures: Path) -> Any:
    """A provider that knows the labels: the expected skill, or no-match, at 0.9."""
    labels = {}
    for line in fixtures.read_text().splitlines():
        item = json.loads(line)
        labels[item["query"].strip().lower()] = item["expect"]

    def handle(body: dict[str, Any]) -> Any:
        expect = labels[body["state"]["query"]]
        sent = {candidate["name"] for candidate in body["state"]["candidates"]}
        if expect not in sent:
            return ranked({}, 1.0)(body)
        return ranked({expect: 0.9}, 0.1)(body)

    return handle


def shortlisted_targets() -> int:
    """Count the fixtures whose expected skill is among the candidates sent."""
    catalog = load_catalog([CATALOG])
    count = 0
    for fixture in load_fixtures(FIXTURES, catalog):
        request = build_request(catalog, fixture.query, RerankSettings(enabled=True))
        assert isinstance(request, OutboundRequest)
        count += fixture.expect in {skill.name for skill in request.candidates}
    return count


class TestFixtureSet:
    def test_the_fixture_set_has_the_promised_shape(self) -> None:
        catalog = load_catalog([CATALOG])
        fixtures = load_fixtures(FIXTURES, catalog)
        assert len(catalog.skills) == 62  # 63 folders, one with disable-model-invocation
        assert len(fixtures) == 150
        assert sum(f.expect is None for f in fixtures) == 50
        assert {f.expect for f in fixtures} - {None} == {s.name for s in catalog.skills}
        assert catalog.diagnostics == ()

    def test_keyword_figures_on_the_fixture_set(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, report = run_json(capsys, "--fixtures", str(FIXTURES))
        assert code == 0
        catalog = load_catalog([CATALOG])
        hits = misses = 0
        for line in FIXTURES.read_text().splitlines():
            item = json.loads(line)
            result = keyword_search(catalog, item["query"], 5)
            if item["expect"] is None:
                misses += not result.matches
            else:
                hits += bool(result.matches) and result.matches[0].name == item["expect"]
        keyword = report["modes"]["keyword"]
        assert keyword["selection"] == [hits, 100]
        assert keyword["no_match"] == [misses, 50]
        assert keyword["selection_accuracy"] == hits / 100
        # The baseline any reranker must beat (see `make bench`).
        assert (hits, misses) == (48, 0)
        assert keyword["requests"] == keyword["input_tokens"] == 0
        assert 0 <= keyword["p50_ms"] <= keyword["p90_ms"]
        assert set(report["modes"]) == {"keyword"}

    def test_text_report(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["rerank-skills", "eval", "--fixtures", str(FIXTURES)]) == 0
        out = capsys.readouterr().out
        assert "150 labelled queries (100 expect a skill, 50 expect none) over 62 skills" in out
        assert "keyword       150      48.0%      0.0%" in out
        assert "reranked: not run" in out


class TestSmallFixtures:
    def write(self, tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
        for name, description in {
            "pdf-merge": "Merge PDF files.",
            "csv-clean": "Clean CSV files.",
            "git-bisect": "Find the commit that broke a test.",
        }.items():
            folder = tmp_path / "set" / "catalog" / name
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: {description}\n---\n"
            )
        path = tmp_path / "set" / "queries.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path

    def test_hand_counted_figures(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = self.write(
            tmp_path,
            [
                {"query": "merge pdf", "expect": "pdf-merge"},  # hit
                {"query": "clean files", "expect": "csv-clean"},  # csv-clean (8+2+2) first: hit
                {"query": "which commit broke it", "expect": "pdf-merge"},  # git-bisect first: miss
                {"query": "zebra", "expect": None},  # nothing matches: no-match hit
                {"query": "files", "expect": None},  # two matches: no-match miss
            ],
        )
        code, report = run_json(capsys, "--fixtures", str(path))
        assert code == 0
        keyword = report["modes"]["keyword"]
        assert keyword["selection"] == [2, 3] and keyword["no_match"] == [1, 2]
        assert report["skills"] == 3 and report["expect_none"] == 2

    def test_skills_dir_names_the_catalog(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = self.write(tmp_path, [{"query": "merge pdf", "expect": "pdf-merge"}])
        moved = tmp_path / "queries-elsewhere.jsonl"
        path.rename(moved)
        catalog = tmp_path / "set" / "catalog"
        code, report = run_json(capsys, "--fixtures", str(moved), "--skills-dir", str(catalog))
        assert code == 0 and report["skills"] == 3
        assert report["modes"]["keyword"]["selection"] == [1, 1]

    def test_without_a_fixture_catalog_the_search_catalog_is_used(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = self.write(tmp_path, [{"query": "merge pdf", "expect": "pdf-merge"}])
        project = tmp_path / "project"
        (project / ".agents").mkdir(parents=True)
        (tmp_path / "set" / "catalog").rename(project / ".agents" / "skills")
        code, report = run_json(capsys, "--fixtures", str(path), "--cwd", str(project))
        assert code == 0 and report["skills"] == 3

    @pytest.mark.parametrize(
        ("line", "message"),
        [
            ("not json", "queries.jsonl:2: not a JSON object"),
            ('{"query": "x"}', "queries.jsonl:2: expected"),
            ('{"query": "!!", "expect": null}', "queries.jsonl:2: the query has no search terms"),
            ('{"query": "x", "expect": "nope"}', "expected skill 'nope' is not in the catalog"),
            ('{"query": "x", "expect": 3}', "expect must be a skill name or null"),
        ],
    )
    def test_bad_fixture_lines(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
    ) -> None:
        path = self.write(tmp_path, [{"query": "merge pdf", "expect": "pdf-merge"}])
        path.write_text(path.read_text() + line + "\n")
        code, report = run_json(capsys, "--fixtures", str(path))
        assert code == 2 and message in report["error"]

    @pytest.mark.parametrize(
        "argv",
        [
            [],
            ["--fixtures", "missing.jsonl"],
            ["--fixtures", "x", "--max-requests", "-1"],
        ],
    )
    def test_bad_arguments(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["rerank-skills", "eval", *argv]) == 2
        assert "sift rerank-skills eval:" in capsys.readouterr().err

    def test_a_stray_query_is_refused_by_the_parser(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["rerank-skills", "eval", "stray-query", "--fixtures", "x"])
        assert exited.value.code == 2
        assert "sift rerank-skills eval: error: unrecognized arguments" in capsys.readouterr().err

    def test_percentiles_are_nearest_rank(self) -> None:
        report = ModeReport("keyword", latencies_ms=[float(v) for v in range(10, 0, -1)])
        assert (report.percentile_ms(50), report.percentile_ms(90)) == (5.0, 9.0)
        assert ModeReport("keyword").percentile_ms(50) is None


class TestReranked:
    def test_reranked_mode_when_opted_in(
        self,
        tmp_path: Path,
        fake: FakeSystemOne,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        config = opt_in(tmp_path, monkeypatch, fake)
        fake.handler = oracle(FIXTURES)
        code, report = run_json(capsys, "--config", str(config), "--fixtures", str(FIXTURES))
        assert code == 0
        reranked = report["modes"]["reranked"]
        # Even a perfect provider can only pick a skill the shortlist sent it.
        shortlisted = shortlisted_targets()
        assert reranked["selection"] == [shortlisted, 100] and reranked["no_match"] == [50, 50]
        assert reranked["requests"] == len(fake.requests) == 150
        assert (reranked["input_tokens"], reranked["output_tokens"]) == (321 * 150, 7 * 150)
        assert reranked["decisions"] == {"accepted": shortlisted, "no_match": 150 - shortlisted}
        assert report["modes"]["keyword"]["selection"] == [48, 100]
        assert all(seen.sdk_error is None for seen in fake.requests)

    @pytest.mark.parametrize("ceiling", [0, 7])
    def test_max_requests_is_a_hard_ceiling(
        self,
        tmp_path: Path,
        fake: FakeSystemOne,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        ceiling: int,
    ) -> None:
        config = opt_in(tmp_path, monkeypatch, fake)
        fake.handler = oracle(FIXTURES)
        code, report = run_json(
            capsys,
            "--config",
            str(config),
            "--fixtures",
            str(FIXTURES),
            "--max-requests",
            str(ceiling),
        )
        assert code == 0
        assert len(fake.requests) == ceiling
        reranked = report["modes"]["reranked"]
        assert reranked["requests"] == ceiling and reranked["queries"] == ceiling
        assert reranked["stopped_at_ceiling"] is True
        assert report["modes"]["keyword"]["queries"] == 150

    def test_failures_count_as_the_keyword_baseline(
        self,
        tmp_path: Path,
        fake: FakeSystemOne,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        config = opt_in(tmp_path, monkeypatch, fake)
        fake.handler = lambda body: (503, b"{}")
        code, report = run_json(
            capsys, "--config", str(config), "--fixtures", str(FIXTURES), "--max-requests", "20"
        )
        reranked, keyword = report["modes"]["reranked"], report["modes"]["keyword"]
        assert reranked["decisions"] == {"failure": 20}
        assert reranked["input_tokens"] == 0
        assert code == 0 and keyword["queries"] == 150
