"""Scoring a judged run: figures per configuration and the winner.

Unblinding happens only after the judgments exist: the sheet is read and checked first —
every query × pack row present once, each `1` or `0` — and while any row is blank scoring is
refused before `key/key.json` is opened.

Figures per configuration, over the queries it actually ran (a line skipped at the
`--max-credits` ceiling has no result to judge, so it is left out of every figure and counted
apart in the report):
- judged hit rate: rows judged `1` / queries run;
- target hit rate (mechanical): a hit whose canonical URL equals the target URL, or whose host
  is the target domain or a subdomain of it; `open` queries are excluded;
- cost per query: Tavily credits and Brave calls per query run; the tie-break uses their sum
  (each unit is one paid call);
- p50 and p90 latency, nearest rank: the value at rank ⌈p·n/100⌉ of the sorted latencies.

Winner: among the configurations that ran every query, highest judged hit rate, then lower
cost per query, then lower p90; a full tie goes to the configuration run first. One with
skipped lines is reported but cannot win: 3/7 against 3/10 is not a tie. A run where fewer
than two configurations ran compared nothing, so it has no winner either. Rates and costs are
exact fractions, so ties are real ties.

Query numbers in the judgments sheet are 1-based, as in the packs.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from siftlib.bakeoff.blind import JUDGMENTS, JUDGMENTS_HEADER, read_key
from siftlib.bakeoff.rundir import TARGETS, Run, read_run
from siftlib.errors import BakeoffError
from siftlib.search.canonical_url import canonical_url

OPEN = "open"
_DOMAIN = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")


@dataclass(frozen=True)
class Target:
    """What a good result list for one query must contain: a URL, a domain, or nothing (open)."""

    url: str | None = None
    domain: str | None = None

    def matches(self, hit_url: str) -> bool:
        """Say whether a hit's URL satisfies this target."""
        if self.url is not None:
            return canonical_url(hit_url) == canonical_url(self.url)
        if self.domain is not None:
            try:
                host = (urlsplit(hit_url.strip()).hostname or "").rstrip(".")
            except ValueError:
                return False
            return host == self.domain or host.endswith("." + self.domain)
        return False

    @property
    def is_open(self) -> bool:
        """True for an `open` query, which has no single right answer."""
        return self.url is None and self.domain is None


def parse_target(text: str) -> Target:
    """Parse one targets line: `open`, an http(s) URL, or a bare domain; raise ValueError."""
    text = text.strip()
    if text.lower() == OPEN:
        return Target()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{text!r} is not an http:// or https:// URL with a host")
        return Target(url=text)
    domain = text.lower().rstrip(".")
    if not _DOMAIN.match(domain):
        raise ValueError(f"{text!r} is neither `open`, a full http(s) URL, nor a bare domain")
    return Target(domain=domain)


@dataclass(frozen=True)
class ConfigScore:
    """The figures of one configuration."""

    config: str
    pack: str
    run: int
    skipped: int
    judged_hits: int
    target_hits: int
    targeted: int
    tavily_credits: int
    brave_calls: int
    latencies_ms: tuple[int, ...]

    @property
    def eligible(self) -> bool:
        """True when every query ran: only equal denominators may compete for the win."""
        return self.run > 0 and self.skipped == 0

    @property
    def judged_hit_rate(self) -> Fraction | None:
        """Share of queries run that the judge marked found; None when none ran."""
        return Fraction(self.judged_hits, self.run) if self.run else None

    @property
    def target_hit_rate(self) -> Fraction | None:
        """Share of non-open queries run whose hits contain the target; None when there are none."""
        return Fraction(self.target_hits, self.targeted) if self.targeted else None

    @property
    def tavily_per_query(self) -> Fraction | None:
        """Tavily credits per query run."""
        return Fraction(self.tavily_credits, self.run) if self.run else None

    @property
    def brave_per_query(self) -> Fraction | None:
        """Brave calls per query run."""
        return Fraction(self.brave_calls, self.run) if self.run else None

    @property
    def cost_per_query(self) -> Fraction | None:
        """Paid calls per query run, Tavily credits and Brave calls together."""
        if not self.run:
            return None
        return Fraction(self.tavily_credits + self.brave_calls, self.run)

    @property
    def p50_ms(self) -> int | None:
        """Median latency, nearest rank."""
        return nearest_rank(self.latencies_ms, 50)

    @property
    def p90_ms(self) -> int | None:
        """90th-percentile latency, nearest rank."""
        return nearest_rank(self.latencies_ms, 90)


@dataclass(frozen=True)
class Scoreboard:
    """A scored run: one `ConfigScore` per configuration that ran, and the winner."""

    run_dir: Path
    meta: dict[str, Any]
    queries: int
    open_queries: int | None
    scores: tuple[ConfigScore, ...]
    not_run: dict[str, str]
    winner: str | None


