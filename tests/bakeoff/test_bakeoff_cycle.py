"""The whole cycle against fake providers with known answers: run → blind → judge → score.

Expected figures, by hand (k = 3; the fakes' answers are in conftest.py):

Target hits (query 3 is `open`, so out of 3):
  searxng               q0 yes (SQLite.org/wal.html/ is the target, canonically)  → 1/3
  searxng+brave         q0 yes, q1 yes (docs.python.org from Brave)               → 2/3
  searxng+brave+tavily  q0, q1, q2 yes (doc.rust-lang.org, a subdomain, Tavily)   → 3/3
  tavily-direct         q2 yes only                                               → 1/3
Judged (the judge's sheet below): 2/4, 3/4, 3/4, 2/4.
Cost per query: Brave one call per search, Tavily one credit per search (usage 1; the direct
answer carries no usage, so 1): 0 | brave 1 | brave 1 + tavily 1 | tavily 1.
Latency steps fed by the clock, per query (ms), and nearest-rank percentiles:
  searxng               120  80 100 300 → sorted 80 100 120 300   → p50 = 2nd = 100, p90 = 4th = 300
  searxng+brave         200 250 150 400 → 150 200 250 400          → p50 200, p90 400
  searxng+brave+tavily  500 450 700 650 → 450 500 650 700          → p50 500, p90 700
  tavily-direct         900 1000 800 1100 → 800 900 1000 1100      → p50 900, p90 1100
Winner: searxng+brave and searxng+brave+tavily tie at 3/4 judged; the lower cost per query
(1 against 2) wins: searxng+brave.
"""

from __future__ import annotations

import csv
import json
import os
import stat
from fractions import Fraction
from pathlib import Path

import pytest

from siftlib.bakeoff import CONFIGS
from siftlib.bakeoff.run import read_query_set, run_bakeoff
from siftlib.bakeoff.score import score_run
from siftlib.cli import main

from .conftest import QUERIES, RUST_BOOK, TARGETS, StepClock, write_config, write_inputs

CONFIG_NAMES = list(CONFIGS)
LATENCIES = {
    "searxng": [120, 80, 100, 300],
    "searxng+brave": [200, 250, 150, 400],
    "searxng+brave+tavily": [500, 450, 700, 650],
    "tavily-direct": [900, 1000, 800, 1100],
}
JUDGED = {  # the judge's verdicts per configuration, query 0..3
    "searxng": [1, 0, 0, 1],
    "searxng+brave": [1, 1, 0, 1],
    "searxng+brave+tavily": [1, 1, 1, 0],
    "tavily-direct": [0, 0, 1, 1],
}


def clock_for_run() -> StepClock:
    # The run goes query by query, each through the four configurations in order.
    return StepClock([LATENCIES[c][q] for q in range(4) for c in CONFIG_NAMES])


def judge(run_dir: Path) -> None:
    """Fill the sheet as a judge would (the test peeks at the key only to play the judge)."""
    key = json.loads((run_dir / "key" / "key.json").read_text())
    rows = list(csv.reader((run_dir / "judgments.csv").read_text().splitlines()))
    assert rows[0] == ["query", "pack", "found"]
    lines = ["query,pack,found"]
    for number, letter, found in rows[1:]:
        assert found == ""
        lines.append(f"{number},{letter},{JUDGED[key[letter]][int(number) - 1]}")
    (run_dir / "judgments.csv").write_text("\n".join(lines) + "\n")


@pytest.fixture
def finished_run(tmp_path, providers, open_searcher):
    config = write_config(tmp_path, providers)
    queries, targets = write_inputs(tmp_path, QUERIES, TARGETS)
    run_dir = tmp_path / "run"
    clock = clock_for_run()
    run_bakeoff(
        open_searcher(config), read_query_set(queries, targets), out=run_dir, k=3, clock=clock
    )
    assert clock.steps == []  # every measured line read the clock exactly twice
    return run_dir


