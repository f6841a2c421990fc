"""`sift bakeoff run`: the command, configurations that cannot run, the credit ceiling, caps."""

from __future__ import annotations

import json
import os
import pty
import stat
from pathlib import Path
from typing import Any

import pytest
from clikit import sift

from siftlib.bakeoff.run import charged, read_query_set, run_bakeoff
from siftlib.bakeoff.rundir import Line
from siftlib.cli import main
from siftlib.errors import BakeoffError

from .conftest import QUERIES, TARGETS, write_config, write_inputs


def _lines(run_dir):
    return [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]


def _run(tmp_path, config, *extra, targets=TARGETS):
    queries, targets = write_inputs(tmp_path, QUERIES, targets)
    return main(
        [
            "bakeoff",
            "run",
            "--config",
            str(config),
            "--queries",
            str(queries),
            "--targets",
            str(targets),
            "--out",
            str(tmp_path / "run"),
            "--allow-private-upstreams",
            *extra,
        ]
    )


def test_the_command_runs_and_shows_progress(tmp_path, providers, capsys):
    config = write_config(tmp_path, providers)
    assert _run(tmp_path, config, "--k", "2") == 0
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if line.startswith("query ")]
    assert progress[0] == "query 1/4 · config 1/4"
    assert progress[6] == "query 2/4 · config 3/4"
    assert progress[-1] == "query 4/4 · config 4/4" and len(progress) == 16
    assert "sift blind" in captured.out
    lines = _lines(tmp_path / "run")
    assert len(lines) == 16 and all(len(x["hits"]) <= 2 for x in lines)
    assert json.loads((tmp_path / "run" / "meta.json").read_text())["k"] == 2
    assert (tmp_path / "run" / "targets.txt").read_text().splitlines() == TARGETS


def test_k_defaults_to_the_config(tmp_path, providers):
    config = write_config(tmp_path, providers, k=1)
    assert _run(tmp_path, config) == 0
    assert {len(x["hits"]) for x in _lines(tmp_path / "run")} == {1}


def test_a_configuration_missing_a_key_is_recorded_and_the_others_run(tmp_path, providers):
    config = write_config(tmp_path, providers, keys=("BRAVE_API_KEY",))
    assert _run(tmp_path, config) == 0
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["configs"] == {
        "searxng": {"ran": True, "reason": None},
        "searxng+brave": {"ran": True, "reason": None},
        "searxng+brave+tavily": {"ran": False, "reason": "missing key: tavily"},
        "tavily-direct": {"ran": False, "reason": "missing key: tavily"},
    }
    assert {x["config"] for x in _lines(tmp_path / "run")} == {"searxng", "searxng+brave"}
    assert providers.count("tavily") == providers.count("direct") == 0


def test_a_disabled_source_is_recorded(tmp_path, providers, capsys):
    config = write_config(tmp_path, providers, enabled=("searxng", "tavily"))
    assert _run(tmp_path, config) == 0
    configs = json.loads((tmp_path / "run" / "meta.json").read_text())["configs"]
    assert configs["searxng+brave"] == {"ran": False, "reason": "source disabled: brave_llm"}
    assert configs["searxng+brave+tavily"]["reason"] == "source disabled: brave_llm"
    assert configs["tavily-direct"] == {"ran": True, "reason": None}
    assert "searxng+brave not run: source disabled: brave_llm" in capsys.readouterr().err


def test_nothing_runnable_is_an_error_that_says_why(tmp_path, providers, capsys):
    config = write_config(tmp_path, providers, enabled=())
    assert _run(tmp_path, config) == 2
    assert "no configuration can run (source disabled: searxng" in capsys.readouterr().err
    assert (tmp_path / "run" / "meta.json").exists()


def test_misaligned_targets_are_refused_before_any_search(tmp_path, providers, capsys):
    config = write_config(tmp_path, providers)
    assert _run(tmp_path, config, targets=TARGETS[:3]) == 2
    assert "has 3 lines but" in capsys.readouterr().err
    assert providers.calls == [] and not (tmp_path / "run").exists()


def test_a_bad_target_is_refused_with_its_line(tmp_path, providers, capsys):
    config = write_config(tmp_path, providers)
    assert _run(tmp_path, config, targets=[*TARGETS[:3], "docs.python.org/3/"]) == 2
    assert "line 4" in capsys.readouterr().err and providers.calls == []


def test_an_existing_run_is_never_overwritten(tmp_path, providers, capsys):
    config = write_config(tmp_path, providers)
    assert _run(tmp_path, config) == 0
    before = (tmp_path / "run" / "results.jsonl").read_bytes()
    calls = len(providers.calls)
    assert _run(tmp_path, config) == 2
    assert "choose a new --out directory" in capsys.readouterr().err
    assert (tmp_path / "run" / "results.jsonl").read_bytes() == before
    assert len(providers.calls) == calls


