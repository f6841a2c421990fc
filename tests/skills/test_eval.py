"""`sift rerank-skills eval`: figures on the fixture set, reranked runs and the request ceiling."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import sift

from siftlib.cli import main
from siftlib.skills.catalog import Catalog
from siftlib.skills.consent import RerankSettings
from siftlib.skills.eval import ModeReport
from siftlib.skills.fixtures import load_catalog, load_fixtures
from siftlib.skills.keyword import keyword_search
from siftlib.skills.local import local_search
from siftlib.skills.shortlist import OutboundRequest, build_request
from siftlib.skills.text import terms

from .conftest import write_real_catalog
from .systemone_fake import FakeSystemOne, ranked, serve

REPO = Path(__file__).resolve().parents[2]
SETS = REPO / "testdata" / "skills"
FIXTURES = SETS / "eval" / "dev.jsonl"
HELD_OUT = SETS / "eval" / "heldout.jsonl"
MIXED = SETS / "eval" / "heldout_mixed.jsonl"
REAL_MIXED = SETS / "realcatalog" / "heldout_mixed.jsonl"
REAL_DEV_MIXED2 = SETS / "realcatalog" / "dev_mixed2.jsonl"
CATALOG = FIXTURES.parent / "catalog"
REAL_CATALOG = REPO.parent / "shared" / "realdata" / "skills" / "catalog.json"


@pytest.fixture
def fake() -> Iterator[FakeSystemOne]:
    yield from serve()


@pytest.fixture(scope="module")
def dev_catalog() -> Catalog:
    """The fixture set's catalog, loaded once: the tests only read it."""
    return load_catalog([CATALOG])