def test_run_writes_one_line_per_query_and_config(finished_run, providers):
    lines = [json.loads(x) for x in (finished_run / "results.jsonl").read_text().splitlines()]
    assert [(x["query_index"], x["config"]) for x in lines] == [
        (q, c) for q in range(4) for c in CONFIG_NAMES
    ]
    by_key = {(x["query_index"], x["config"]): x for x in lines}
    assert by_key[(0, "searxng")]["hits"] == [
        {
            "rank": 1,
            "url": "https://SQLite.org/wal.html/",
            "title": "Page ",
            "snippet": "About sqlite wal mode.",
        },
        {
            "rank": 2,
            "url": "https://blog.example/wal",
            "title": "Page wal",
            "snippet": "About sqlite wal mode.",
        },
        {
            "rank": 3,
            "url": "https://forum.example/t/1",
            "title": "Page 1",
            "snippet": "About sqlite wal mode.",
        },
    ]
    assert [h["url"] for h in by_key[(2, "searxng+brave+tavily")]["hits"]] == [
        "https://qa.example/borrow",
        "https://blog.example/borrow",
        RUST_BOOK,
    ]
    assert [h["url"] for h in by_key[(2, "tavily-direct")]["hits"]] == [RUST_BOOK]
    for line in lines:
        assert set(line) == {
            "query_index",
            "query",
            "config",
            "hits",
            "latency_ms",
            "credits",
            "warnings",
        }
        assert line["query"] == QUERIES[line["query_index"]]
        assert line["latency_ms"] == LATENCIES[line["config"]][line["query_index"]]
        assert line["warnings"] == []
    assert [by_key[(0, c)]["credits"] for c in CONFIG_NAMES] == [
        {"tavily": 0, "brave_llm": 0},
        {"tavily": 0, "brave_llm": 1},
        {"tavily": 1, "brave_llm": 1},
        {"tavily": 1, "brave_llm": 0},
    ]
    meta = json.loads((finished_run / "meta.json").read_text())
    assert meta["k"] == 3 and meta["sift_version"]
    assert meta["configs"] == {c: {"ran": True, "reason": None} for c in CONFIG_NAMES}
    # Each provider saw each query once per configuration that uses it: no cache in between.
    assert providers.count("searxng") == 12
    assert providers.count("brave") == 8
    assert providers.count("tavily") == 4
    assert providers.count("direct") == 4


def test_the_direct_configuration_sends_the_agent_tool_body(finished_run, providers):
    direct = [body for kind, body in providers.calls if kind == "direct"]
    assert direct[0] == {
        "query": QUERIES[0],
        "max_results": 3,
        "include_raw_content": False,
        "include_images": False,
    }


def test_full_cycle_scores_what_was_computed_by_hand(finished_run, capsys):
    assert main(["blind", str(finished_run)]) == 0
    judge(finished_run)
    capsys.readouterr()
    assert main(["bakeoff", "score", str(finished_run)]) == 0
    out = capsys.readouterr().out

    board = score_run(finished_run)
    figures = {
        s.config: (
            s.judged_hit_rate,
            s.target_hit_rate,
            s.tavily_per_query,
            s.brave_per_query,
            s.p50_ms,
            s.p90_ms,
        )
        for s in board.scores
    }
    assert figures == {
        "searxng": (Fraction(2, 4), Fraction(1, 3), 0, 0, 100, 300),
        "searxng+brave": (Fraction(3, 4), Fraction(2, 3), 0, 1, 200, 400),
        "searxng+brave+tavily": (Fraction(3, 4), Fraction(3, 3), 1, 1, 500, 700),
        "tavily-direct": (Fraction(2, 4), Fraction(1, 3), 1, 0, 900, 1100),
    }
    assert board.winner == "searxng+brave"
    assert board.open_queries == 1

    report = (finished_run / "report.md").read_text()
    assert report == out.split("\nwrote ")[0]
    assert "**Winner: `searxng+brave`**" in report
    row = next(line for line in report.splitlines() if line.startswith("| searxng+brave |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:] == ["75.0% (3/4)", "66.7% (2/3)", "0.00", "1.00", "200 ms", "400 ms", "4", "0"]
    html = (finished_run / "report.html").read_text()
    assert "<svg" in html and "searxng+brave ★" in html


def test_every_file_of_a_run_is_private_whatever_the_umask(tmp_path, providers, open_searcher):
    config = write_config(tmp_path, providers)
    queries, targets = write_inputs(tmp_path, QUERIES, TARGETS)
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o777)
    (run_dir / "queries.txt").write_text("left from an earlier attempt\n")
    old = os.umask(0)
    try:
        os.chmod(run_dir, 0o777)
        os.chmod(run_dir / "queries.txt", 0o666)
        run_bakeoff(
            open_searcher(config),
            read_query_set(queries, targets),
            out=run_dir,
            k=3,
            clock=clock_for_run(),
        )
        assert main(["blind", str(run_dir)]) == 0
        judge(run_dir)
        assert main(["bakeoff", "score", str(run_dir)]) == 0
    finally:
        os.umask(old)
    modes = {
        str(path.relative_to(tmp_path)): stat.S_IMODE(path.stat().st_mode)
        for path in [run_dir, *run_dir.rglob("*")]
    }
    assert {name for name, mode in modes.items() if mode & 0o077} == set()
    assert {modes[name] for name in modes if (tmp_path / name).is_dir()} == {0o700}
    assert "run/report.html" in modes and "run/packs/A.json" in modes