def test_max_credits_is_a_hard_ceiling(tmp_path, providers, capsys):
    # Paid calls per query: searxng 0, +brave 1, +brave+tavily 2, tavily-direct 1.
    # q0 spends 1, 3, 4; q1 +brave reaches 5; q1 +brave+tavily would make 7 > 5: skipped, and
    # so is every later paid line. SearXNG alone runs to the end.
    config = write_config(tmp_path, providers)
    assert _run(tmp_path, config, "--max-credits", "5") == 0
    lines = _lines(tmp_path / "run")
    skipped = [(x["query_index"], x["config"]) for x in lines if x.get("skipped")]
    assert skipped == [
        (1, "searxng+brave+tavily"),
        (1, "tavily-direct"),
        (2, "searxng+brave"),
        (2, "searxng+brave+tavily"),
        (2, "tavily-direct"),
        (3, "searxng+brave"),
        (3, "searxng+brave+tavily"),
        (3, "tavily-direct"),
    ]
    for line in lines:
        if line.get("skipped"):
            assert line["skipped"] == "max credits" and line["hits"] == []
    spent = sum(sum(x["credits"].values()) for x in lines)
    assert spent == 5
    assert providers.count("brave") + providers.count("tavily") + providers.count("direct") == 5
    assert providers.count("searxng") == 4 + 2 + 1  # searxng alone throughout, mixed until cut


def test_max_credits_zero_runs_only_the_free_configuration(tmp_path, providers):
    config = write_config(tmp_path, providers)
    assert _run(tmp_path, config, "--max-credits", "0") == 0
    ran = [x["config"] for x in _lines(tmp_path / "run") if not x.get("skipped")]
    assert ran == ["searxng"] * 4
    assert providers.count("brave") + providers.count("tavily") + providers.count("direct") == 0


def test_the_cache_is_bypassed(tmp_path, providers, open_searcher):
    # Two runs in the same hour on the same database: the second still asks every provider.
    config = write_config(tmp_path, providers)
    plan = read_query_set(*write_inputs(tmp_path, QUERIES, TARGETS))
    searcher = open_searcher(config)
    run_bakeoff(searcher, plan, out=tmp_path / "one", k=3)
    run_bakeoff(searcher, plan, out=tmp_path / "two", k=3)
    assert providers.count("searxng") == 2 * 12
    assert providers.count("tavily") == providers.count("direct") == 2 * 4
    hits = [[x["hits"] for x in _lines(tmp_path / name)] for name in ("one", "two")]
    assert hits[0] == hits[1]


def test_a_failed_search_is_recorded_and_the_run_goes_on(tmp_path, providers, open_searcher):
    config = write_config(tmp_path, providers, enabled=("searxng",))
    queries = [QUERIES[0], "a query the fake cannot answer", QUERIES[2]]
    plan = read_query_set(*write_inputs(tmp_path, queries, ["open"] * 3))
    run_bakeoff(open_searcher(config), plan, out=tmp_path / "run", k=3)
    lines = _lines(tmp_path / "run")
    assert [len(x["hits"]) for x in lines] == [3, 0, 3]
    assert lines[1]["warnings"] == ["searxng: 503", "no search results: every source failed"]
    assert lines[1]["latency_ms"] >= 0 and "skipped" not in lines[1]


def test_the_daily_cap_still_applies(tmp_path, providers, open_searcher):
    config = write_config(tmp_path, providers)
    text = config.read_text().replace(
        "[search.tavily]\n", "[search.tavily]\ndaily_credit_cap = 3\n"
    )
    config.write_text(text)
    plan = read_query_set(*write_inputs(tmp_path, QUERIES, TARGETS))
    run_bakeoff(open_searcher(config), plan, out=tmp_path / "run", k=3)
    lines = {(x["query_index"], x["config"]): x for x in _lines(tmp_path / "run")}
    # Tavily calls in run order: q0 +tavily, q0 direct, q1 +tavily; then the cap is reached.
    assert providers.count("tavily") + providers.count("direct") == 3
    assert lines[(1, "tavily-direct")]["warnings"] == ["tavily: daily cap"]
    assert lines[(1, "tavily-direct")]["credits"] == {"tavily": 0, "brave_llm": 0}
    assert "tavily: daily cap" in lines[(2, "searxng+brave+tavily")]["warnings"]
    assert lines[(2, "searxng+brave+tavily")]["hits"]  # the other sources still answered


def test_a_timed_out_paid_call_counts_against_the_ceiling():
    line = Line(
        query_index=0,
        query="q",
        config="searxng+brave+tavily",
        credits={"tavily": 0, "brave_llm": 1},
        warnings=["tavily: timeout", "searxng: timeout"],
    )
    assert charged(line) == 2  # Brave's call, and Tavily's that may have been charged


def test_the_shipped_example_set_is_a_valid_labelled_input():
    example = Path(__file__).resolve().parents[2] / "bakeoff" / "example"
    plan = read_query_set(example / "search_queries.txt", example / "search_targets.txt")
    kinds = {("open" if t == "open" else "url" if "://" in t else "domain") for t in plan.targets}
    assert kinds == {"open", "url", "domain"} and len(plan.queries) == 10
    assert "EXAMPLE" in (example / "README.md").read_text()


