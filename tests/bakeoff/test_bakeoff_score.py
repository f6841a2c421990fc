"""`sift bakeoff score`: refusal before judgments, hit rates, cost, nearest-rank latency, winner."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from siftlib.bakeoff.report import nice_ticks, render_html
from siftlib.bakeoff.score import (
    ConfigScore,
    nearest_rank,
    parse_target,
    pick_winner,
    read_judgments,
    score_run,
)
from siftlib.cli import main
from siftlib.errors import BakeoffError

from .conftest import make_run


def blind_and_judge(run_dir: Path, verdicts: dict[str, list[int]]) -> dict[str, str]:
    assert main(["blind", str(run_dir)]) == 0
    key = json.loads((run_dir / "key" / "key.json").read_text())
    queries = len(next(iter(verdicts.values())))
    rows = [
        f"{i + 1},{letter},{verdicts[key[letter]][i]}"
        for i in range(queries)
        for letter in sorted(key)
    ]
    (run_dir / "judgments.csv").write_text("query,pack,found\n" + "\n".join(rows) + "\n")
    return key


@pytest.mark.parametrize(
    ("values", "percent", "expected"),
    [
        ([10, 20, 30, 40], 50, 20),  # rank ⌈2⌉ = 2
        ([10, 20, 30, 40], 90, 40),  # rank ⌈3.6⌉ = 4
        ([5, 1, 4, 2, 3], 50, 3),  # rank ⌈2.5⌉ = 3, after sorting
        (list(range(1, 11)), 90, 9),  # rank ⌈9⌉ = 9, exactly
        (list(range(1, 21)), 90, 18),
        ([7], 50, 7),
        ([7], 90, 7),
        ([], 50, None),
    ],
)
def test_nearest_rank(values, percent, expected):
    assert nearest_rank(values, percent) == expected


def _score(config, judged, run, cost, p90):
    return ConfigScore(
        config=config,
        pack="A",
        run=run,
        skipped=0,
        judged_hits=judged,
        target_hits=0,
        targeted=0,
        tavily_credits=cost,
        brave_calls=0,
        latencies_ms=(p90,),
    )


def test_winner_is_the_highest_judged_hit_rate():
    assert pick_winner([_score("a", 2, 4, 0, 100), _score("b", 3, 4, 9, 900)]) == "b"


def test_a_tie_on_hit_rate_goes_to_the_lower_cost_per_query():
    assert pick_winner([_score("a", 3, 4, 8, 100), _score("b", 3, 4, 4, 900)]) == "b"


def test_a_tie_on_rate_and_cost_goes_to_the_lower_p90():
    assert pick_winner([_score("a", 3, 4, 4, 700), _score("b", 3, 4, 4, 600)]) == "b"


def test_rates_are_compared_exactly():
    # 1/3 and 2/6 are the same rate: the cost decides, not float noise.
    assert pick_winner([_score("a", 1, 3, 3, 100), _score("b", 2, 6, 0, 900)]) == "b"


def test_a_full_tie_goes_to_the_configuration_run_first():
    assert pick_winner([_score("a", 3, 4, 4, 600), _score("b", 3, 4, 4, 600)]) == "a"


def test_a_configuration_with_nothing_run_cannot_win():
    nothing = ConfigScore("a", "A", 0, 4, 0, 0, 0, 0, 0, ())
    assert pick_winner([nothing, _score("b", 0, 4, 0, 100)]) == "b"


@pytest.mark.parametrize(
    ("target", "url", "hit"),
    [
        ("https://sqlite.org/wal.html", "HTTPS://SQLite.org:443/wal.html/#intro", True),
        ("https://sqlite.org/wal.html", "https://sqlite.org/wal.html?x=1", False),
        ("https://sqlite.org/wal.html", "https://www.sqlite.org/wal.html", False),  # www. kept
        ("python.org", "https://python.org/about", True),
        ("python.org", "https://docs.python.org/3/", True),
        ("Python.org.", "https://DOCS.PYTHON.ORG/3/", True),
        ("python.org", "https://evilpython.org/", False),
        ("python.org", "https://python.org.evil.example/", False),
        ("open", "https://python.org/", False),
    ],
)
def test_target_matching(target, url, hit):
    assert parse_target(target).matches(url) is hit


@pytest.mark.parametrize("text", ["", "ftp://example.org/x", "example.org/docs", "two words"])
def test_unusable_targets_are_refused(text):
    with pytest.raises(ValueError):
        parse_target(text)


def test_scoring_is_refused_while_a_row_is_blank(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run", queries=2)
    assert main(["blind", str(run_dir)]) == 0
    sheet = run_dir / "judgments.csv"
    rows = sheet.read_text().splitlines()
    sheet.write_text("\n".join([rows[0]] + [r + "1" for r in rows[1:-1]] + [rows[-1]]) + "\n")
    (run_dir / "key" / "key.json").unlink()  # proves the key is not even looked at
    assert main(["bakeoff", "score", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "1 row(s) not judged yet (first: query 2, pack D)" in err
    assert not (run_dir / "report.md").exists() and not (run_dir / "report.html").exists()


def test_scoring_is_refused_on_the_blank_sheet_blind_wrote(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run", queries=2)
    assert main(["blind", str(run_dir)]) == 0
    assert main(["bakeoff", "score", str(run_dir)]) == 2
    assert "8 row(s) not judged yet" in capsys.readouterr().err


def test_scoring_is_refused_before_blind(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run")
    assert main(["bakeoff", "score", str(run_dir)]) == 2
    assert "judge the packs before scoring" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sheet", "message"),
    [
        ("query,pack\n", "header"),
        ("query,pack,found\n1,A,yes\n", "found must be 1 or 0, not 'yes'"),
        ("query,pack,found\n1,E,1\n", "pack 'E' is not one of A, B"),
        ("query,pack,found\n3,A,1\n", "expected query number (1–2),pack,found"),
        ("query,pack,found\n0,A,1\n", "expected query number (1–2),pack,found"),
        ("query,pack,found\n1,A,1\n1,A,0\n", "query 1, pack A appears twice"),
        ("query,pack,found\n1,A,1\n1,B,1\n2,A,0\n", "1 row(s) missing (first: query 2, pack B)"),
    ],
)
def test_malformed_sheets_are_refused(tmp_path, sheet, message):
    path = tmp_path / "judgments.csv"
    path.write_text(sheet)
    with pytest.raises(BakeoffError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_judgments(path, 2, ["A", "B"])


def test_a_spreadsheet_export_reads_the_same(tmp_path):
    path = tmp_path / "judged.csv"
    path.write_bytes("\ufeffquery,pack,found\r\n1,a, 1 \r\n1,B,0\r\n".encode())
    assert read_judgments(path, 1, ["A", "B"]) == {(0, "A"): True, (0, "B"): False}


def test_judgments_from_another_file(tmp_path):
    run_dir = make_run(tmp_path / "run", configs=("searxng",), queries=1)
    assert main(["blind", str(run_dir)]) == 0
    elsewhere = tmp_path / "mine.csv"
    elsewhere.write_text("query,pack,found\n1,A,1\n")
    assert main(["bakeoff", "score", str(run_dir), "--judgments", str(elsewhere)]) == 0
    assert score_run(run_dir, judgments=elsewhere).scores[0].judged_hit_rate == 1


def test_skipped_lines_are_left_out_of_every_figure(tmp_path):
    run_dir = make_run(
        tmp_path / "run",
        configs=("searxng", "tavily-direct"),
        queries=4,
        targets=["site1.example", "open", "site1.example", "https://site1.example/q3/r2"],
        skipped={("tavily-direct", 2), ("tavily-direct", 3)},
    )
    blind_and_judge(run_dir, {"searxng": [1, 1, 0, 0], "tavily-direct": [1, 0, 0, 0]})
    board = score_run(run_dir)
    direct = board.scores[1]
    # Runs on queries 0 and 1 only; judged 1 of 2; its one targeted query (0) hits site1.
    assert (direct.run, direct.skipped, direct.judged_hit_rate) == (2, 2, Fraction(1, 2))
    assert direct.target_hit_rate == 1
    assert direct.tavily_per_query == 1 and direct.brave_per_query == 0
    assert direct.latencies_ms == (200, 201)
    searxng = board.scores[0]
    assert searxng.target_hit_rate == 0  # site0.example hits never match site1.example
    assert board.winner == "searxng"  # 1/2 each; 0 paid calls per query beats 1


def test_a_run_without_targets_reports_target_rates_as_na(tmp_path):
    run_dir = make_run(tmp_path / "run", configs=("searxng",), queries=1)
    blind_and_judge(run_dir, {"searxng": [1]})
    assert main(["bakeoff", "score", str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text()
    assert "| searxng | A | 100.0% (1/1) | n/a |" in report
    assert "no targets.txt" in report


def test_the_report_lists_configurations_that_did_not_run(tmp_path):
    run_dir = make_run(
        tmp_path / "run",
        configs=("searxng",),
        queries=1,
        not_run={"tavily-direct": "missing key: tavily"},
    )
    blind_and_judge(run_dir, {"searxng": [0]})
    assert main(["bakeoff", "score", str(run_dir)]) == 0
    assert "- `tavily-direct`: missing key: tavily" in (run_dir / "report.md").read_text()
    assert "missing key: tavily" in (run_dir / "report.html").read_text()


def test_the_html_report_is_self_contained_with_an_inline_chart(tmp_path):
    run_dir = make_run(tmp_path / "run", queries=2, targets=["site2.example", "open"])
    blind_and_judge(
        run_dir,
        {
            "searxng": [1, 0],
            "searxng+brave": [1, 1],
            "searxng+brave+tavily": [0, 1],
            "tavily-direct": [0, 0],
        },
    )
    html = render_html(score_run(run_dir))
    assert html.startswith("<!DOCTYPE html>")
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert svg.count('fill="#2b6cb0"') == 1 + 4  # the legend, then one judged bar per config
    assert svg.count('font-weight="bold">searxng+brave ★</text>') == 2  # marked in both panels
    # Judged hit-rate bars are proportional: 1/2 of the panel for searxng, all of it for +brave.
    assert '<rect x="160" y="26" width="155.0" height="14" fill="#2b6cb0"/>' in svg
    assert '<rect x="160" y="60" width="310.0" height="14" fill="#2b6cb0"/>' in svg
    # Both axes carry a scale: fixed percent steps, round millisecond steps past the slowest p90.
    for tick in ("0%", "25%", "50%", "75%", "100%"):
        assert f'text-anchor="middle">{tick}</text>' in svg
    slowest = max(s.p90_ms or 0 for s in score_run(run_dir).scores)
    ticks = nice_ticks(slowest)
    assert ticks[-1] >= slowest and ticks[0] == 0
    for tick in ticks:
        assert f'text-anchor="middle">{tick:g} ms</text>' in svg
    for outside in ("<script", "<link", "src=", "@import", "url(", "href="):
        assert outside not in html


def test_a_configuration_with_skipped_queries_cannot_win(tmp_path):
    # tavily-direct judged 2/2 on the queries it ran beats searxng's 1/4 on paper, but those
    # are unequal denominators: it is reported, not eligible.
    run_dir = make_run(
        tmp_path / "run",
        configs=("searxng", "tavily-direct"),
        queries=4,
        skipped={("tavily-direct", 2), ("tavily-direct", 3)},
    )
    blind_and_judge(run_dir, {"searxng": [1, 0, 0, 0], "tavily-direct": [1, 1, 0, 0]})
    board = score_run(run_dir)
    assert [s.eligible for s in board.scores] == [True, False]
    assert board.scores[1].judged_hit_rate == 1
    assert board.winner == "searxng"
    assert main(["bakeoff", "score", str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text()
    assert "**Winner: `searxng`**" in report
    assert "not eligible to win (tavily-direct)" in report


def test_no_complete_configuration_means_no_winner(tmp_path):
    run_dir = make_run(
        tmp_path / "run", configs=("tavily-direct",), queries=2, skipped={("tavily-direct", 1)}
    )
    blind_and_judge(run_dir, {"tavily-direct": [1, 0]})
    assert score_run(run_dir).winner is None
    assert main(["bakeoff", "score", str(run_dir)]) == 0
    assert "**No winner**: no configuration ran every query." in (run_dir / "report.md").read_text()


def test_a_single_configuration_compared_nothing_and_has_no_winner(tmp_path):
    run_dir = make_run(tmp_path / "run", configs=("searxng",), queries=2)
    blind_and_judge(run_dir, {"searxng": [1, 1]})
    assert score_run(run_dir).winner is None
    assert main(["bakeoff", "score", str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text()
    assert "**No winner**: only one configuration ran, so nothing was compared." in report
    assert "Winner: <code>" not in (run_dir / "report.html").read_text()
    assert "No winner: only one configuration ran" in (run_dir / "report.html").read_text()


@pytest.mark.parametrize(
    ("top", "ticks"),
    [
        (403, [0, 200, 400, 600]),
        (400, [0, 100, 200, 300, 400]),
        (37, [0, 10, 20, 30, 40]),
        (3, [0, 1, 2, 3]),
        (1800, [0, 500, 1000, 1500, 2000]),
        (0, [0, 1]),
    ],
)
def test_latency_ticks_are_round_and_reach_the_slowest(top, ticks):
    assert nice_ticks(top) == ticks