def nearest_rank(values: tuple[int, ...] | list[int], percent: int) -> int | None:
    """Return the nearest-rank percentile: the value at rank ⌈percent·n/100⌉, sorted ascending."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-percent * len(ordered) // 100))
    return ordered[rank - 1]


def pick_winner(scores: tuple[ConfigScore, ...] | list[ConfigScore]) -> str | None:
    """Return the winning configuration by the rule in the module docstring."""
    if len(scores) < 2:
        return None  # nothing was compared
    best: tuple[Fraction, Fraction, int] | None = None
    winner = None
    for score in scores:
        rate, cost, p90 = score.judged_hit_rate, score.cost_per_query, score.p90_ms
        if not score.eligible or rate is None or cost is None or p90 is None:
            continue
        rank = (-rate, cost, p90)
        if best is None or rank < best:
            best, winner = rank, score.config
    return winner


def score_run(run_dir: Path, *, judgments: Path | None = None) -> Scoreboard:
    """Check the judgments, then unblind and score the run in `run_dir`."""
    run = read_run(run_dir)
    if not run.ran:
        raise BakeoffError(f"{run_dir}: no configuration ran, so there is nothing to score")
    letters = [chr(ord("A") + i) for i in range(len(run.ran))]
    found = read_judgments(judgments or run_dir / JUDGMENTS, len(run.queries), letters)
    key = read_key(run_dir, run.ran)  # opened only now that every row is judged
    targets = read_targets(run)
    pack_of = {config: letter for letter, config in key.items()}
    scores = tuple(
        _score_config(run, config, pack_of[config], found, targets) for config in run.ran
    )
    return Scoreboard(
        run_dir=run_dir,
        meta=run.meta,
        queries=len(run.queries),
        open_queries=None if targets is None else sum(t.is_open for t in targets),
        scores=scores,
        not_run=run.not_run,
        winner=pick_winner(scores),
    )


def read_judgments(path: Path, queries: int, letters: list[str]) -> dict[tuple[int, str], bool]:
    """Read a judgments sheet; refuse it unless every query × pack row is judged `1` or `0`.

    The sheet numbers queries from 1; the map it returns is keyed by 0-based query index.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet may add a byte-order mark
    except FileNotFoundError:
        raise BakeoffError(
            f"{path} does not exist: run `sift blind` and judge the packs before scoring"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BakeoffError(f"{path} cannot be read ({type(exc).__name__})") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows or [cell.strip() for cell in rows[0]] != JUDGMENTS_HEADER.split(","):
        raise BakeoffError(f"{path}: the first line must be the header {JUDGMENTS_HEADER}")

    found: dict[tuple[int, str], bool] = {}
    seen: set[tuple[int, str]] = set()
    blank: list[str] = []
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        cells = [cell.strip() for cell in row] + [""] * (3 - len(row))
        if len(row) > 3 or not cells[0].isdigit() or not 1 <= int(cells[0]) <= queries:
            raise BakeoffError(
                f"{path} line {number}: expected query number (1–{queries}),pack,found"
            )
        index, letter, value = int(cells[0]) - 1, cells[1].upper(), cells[2]
        if letter not in letters:
            raise BakeoffError(
                f"{path} line {number}: pack {cells[1]!r} is not one of {', '.join(letters)}"
            )
        if (index, letter) in seen:
            raise BakeoffError(
                f"{path} line {number}: query {index + 1}, pack {letter} appears twice"
            )
        seen.add((index, letter))
        if value == "":
            blank.append(f"query {index + 1}, pack {letter}")
            continue
        if value not in ("0", "1"):
            raise BakeoffError(f"{path} line {number}: found must be 1 or 0, not {value!r}")
        found[(index, letter)] = value == "1"
    if blank:
        raise BakeoffError(
            f"{path}: {len(blank)} row(s) not judged yet (first: {blank[0]}); "
            "scoring is refused until every row says 1 or 0"
        )
    missing = [(i, c) for i in range(queries) for c in letters if (i, c) not in seen]
    if missing:
        index, letter = missing[0]
        raise BakeoffError(
            f"{path}: {len(missing)} row(s) missing (first: query {index + 1}, pack {letter}); "
            "the sheet needs one row per query × pack"
        )
    return found


def read_targets(run: Run) -> list[Target] | None:
    """Return the run's saved targets, or None when the run directory holds none."""
    path = run.path / TARGETS
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BakeoffError(f"{path} cannot be read ({type(exc).__name__})") from None
    if len(lines) != len(run.queries):
        raise BakeoffError(f"{path} has {len(lines)} lines for {len(run.queries)} queries")
    try:
        return [parse_target(line) for line in lines]
    except ValueError as exc:
        raise BakeoffError(f"{path}: {exc}") from None


def _score_config(
    run: Run,
    config: str,
    letter: str,
    found: dict[tuple[int, str], bool],
    targets: list[Target] | None,
) -> ConfigScore:
    ran = [run.line(config, i) for i in range(len(run.queries))]
    ran = [line for line in ran if not line.skipped]
    targeted = (
        []
        if targets is None
        else [
            (line, targets[line.query_index])
            for line in ran
            if not targets[line.query_index].is_open
        ]
    )
    return ConfigScore(
        config=config,
        pack=letter,
        run=len(ran),
        skipped=len(run.queries) - len(ran),
        judged_hits=sum(found[(line.query_index, letter)] for line in ran),
        target_hits=sum(
            any(target.matches(str(hit.get("url", ""))) for hit in line.hits)
            for line, target in targeted
        ),
        targeted=len(targeted),
        tavily_credits=sum(line.credits.get("tavily", 0) for line in ran),
        brave_calls=sum(line.credits.get("brave_llm", 0) for line in ran),
        latencies_ms=tuple(line.latency_ms for line in ran if line.latency_ms is not None),
    )