# As an operator meets it: through the command line, in a subprocess.


def _sift_run(tmp_path: Path, config: Path, *extra: str, **options: Any) -> Any:
    queries, targets = write_inputs(tmp_path, QUERIES, TARGETS)
    return sift(
        "bakeoff", "run", "--config", str(config), "--queries", str(queries),
        "--out", str(tmp_path / "run"), "--allow-private-upstreams", *extra, **options,
    )  # fmt: skip


def _said(done: Any) -> list[str]:
    """The command's own sentences on stderr (not progress, not the test switch's warning)."""
    return [line for line in done.stderr.splitlines() if line.startswith("sift bakeoff run:")]


def test_targets_are_optional_and_the_worst_case_spend_is_said_before_the_first_paid_call(
    tmp_path, providers
):
    # One run for both: each run is a process making 16 searches.
    done = _sift_run(tmp_path, write_config(tmp_path, providers))
    assert done.returncode == 0, done.stderr
    assert len(_lines(tmp_path / "run")) == 16
    assert not (tmp_path / "run" / "targets.txt").exists()  # the report says target rates n/a
    first = _said(done)[0]
    assert done.stderr.index("worst case") < done.stderr.index("query 1/4")
    # Per query: Brave in +brave and +brave+tavily, Tavily in +brave+tavily and direct.
    assert first == (
        "sift bakeoff run: worst case 16 paid calls for 4 queries (8 Brave calls, 8 Tavily credits)"
    )


def test_a_free_run_says_no_spend(tmp_path, providers):
    done = _sift_run(tmp_path, write_config(tmp_path, providers, enabled=("searxng",)))
    assert done.returncode == 0 and "worst case" not in done.stderr


def test_on_a_terminal_a_paid_run_wants_yes_or_max_credits(tmp_path, providers):
    config = write_config(tmp_path, providers)
    main_fd, terminal = pty.openpty()
    try:
        refused = _sift_run(tmp_path, config, stdin=terminal)
        assert refused.returncode == 2
        assert _said(refused) == [
            "sift bakeoff run: worst case 16 paid calls for 4 queries "
            "(8 Brave calls, 8 Tavily credits)",
            "sift bakeoff run: confirm that spend with --yes, or cap it with --max-credits N "
            "(nothing was spent)",
        ]
        assert providers.calls == []
        accepted = _sift_run(tmp_path, config, "--yes", stdin=terminal)
        assert accepted.returncode == 0, accepted.stderr
    finally:
        os.close(main_fd)
        os.close(terminal)


def test_skipped_lines_are_counted_at_the_end(tmp_path, providers):
    done = _sift_run(tmp_path, write_config(tmp_path, providers), "--max-credits", "5")
    assert done.returncode == 0
    # The worst case is said first, with the ceiling that caps it.
    assert _said(done)[0] == (
        "sift bakeoff run: worst case 16 paid calls for 4 queries (8 Brave calls, 8 Tavily "
        "credits); --max-credits 5 caps it"
    )
    assert _said(done)[-1] == (
        "sift bakeoff run: --max-credits 5 reached; lines skipped: searxng+brave 2, "
        "searxng+brave+tavily 3, tavily-direct 3 (of 4 each). Only configurations that ran "
        "every query can win the report; raise --max-credits and run again to compare them all."
    )


def test_a_run_directory_of_another_user_is_refused(
    tmp_path, providers, monkeypatch, open_searcher
):
    config = write_config(tmp_path, providers)
    foreign = tmp_path / "theirs"
    foreign.mkdir(mode=0o777)
    os.chmod(foreign, 0o777)
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)  # as another user would see it
    plan = read_query_set(*write_inputs(tmp_path, QUERIES, TARGETS))
    with pytest.raises(BakeoffError, match="belongs to another user"):
        run_bakeoff(open_searcher(config), plan, out=foreign, k=3)
    assert list(foreign.iterdir()) == []
    assert stat.S_IMODE(foreign.stat().st_mode) == 0o777  # not taken over either


def test_a_planted_symlink_in_the_run_directory_is_never_followed(
    tmp_path, providers, open_searcher
):
    config = write_config(tmp_path, providers)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "queries.txt").symlink_to(victim)
    plan = read_query_set(*write_inputs(tmp_path, QUERIES, TARGETS))
    with pytest.raises(BakeoffError, match="is a symbolic link"):
        run_bakeoff(open_searcher(config), plan, out=run_dir, k=3)
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_a_hard_link_in_the_run_directory_is_not_truncated(tmp_path, providers, open_searcher):
    config = write_config(tmp_path, providers)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.link(victim, run_dir / "queries.txt")
    plan = read_query_set(*write_inputs(tmp_path, QUERIES, TARGETS))
    with pytest.raises(BakeoffError, match="link to one"):
        run_bakeoff(open_searcher(config), plan, out=run_dir, k=3)
    assert victim.read_text() == "precious\n"