@pytest.fixture(scope="module")
def real_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real catalog beside the clone, written once as skill folders; skipped when absent."""
    if not REAL_CATALOG.is_file():
        pytest.skip(f"{REAL_CATALOG} is absent: the real-catalog queries need the shared data")
    root = tmp_path_factory.mktemp("real-skills")
    write_real_catalog(json.loads(REAL_CATALOG.read_text(encoding="utf-8")), root)
    return root


@pytest.fixture(scope="module")
def real_catalog(real_root: Path) -> Catalog:
    """The real catalog, loaded once from its folders."""
    return load_catalog([real_root])


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
    # The longest timeout allowed: the first search's deadline also covers importing and
    # setting up the HTTP client, which a loaded machine can stretch past the 1 s default.
    config.write_text("[skill_search.reranking]\nenabled = true\ntimeout_ms = 10000\n")
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


def shortlisted_targets(catalog: Catalog) -> int:
    """Count the fixtures whose expected skill is among the candidates sent."""
    count = 0
    for fixture in load_fixtures(FIXTURES, catalog):
        request = build_request(catalog, fixture.query, RerankSettings(enabled=True))
        assert isinstance(request, OutboundRequest)
        count += fixture.expect in {skill.name for skill in request.candidates}
    return count


def write_small_set(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    """Write a three-skill catalog and `lines` as its fixtures file; return the file."""
    for name, description in {
        "pdf-merge": "Merge PDF files.",
        "csv-clean": "Clean CSV files.",
        "git-bisect": "Find the commit that broke a test.",
    }.items():
        folder = tmp_path / "set" / "catalog" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n")
    path = tmp_path / "set" / "queries.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# Ten queries of both kinds for the request-ceiling and failure tests: what they prove does
# not need the 194 of the fixture set, each of which runs in keyword and local mode too.
TEN = [
    {"query": "merge pdf", "expect": "pdf-merge"},
    {"query": "clean csv files", "expect": "csv-clean"},
    {"query": "which commit broke the test", "expect": "git-bisect"},
    {"query": "zebra crossing", "expect": None},
    {"query": "combine two pdf files", "expect": "pdf-merge"},
    {"query": "weather tomorrow", "expect": None},
    {"query": "tidy a csv", "expect": "csv-clean"},
    {"query": "bisect a regression", "expect": "git-bisect"},
    {"query": "bake bread", "expect": None},
    {"query": "merge the pdf reports", "expect": "pdf-merge"},
]


class TestFixtureSet:
    def test_the_fixture_set_has_the_promised_shape(self, dev_catalog: Catalog) -> None:
        catalog = dev_catalog
        fixtures = load_fixtures(FIXTURES, catalog)
        assert len(catalog.skills) == 62  # 63 folders, one with disable-model-invocation
        assert len(fixtures) == 194
        assert sum(f.expect is None for f in fixtures) == 60
        assert {f.expect for f in fixtures} - {None} == {s.name for s in catalog.skills}
        assert catalog.diagnostics == ()

    def test_keyword_figures_on_the_fixture_set(
        self, capsys: pytest.CaptureFixture[str], dev_catalog: Catalog
    ) -> None:
        code, report = run_json(capsys, "--fixtures", str(FIXTURES))
        assert code == 0
        catalog = dev_catalog
        hits = misses = 0
        for line in FIXTURES.read_text().splitlines():
            item = json.loads(line)
            result = keyword_search(catalog, item["query"], 5)
            if item["expect"] is None:
                misses += not result.matches
            else:
                hits += bool(result.matches) and result.matches[0].name == item["expect"]
        keyword = report["modes"]["keyword"]
        assert keyword["selection"] == [hits, 134]
        assert keyword["no_match"] == [misses, 60]
        assert keyword["selection_accuracy"] == hits / 134
        # The baseline any reranker must beat (see `make bench`).
        assert (hits, misses) == (52, 0)
        assert keyword["requests"] == keyword["input_tokens"] == 0
        assert 0 <= keyword["p50_ms"] <= keyword["p90_ms"]
        assert set(report["modes"]) == {"keyword", "local"}

    def test_text_report(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["rerank-skills", "eval", "--fixtures", str(FIXTURES)]) == 0
        out = capsys.readouterr().out
        assert "62 skills, limit 5" in out
        assert "dev: 194 labelled queries (134 expect a skill, 60 expect none)" in out
        assert "keyword       194      38.8%      0.0%" in out
        assert "\nlocal         194 " in out
        assert "all sets" not in out
        assert "reranked: not run" in out


class TestSmallFixtures:
    def write(self, tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
        return write_small_set(tmp_path, lines)

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
        dev_catalog: Catalog,
    ) -> None:
        config = opt_in(tmp_path, monkeypatch, fake)
        fake.handler = oracle(FIXTURES)
        code, report = run_json(capsys, "--config", str(config), "--fixtures", str(FIXTURES))
        assert code == 0
        reranked = report["modes"]["reranked"]
        # Even a perfect provider can only pick a skill the shortlist sent it.
        shortlisted = shortlisted_targets(dev_catalog)
        assert reranked["selection"] == [shortlisted, 134] and reranked["no_match"] == [60, 60]
        assert reranked["requests"] == len(fake.requests) == 194
        assert (reranked["input_tokens"], reranked["output_tokens"]) == (321 * 194, 7 * 194)
        assert reranked["decisions"] == {"accepted": shortlisted, "no_match": 194 - shortlisted}
        assert report["modes"]["keyword"]["selection"] == [52, 134]
        assert all(seen.format_error is None for seen in fake.requests)

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
        fixtures = write_small_set(tmp_path, TEN)
        fake.handler = oracle(fixtures)
        code, report = run_json(
            capsys,
            "--config",
            str(config),
            "--fixtures",
            str(fixtures),
            "--max-requests",
            str(ceiling),
        )
        assert code == 0
        assert len(fake.requests) == ceiling
        reranked = report["modes"]["reranked"]
        assert reranked["requests"] == ceiling and reranked["queries"] == ceiling
        assert reranked["stopped_at_ceiling"] is True
        assert report["modes"]["keyword"]["queries"] == 10

    def test_failed_searches_are_failures_not_the_keyword_baseline(
        self,
        tmp_path: Path,
        fake: FakeSystemOne,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        config = opt_in(tmp_path, monkeypatch, fake)
        fake.handler = lambda body: (503, b"{}")
        fixtures = write_small_set(tmp_path, TEN)
        code, report = run_json(
            capsys, "--config", str(config), "--fixtures", str(fixtures), "--max-requests", "8"
        )
        reranked, keyword = report["modes"]["reranked"], report["modes"]["keyword"]
        assert reranked["decisions"] == {"failure": 8}
        assert (reranked["failures"], reranked["failure_reasons"]) == (8, {"server_error": 8})
        # The keyword baseline those searches returned scores nothing for the reranked row,
        # though it puts the expected skill first for most of these queries.
        assert keyword["selection"][0] >= 4
        assert reranked["selection"][0] == reranked["no_match"][0] == 0
        assert reranked["input_tokens"] == 0
        assert code == 0 and keyword["queries"] == 10 and keyword["failures"] == 0

    def test_the_report_shows_the_failed_count_as_typed(
        self, tmp_path: Path, fake: FakeSystemOne, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        config = opt_in(tmp_path, monkeypatch, fake)
        fake.handler = lambda body: (503, b"{}")
        fixtures = write_small_set(tmp_path, TEN)
        done = sift(
            "rerank-skills", "eval", "--config", str(config), "--fixtures", str(fixtures),
            "--max-requests", "5",
            env={"TYPESAFE_API_KEY": "ts-eval-key", "TYPESAFE_BASE_URL": fake.url},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        table = [line.split() for line in done.stdout.splitlines() if len(line.split()) == 10]
        rows = {cells[0]: cells for cells in table}
        assert "selection  no-match  failed" in done.stdout
        assert rows["keyword"][4] == "0"
        assert rows["reranked"][1:5] == ["5", "0.0%", "0.0%", "5"]
        assert (
            "reranked: 5 of 5 searches failed (server_error 5); each counts as a miss, not as "
            "the keyword fallback it returned"
        ) in done.stdout


def description_terms(catalog: Catalog) -> dict[str, set[str]]:
    return {
        s.name: set(terms(f"{s.name.replace('-', ' ')} {s.description}")) for s in catalog.skills
    }


class TestHalves:
    def test_the_held_out_half_has_the_promised_shape(self, dev_catalog: Catalog) -> None:
        catalog = dev_catalog
        held_out = load_fixtures(HELD_OUT, catalog)
        assert len(held_out) == 60 and sum(f.expect is None for f in held_out) == 12
        dev_queries = {f.query for f in load_fixtures(FIXTURES, catalog)}
        assert not dev_queries & {f.query for f in held_out}

    @pytest.mark.parametrize("half", [HELD_OUT, SETS / "realcatalog" / "heldout.jsonl"])
    def test_held_out_queries_share_no_word_with_their_skill(
        self, half: Path, dev_catalog: Catalog, request: pytest.FixtureRequest
    ) -> None:
        # The held-out method: phrased from the user's side, with no stem of the expected
        # skill's name or description (function words aside).
        if half.parent == CATALOG.parent:
            catalog = dev_catalog
        else:
            catalog = request.getfixturevalue("real_catalog")
        words = description_terms(catalog)
        for fixture in load_fixtures(half, catalog):
            if fixture.expect is not None:
                assert not set(terms(fixture.query)) & words[fixture.expect], fixture.query

    def test_a_folder_reports_each_half_and_both(
        self, capsys: pytest.CaptureFixture[str], dev_catalog: Catalog
    ) -> None:
        code, report = run_json(capsys, "--fixtures", str(CATALOG.parent))
        assert code == 0
        assert list(report["sets"]) == ["dev", "dev_mixed", "heldout", "heldout_mixed"]
        sets = report["sets"]
        assert [half["queries"] for half in sets.values()] == [194, 80, 60, 64]
        assert report["queries"] == 398
        catalog = dev_catalog
        for name, path in (("dev", FIXTURES), ("heldout", HELD_OUT), ("heldout_mixed", MIXED)):
            hits = declined = 0
            for fixture in load_fixtures(path, catalog):
                result = local_search(catalog, fixture.query, 5)
                if fixture.expect is None:
                    declined += not result.matches
                else:
                    hits += bool(result.matches) and result.matches[0].name == fixture.expect
            local = report["sets"][name]["modes"]["local"]
            assert (local["selection"][0], local["no_match"][0]) == (hits, declined)
        for mode in ("keyword", "local"):
            both = report["modes"][mode]
            assert both["selection"] == [
                sum(half["modes"][mode]["selection"][i] for half in sets.values()) for i in range(2)
            ]
        # No word in common: the keyword baseline finds none of the held-out skills first.
        assert sets["heldout"]["modes"]["keyword"]["selection"] == [0, 48]

    def test_text_report_of_a_folder(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["rerank-skills", "eval", "--fixtures", str(CATALOG.parent)]) == 0
        out = capsys.readouterr().out
        assert "heldout: 60 labelled queries (48 expect a skill, 12 expect none)" in out
        assert "heldout_mixed: 64 labelled queries (48 expect a skill, 16 expect none)" in out
        assert "all sets: 398 labelled queries (290 expect a skill, 108 expect none)" in out

    def test_a_folder_without_fixtures_is_a_tool_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, report = run_json(capsys, "--fixtures", str(tmp_path))
        assert code == 2 and "no *.jsonl fixtures files" in report["error"]


class TestMixedHalves:
    """The sets in the issue's mix, one quarter of each kind, written blind to the scorer.

    Lines run in groups of four: a direct request, a paraphrase with no content word of its
    skill, a near-miss that has a fitting skill, and a query no skill fits.
    """

    @pytest.mark.parametrize(
        ("path", "least"), [(MIXED, 60), (REAL_MIXED, 120), (REAL_DEV_MIXED2, 160)]
    )
    def test_the_mix_and_its_spread(
        self, path: Path, least: int, dev_catalog: Catalog, request: pytest.FixtureRequest
    ) -> None:
        # Disabled skills are left out of a catalog, so never expected.
        catalog = dev_catalog if path == MIXED else request.getfixturevalue("real_catalog")
        mixed = load_fixtures(path, catalog)
        assert len(mixed) >= least and len(mixed) % 4 == 0
        assert [f.expect is None for f in mixed] == [n % 4 == 3 for n in range(len(mixed))]
        expected = Counter(f.expect for f in mixed if f.expect is not None)
        assert max(expected.values()) <= 3 and len(expected) >= len(mixed) // 3
        others = {
            f.query.lower()
            for other in sorted(path.parent.glob("*.jsonl"))
            if other != path
            for f in load_fixtures(other, catalog)
        }
        assert len({f.query.lower() for f in mixed} | others) == len(mixed) + len(others)


class TestRealCatalog:
    def test_over_a_hundred_labelled_queries_in_two_halves(
        self, real_root: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        root = real_root
        code, report = run_json(
            capsys, "--fixtures", str(SETS / "realcatalog"), "--skills-dir", str(root)
        )
        assert code == 0
        assert report["skills"] == 115  # 119 entries, one shadowed name, three disabled
        assert list(report["sets"]) == [
            "dev", "dev_mixed", "dev_mixed2", "heldout", "heldout_mixed"
        ]  # fmt: skip
        assert report["queries"] >= 100
        assert 0.2 <= report["expect_none"] / report["queries"] <= 0.3
        for half in report["sets"].values():
            assert set(half["modes"]) == {"keyword", "local"}
            # The keyword baseline never says no skill fits on the real catalog either.
            assert half["modes"]["keyword"]["no_match"][0] == 0
