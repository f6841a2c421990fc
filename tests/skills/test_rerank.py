"""The SystemOneReranker against a fake System One on 127.0.0.1: every rule of skills.md §6–§9."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from clockkit import Clock

from siftlib.net.deadline import DeadlineClock
from siftlib.skills.catalog import Catalog
from siftlib.skills.consent import RerankSettings
from siftlib.skills.decide import Decision, Reason
from siftlib.skills.keyword import SkillResult, keyword_search
from siftlib.skills.observe import (
    Attempt,
    AttemptEvent,
    CacheState,
    SearchObservation,
    ShortlistKind,
)
from siftlib.skills.relevance import RelevanceIndex
from siftlib.skills.rerank import SystemOneReranker

from .systemone_fake import FakeSystemOne, catalog_of, fitted, ranked, serve

KEY = "ts-secret-key-for-tests"
SKILLS = {
    "pdf-forms": "Fill in and flatten PDF forms.",
    "pdf-merge": "Merge, split and reorder PDF files.",
    "pdf-ocr": "Extract text from scanned PDF documents with OCR.",
    "csv-clean": "Clean up messy CSV files: quotes, encodings, stray delimiters.",
    "git-bisect": "Find the commit that introduced a bug with git bisect.",
}
QUERY = "combine pdf documents"
EXAMPLE = {"pdf-merge": 0.60, "csv-clean": 0.25, "pdf-forms": 0.10}  # none: 0.05
# Bounds on waits for the fake to see an event: generous, as a loaded 2-core CI machine can
# stall a thread for seconds; a wait ends as soon as its event happens.
WAIT_LIMIT = 30.0
# The longest timeout allowed, for the tests not about the deadline: it also covers setting up
# the HTTP client on the first search, which a loaded machine can stretch past the 1 s default.
PATIENT_MS = 10_000


class Recorder:
    def __init__(self) -> None:
        self.events: list[Attempt | SearchObservation] = []

    def __call__(self, event: Attempt | SearchObservation) -> None:
        self.events.append(event)

    @property
    def searches(self) -> list[SearchObservation]:
        return [e for e in self.events if isinstance(e, SearchObservation)]

    @property
    def last(self) -> SearchObservation:
        return self.searches[-1]


@pytest.fixture
def fake() -> Iterator[FakeSystemOne]:
    yield from serve()


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    catalog = catalog_of(tmp_path / "skills", SKILLS)
    RelevanceIndex.of(catalog)  # built before the first search, as Session.open does
    return catalog


class Session:
    """A SystemOneReranker wired to the fake, with a recorder and a controllable clock."""

    def __init__(
        self, fake: FakeSystemOne, deadline_clock: DeadlineClock | None = None, **settings: Any
    ) -> None:
        self.fake = fake
        self.clock = Clock(50.0)
        self.recorder = Recorder()
        settings.setdefault("timeout_ms", PATIENT_MS)
        self.settings = RerankSettings(enabled=True, **settings)
        self.reranker = SystemOneReranker(
            self.settings,
            KEY,
            base_url=fake.url,
            clock=self.clock,
            deadline_clock=deadline_clock,
            observers=[self.recorder],
        )

    def search(
        self,
        catalog: Catalog,
        query: str = QUERY,
        limit: int = 5,
        cancel: threading.Event | None = None,
    ) -> tuple[SkillResult, SkillResult]:
        baseline = keyword_search(catalog, query, limit)
        return self.reranker.search(catalog, query, limit, baseline, cancel=cancel), baseline


class SteppedClock(DeadlineClock):
    """Deadline time that stands still until the provider has the request; then a wait for
    the answer jumps straight to its deadline, as if the provider had stalled until then."""

    def __init__(self, fake: FakeSystemOne) -> None:
        self.fake, self.time, self.waited_until = fake, 100.0, 0.0

    def now(self) -> float:
        return self.time

    def wait_event(self, event: threading.Event, *, until: float) -> bool:
        while not (event.is_set() or self.fake.requests):
            event.wait(0.01)  # the worker is still connecting: real time, asserted on nowhere
        if event.is_set():
            return True
        self.waited_until, self.time = until, max(self.time, until)
        return False


@pytest.fixture
def session(fake: FakeSystemOne) -> Iterator[Session]:
    s = Session(fake)
    yield s
    s.reranker.close()


def wait_for_request(fake: FakeSystemOne) -> None:
    """Wait (boundedly) until the fake has received a request."""
    give_up = time.monotonic() + WAIT_LIMIT
    while not fake.requests:
        assert time.monotonic() < give_up, "the provider was never called"
        time.sleep(0.01)


def names(result: SkillResult) -> list[str]:
    return [skill.name for skill in result.matches]


class TestDecisions:
    def test_worked_example(self, session: Session, catalog: Catalog) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        result, baseline = session.search(catalog)
        assert names(result) == ["pdf-merge", "csv-clean", "pdf-forms"]
        assert result.total == 3
        assert names(result) != names(baseline)
        assert session.recorder.last.decision is Decision.ACCEPTED
        (seen,) = session.fake.requests
        assert seen.format_error is None

    def test_worked_example_with_limit_one(self, session: Session, catalog: Catalog) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        result, _ = session.search(catalog, limit=1)
        assert names(result) == ["pdf-merge"]
        assert result.total == 3

    def test_results_are_rebuilt_from_the_local_catalog(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        result, _ = session.search(catalog)
        local = {skill.name: skill for skill in catalog.skills}
        assert all(skill is local[skill.name] for skill in result.matches)

    def test_accepted_no_match_empties_a_non_empty_baseline(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = ranked({"pdf-merge": 0.1}, 0.9)
        result, baseline = session.search(catalog)
        assert baseline.total > 0
        assert result == SkillResult(matches=(), total=0)
        assert session.recorder.last.decision is Decision.NO_MATCH

    def test_uncertain_returns_the_baseline(self, session: Session, catalog: Catalog) -> None:
        session.fake.handler = ranked({"pdf-merge": 0.5, "pdf-forms": 0.45}, 0.05)
        result, baseline = session.search(catalog)
        assert result is baseline
        assert session.recorder.last.reason is Reason.LOW_PROBABILITY

    def test_an_empty_baseline_stays_empty_on_failure(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = lambda body: (500, b"{}")
        result, baseline = session.search(catalog, query="zebra")
        assert baseline.total == 0 and result is baseline


def answered(answers: dict[str, Any]) -> Any:
    return lambda body: (
        200,
        json.dumps(
            {"model": "m", "answers": answers, "usage": {"input_tokens": 1, "output_tokens": 1}}
        ).encode(),
    )


def probabilities_of(body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    count = len(body["state"]["candidates"])
    probs: dict[str, Any] = {f"c{i}": 0.0 for i in range(count)}
    probs["c0"] = 0.9
    probs["none"] = 0.1
    probs.update(extra)
    return probs


def selection(probs: dict[str, Any]) -> dict[str, Any]:
    return {
        "selection": {"type": "choice", "choice": "c0", "confidence": 0.9, "probabilities": probs}
    }


def raw_answer(text: str) -> Any:
    return lambda body: (200, text.encode())


MALFORMED: dict[str, tuple[Any, Reason]] = {
    "unknown id": (
        lambda b: answered(selection(probabilities_of(b, c99=0.0)))(b),
        Reason.UNKNOWN_ID,
    ),
    "missing id": (
        lambda b: answered(selection({k: v for k, v in probabilities_of(b).items() if k != "c1"}))(
            b
        ),
        Reason.MISSING_ID,
    ),
    "missing no-match": (
        lambda b: answered(
            selection({**{k: v for k, v in probabilities_of(b).items() if k != "none"}, "c0": 1.0})
        )(b),
        Reason.MISSING_ID,
    ),
    "empty": (lambda b: answered(selection({}))(b), Reason.MISSING_ID),
    "wrong type": (
        lambda b: answered(selection(probabilities_of(b, c0="0.9")))(b),
        Reason.WRONG_TYPE,
    ),
    "negative": (
        lambda b: answered(selection(probabilities_of(b, c0=1.1, c1=-0.1)))(b),
        Reason.OUT_OF_RANGE,
    ),
    "above one": (
        lambda b: answered(selection(probabilities_of(b, c0=1.5)))(b),
        Reason.OUT_OF_RANGE,
    ),
    "bad sum": (lambda b: answered(selection(probabilities_of(b, c1=0.3)))(b), Reason.BAD_SUM),
    "no selection": (
        lambda b: answered({"other": {"type": "noul", "noul": 0.9}})(b),
        Reason.MALFORMED,
    ),
    "choice only": (
        lambda b: answered({"selection": {"type": "choice", "choice": "c0", "confidence": 0.99}})(
            b
        ),
        Reason.MALFORMED,
    ),
    "prose": (lambda b: raw_answer("The best skill is pdf-merge.")(b), Reason.MALFORMED),
    "not an object": (lambda b: raw_answer("[1, 2]")(b), Reason.MALFORMED),
}


class TestFailures:
    @pytest.mark.parametrize("kind", sorted(MALFORMED))
    def test_malformed_answers_return_the_baseline(
        self, session: Session, catalog: Catalog, kind: str
    ) -> None:
        handler, reason = MALFORMED[kind]
        session.fake.handler = handler
        result, baseline = session.search(catalog)
        assert result is baseline
        assert (session.recorder.last.decision, session.recorder.last.reason) == (
            Decision.FAILURE,
            reason,
        )

    def test_nan_and_duplicate_ids_on_the_wire(self, session: Session, catalog: Catalog) -> None:
        for text, reason in (
            (
                '{"model":"m","answers":{"selection":{"type":"choice","probabilities":'
                '{"c0":NaN,"none":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}',
                Reason.OUT_OF_RANGE,
            ),
            (
                '{"model":"m","answers":{"selection":{"type":"choice","probabilities":'
                '{"c0":0.5,"c0":0.4,"none":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}',
                Reason.DUPLICATE_ID,
            ),
        ):
            session.fake.handler = raw_answer(text)
            result, baseline = session.search(catalog)
            assert result is baseline
            assert session.recorder.last.reason is reason

    @pytest.mark.parametrize(
        ("status", "reason"),
        [
            (429, Reason.RATE_LIMITED),
            (500, Reason.SERVER_ERROR),
            (503, Reason.SERVER_ERROR),
            (401, Reason.AUTH),
            (422, Reason.REJECTED),
        ],
    )
    def test_one_request_per_search_and_no_retry(
        self, session: Session, catalog: Catalog, status: int, reason: Reason
    ) -> None:
        session.fake.handler = lambda body: (status, b'{"detail":"x"}')
        result, baseline = session.search(catalog)
        assert result is baseline
        assert len(session.fake.requests) == 1
        assert session.recorder.last.reason is reason
        attempts = [e for e in session.recorder.events if isinstance(e, Attempt)]
        assert attempts == [Attempt(AttemptEvent.STARTED), Attempt(AttemptEvent.FAILED, reason)]

    def test_deadline_with_a_provider_that_never_answers(
        self, fake: FakeSystemOne, catalog: Catalog
    ) -> None:
        clock = SteppedClock(fake)
        session = Session(fake, deadline_clock=clock, timeout_ms=300)
        fake.handler = lambda body: "hang"
        result, baseline = session.search(catalog)
        assert result is baseline
        assert clock.waited_until == 100.0 + 0.3  # the deadline: timeout_ms after the start
        assert fake.connections_closed.wait(WAIT_LIMIT)
        assert session.recorder.last.reason is Reason.TIMEOUT
        assert len(fake.requests) == 1

    def test_the_deadline_covers_reading_a_slow_body(
        self, fake: FakeSystemOne, catalog: Catalog
    ) -> None:
        clock = SteppedClock(fake)
        session = Session(fake, deadline_clock=clock, timeout_ms=300)
        fake.handler = lambda body: "trickle"
        result, baseline = session.search(catalog)
        assert result is baseline
        assert clock.waited_until == 100.0 + 0.3
        assert fake.connections_closed.wait(WAIT_LIMIT)
        assert session.recorder.last.reason is Reason.TIMEOUT

    def test_cancellation_aborts_the_request(self, fake: FakeSystemOne, catalog: Catalog) -> None:
        session = Session(fake, timeout_ms=10000)
        fake.handler = lambda body: "hang"
        cancel = threading.Event()

        def cancel_once_sent() -> None:  # a request at the provider, however slow the machine
            wait_for_request(fake)
            cancel.set()

        threading.Thread(target=cancel_once_sent).start()
        started = time.monotonic()
        result, baseline = session.search(catalog, cancel=cancel)
        assert result is baseline
        assert time.monotonic() - started < 5.0  # far below the 10 s deadline
        assert fake.connections_closed.wait(WAIT_LIMIT)
        assert session.recorder.last.reason is Reason.CANCELLED
        assert len(fake.requests) == 1

    def test_a_search_cancelled_before_it_starts_makes_no_call(
        self, session: Session, catalog: Catalog
    ) -> None:
        cancel = threading.Event()
        cancel.set()
        result, baseline = session.search(catalog, cancel=cancel)
        assert result is baseline and session.fake.requests == []

    def test_close_aborts_an_outstanding_search(
        self, fake: FakeSystemOne, catalog: Catalog
    ) -> None:
        session = Session(fake, timeout_ms=10000)
        fake.handler = lambda body: "hang"

        def close_once_sent() -> None:  # outstanding for sure, however slow the machine
            wait_for_request(fake)
            session.reranker.close()

        threading.Thread(target=close_once_sent).start()
        result, baseline = session.search(catalog)
        assert result is baseline
        assert fake.connections_closed.wait(WAIT_LIMIT)
        assert session.recorder.last.decision is Decision.FAILURE
        # After close, nothing more is sent.
        session.search(catalog)
        assert len(fake.requests) == 1
        assert session.recorder.last.reason is Reason.CLOSED

    def test_unreachable_provider(self, catalog: Catalog) -> None:
        from .systemone_fake import free_port_refusing

        reranker = SystemOneReranker(
            RerankSettings(enabled=True), KEY, base_url=free_port_refusing()
        )
        baseline = keyword_search(catalog, QUERY, 5)
        assert reranker.search(catalog, QUERY, 5, baseline) is baseline


class TestNoCall:
    def test_exact_name_returns_the_keyword_result(
        self, session: Session, catalog: Catalog
    ) -> None:
        result, baseline = session.search(catalog, query="  PDF-Merge ")
        assert result is baseline and session.fake.requests == []
        assert session.recorder.last.reason is Reason.EXACT_NAME

    def test_empty_catalog(self, session: Session) -> None:
        result, baseline = session.search(Catalog(skills=()), query="merge pdf")
        assert result == SkillResult(matches=(), total=0) and result is baseline
        assert session.fake.requests == []
        assert session.recorder.last.reason is Reason.EMPTY_CATALOG

    def test_a_query_over_max_query_bytes(self, fake: FakeSystemOne, catalog: Catalog) -> None:
        session = Session(fake, max_query_bytes=8)
        result, baseline = session.search(catalog, query="merge pdf documents")
        assert result is baseline and fake.requests == []
        assert session.recorder.last.shortlist_kind is ShortlistKind.NO_REQUEST


class TestFit:
    def settings(self, fake: FakeSystemOne) -> Session:
        return Session(fake, experimental_fit=True)

    def test_applicable_candidates_in_choice_order(
        self, fake: FakeSystemOne, catalog: Catalog
    ) -> None:
        session = self.settings(fake)
        fake.handler = fitted(
            {"pdf-merge": 0.7, "pdf-ocr": 0.2},
            0.1,
            {"pdf-merge": 0.9, "pdf-ocr": 0.8, "pdf-forms": 0.76, "csv-clean": 0.5},
        )
        result, _ = session.search(catalog, limit=2)
        # pdf-forms has choice probability 0 (below no-match) but is applicable.
        assert names(result) == ["pdf-merge", "pdf-ocr"]
        assert result.total == 3
        (seen,) = fake.requests
        assert seen.format_error is None
        assert len(seen.body["questions"]) == 1 + len(seen.body["state"]["candidates"])

    def test_all_inapplicable_is_no_match(self, fake: FakeSystemOne, catalog: Catalog) -> None:
        session = self.settings(fake)
        fake.handler = fitted({"pdf-merge": 0.9}, 0.1, {})
        result, baseline = session.search(catalog)
        assert baseline.total > 0 and result == SkillResult((), 0)

    def test_none_applicable_falls_back(self, fake: FakeSystemOne, catalog: Catalog) -> None:
        session = self.settings(fake)
        fake.handler = fitted({"pdf-merge": 0.9}, 0.1, {"pdf-merge": 0.5})
        result, baseline = session.search(catalog)
        assert result is baseline
        assert session.recorder.last.reason is Reason.NONE_APPLICABLE

    @pytest.mark.parametrize(
        ("edit", "reason"),
        [
            (lambda answers: answers.pop("fit_c1"), Reason.MISSING_ID),
            (
                lambda answers: answers.update(fit_c99={"type": "noul", "noul": 0.5}),
                Reason.UNKNOWN_ID,
            ),
        ],
        ids=["missing", "extra"],
    )
    def test_a_missing_or_extra_fit_answer_falls_back(
        self, fake: FakeSystemOne, catalog: Catalog, edit: Any, reason: Reason
    ) -> None:
        session = self.settings(fake)
        full = fitted({"pdf-merge": 0.9}, 0.1, {"pdf-merge": 0.9})

        def handler(body: dict[str, Any]) -> Any:
            answer = json.loads(full(body)[1])  # type: ignore[index]
            edit(answer["answers"])
            return 200, json.dumps(answer).encode()

        fake.handler = handler
        result, baseline = session.search(catalog)
        assert result is baseline
        assert session.recorder.last.reason is reason


class TestCache:
    def test_a_hit_makes_no_request_and_serves_any_limit(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        first, _ = session.search(catalog, limit=5)
        second, _ = session.search(catalog, limit=1)
        assert len(session.fake.requests) == 1
        assert names(second) == names(first)[:1] and second.total == 3
        assert [o.cache for o in session.recorder.searches] == [CacheState.STORED, CacheState.HIT]

    def test_accepted_no_match_is_cached(self, session: Session, catalog: Catalog) -> None:
        session.fake.handler = ranked({}, 1.0)
        session.search(catalog)
        result, _ = session.search(catalog)
        assert result == SkillResult((), 0) and len(session.fake.requests) == 1

    def test_the_query_is_normalised_in_the_key(self, session: Session, catalog: Catalog) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog, query=QUERY)
        session.search(catalog, query="  " + QUERY.upper())
        assert len(session.fake.requests) == 1

    @pytest.mark.parametrize(
        "handler",
        [
            ranked({"pdf-merge": 0.5, "pdf-forms": 0.45}, 0.05),  # uncertain
            lambda body: (500, b"{}"),  # failed
            lambda body: (200, b"nonsense"),  # malformed
        ],
    )
    def test_uncertain_and_failed_outcomes_are_never_cached(
        self, session: Session, catalog: Catalog, handler: Any
    ) -> None:
        session.fake.handler = handler
        session.search(catalog)
        session.search(catalog)
        assert len(session.fake.requests) == 2
        assert CacheState.STORED not in [o.cache for o in session.recorder.searches]

    def test_expiry_on_the_injected_monotonic_clock(
        self, fake: FakeSystemOne, catalog: Catalog
    ) -> None:
        session = Session(fake, cache_ttl_ms=1000)
        fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog)
        session.clock.now += 0.999
        session.search(catalog)  # a hit, which does not extend the entry
        assert len(fake.requests) == 1
        session.clock.now += 0.001
        session.search(catalog)
        assert len(fake.requests) == 2

    def test_lru_eviction(self, fake: FakeSystemOne, catalog: Catalog) -> None:
        session = Session(fake, cache_max_entries=2)
        fake.handler = ranked(EXAMPLE, 0.05)
        for query in ("merge pdf", "split pdf", "merge pdf", "ocr pdf", "merge pdf", "split pdf"):
            session.search(catalog, query=query)
        # merge, split, (merge hit), ocr evicts split, (merge hit), split evicts ocr
        assert [s.body["state"]["query"] for s in fake.requests] == [
            "merge pdf",
            "split pdf",
            "ocr pdf",
            "split pdf",
        ]

    @pytest.mark.parametrize(("setting", "value"), [("cache_max_entries", 0), ("cache_ttl_ms", 0)])
    def test_zero_disables_the_cache(
        self, fake: FakeSystemOne, catalog: Catalog, setting: str, value: int
    ) -> None:
        session = Session(fake, **{setting: value})
        fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog)
        session.search(catalog)
        assert len(fake.requests) == 2
        assert session.recorder.last.cache is CacheState.DISABLED

    def test_a_catalog_change_clears_the_cache(
        self, session: Session, catalog: Catalog, tmp_path: Path
    ) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog)
        moved = catalog_of(tmp_path / "elsewhere", SKILLS)  # same metadata, other paths
        result, _ = session.search(moved)
        assert len(session.fake.requests) == 2
        assert all(str(tmp_path / "elsewhere") in str(s.file_path) for s in result.matches)
        session.search(catalog)  # and back again: the first entry is gone too
        assert len(session.fake.requests) == 3

    def test_close_clears_the_cache_and_ends_the_session(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog)
        session.reranker.close()
        result, baseline = session.search(catalog)
        assert result is baseline

    def test_a_new_key_or_config_starts_an_empty_cache(
        self, fake: FakeSystemOne, catalog: Catalog
    ) -> None:
        fake.handler = ranked(EXAMPLE, 0.05)
        first = Session(fake)
        first.search(catalog)
        first.search(catalog)
        assert len(fake.requests) == 1
        for reranker in (
            SystemOneReranker(first.settings, "another-key", base_url=fake.url),
            SystemOneReranker(
                RerankSettings(enabled=True, min_margin=0.2, timeout_ms=PATIENT_MS),
                KEY,
                base_url=fake.url,
            ),
        ):
            reranker.search(catalog, QUERY, 5, keyword_search(catalog, QUERY, 5))
        assert len(fake.requests) == 3
        assert fake.requests[1].headers["Authorization"] == "Bearer another-key"

    def test_every_setting_is_in_the_key_but_never_the_api_key(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog)
        (key,) = session.reranker._cache._entries  # white-box: the key itself
        flat = json.dumps(key, default=str)
        assert KEY not in flat
        for field in fields(RerankSettings):
            assert getattr(session.settings, field.name) in key[3]
        assert key[2] == QUERY and key[1] == "jev-latest"


class TestConcurrency:
    def test_an_answer_after_a_catalog_change_is_discarded(
        self, session: Session, catalog: Catalog, tmp_path: Path
    ) -> None:
        gate = threading.Event()
        example = ranked(EXAMPLE, 0.05)

        def slow(body: dict[str, Any]) -> Any:
            if body["state"]["query"] == QUERY:
                gate.wait(5)
            return example(body)

        session.fake.handler = slow
        outcome: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: outcome.update(r=session.search(catalog)))
        worker.start()
        wait_for_request(session.fake)
        changed = catalog_of(tmp_path / "reloaded", SKILLS)
        session.search(changed, query="merge pdf")
        gate.set()
        worker.join(5)
        result, baseline = outcome["r"]
        assert result is baseline
        stale = [o for o in session.recorder.searches if o.reason is Reason.STALE]
        assert len(stale) == 1
        assert len(session.reranker._cache) == 1  # only the fresh answer was stored

    def test_concurrent_searches_get_their_own_answers(
        self, session: Session, catalog: Catalog
    ) -> None:
        winners = {
            "merge pdf": "pdf-merge",
            "ocr pdf": "pdf-ocr",
            "fill pdf": "pdf-forms",
            "clean csv": "csv-clean",
        }

        def handler(body: dict[str, Any]) -> Any:
            time.sleep(0.05)
            return ranked({winners[body["state"]["query"]]: 0.9}, 0.1)(body)

        session.fake.handler = handler
        results: dict[str, SkillResult] = {}

        def run(query: str) -> None:
            results[query] = session.search(catalog, query=query)[0]

        threads = [threading.Thread(target=run, args=(q,)) for q in winners]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert {q: names(r) for q, r in results.items()} == {q: [w] for q, w in winners.items()}


class TestObservers:
    def test_observations_hold_only_enums_indexes_and_counts(
        self, session: Session, catalog: Catalog
    ) -> None:
        session.fake.handler = ranked(EXAMPLE, 0.05)
        session.search(catalog)
        observation = session.recorder.last
        position = {s.name: i for i, s in enumerate(catalog.skills)}
        assert observation.result == tuple(
            position[n] for n in ("pdf-merge", "csv-clean", "pdf-forms")
        )
        assert observation.shortlist_kind is ShortlistKind.REQUEST
        assert sorted(observation.shortlist) == list(range(len(SKILLS)))
        assert (observation.input_tokens, observation.output_tokens) == (321, 7)
        for event in session.recorder.events:
            for value in vars(event).values():
                items = value if isinstance(value, tuple) else (value,)
                assert all(not isinstance(v, str | Path) for v in items), event

    def test_a_raising_observer_is_ignored(self, fake: FakeSystemOne, catalog: Catalog) -> None:
        def broken(event: object) -> None:
            raise RuntimeError("observer bug")

        fake.handler = ranked(EXAMPLE, 0.05)
        reranker = SystemOneReranker(
            RerankSettings(enabled=True, timeout_ms=PATIENT_MS),
            KEY,
            base_url=fake.url,
            observers=[broken],
        )
        result = reranker.search(catalog, QUERY, 5, keyword_search(catalog, QUERY, 5))
        assert names(result) == ["pdf-merge", "csv-clean", "pdf-forms"]

    def test_base_url_from_the_environment(
        self, fake: FakeSystemOne, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("TYPESAFE_BASE_URL", fake.url)
        fake.handler = ranked(EXAMPLE, 0.05)
        reranker = SystemOneReranker(RerankSettings(enabled=True, timeout_ms=PATIENT_MS), KEY)
        result = reranker.search(catalog, QUERY, 5, keyword_search(catalog, QUERY, 5))
        assert result.total == 3 and len(fake.requests) == 1


class TestCommandWiring:
    """`sift rerank-skills` builds the SystemOneReranker only with consent and a key."""

    def write_skills(self, root: Path) -> Path:
        for name, description in SKILLS.items():
            folder = root / name
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: {description}\n---\nBody.\n"
            )
        return root

    def run(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, config_text: str
    ) -> dict[str, Any]:
        from siftlib.cli import main

        skills = self.write_skills(tmp_path / "skills")
        config = tmp_path / "config.toml"
        config.write_text(config_text)
        argv = ["rerank-skills", QUERY, "--json", "--skills-dir", str(skills)]
        code = main([*argv, "--config", str(config), "--cwd", str(tmp_path)])
        captured = capsys.readouterr()
        assert code == 0
        assert KEY not in captured.out + captured.err
        result: dict[str, Any] = json.loads(captured.out)
        return result

    def test_opted_in_search_is_reranked(
        self,
        fake: FakeSystemOne,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
        monkeypatch.setenv("TYPESAFE_BASE_URL", fake.url)
        fake.handler = ranked(EXAMPLE, 0.05)
        config = f"[skill_search.reranking]\nenabled = true\ntimeout_ms = {PATIENT_MS}\n"
        out = self.run(capsys, tmp_path, config)
        assert [m["name"] for m in out["details"]["matches"]] == list(EXAMPLE)
        assert out["details"]["total"] == 3
        assert len(fake.requests) == 1 and fake.requests[0].format_error is None

    def test_no_key_or_no_consent_makes_no_request(
        self,
        fake: FakeSystemOne,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setenv("TYPESAFE_BASE_URL", fake.url)
        fake.handler = ranked(EXAMPLE, 0.05)
        self.run(capsys, tmp_path / "a", "[skill_search.reranking]\nenabled = true\n")
        monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
        self.run(capsys, tmp_path / "b", "[skill_search.reranking]\nenabled = false\n")
        assert fake.requests == []

    def test_a_stdio_reload_aborts_the_outstanding_call(
        self,
        fake: FakeSystemOne,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        import io
        import os

        from siftlib.commands.rerank_skills import warn
        from siftlib.skills.session import Session, serve_stdio

        monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
        monkeypatch.setenv("TYPESAFE_BASE_URL", fake.url)
        skills = self.write_skills(tmp_path / "skills")
        config = tmp_path / "config.toml"
        config.write_text("[skill_search.reranking]\nenabled = true\ntimeout_ms = 10000\n")
        fake.handler = lambda body: "hang"
        read_end, write_end = os.pipe()
        stdout = io.StringIO()

        def open_session() -> Any:
            return Session.open(config_path=config, skills_dirs=[skills], cwd=tmp_path)

        with os.fdopen(read_end, "rb") as stdin:
            runner = threading.Thread(
                target=serve_stdio, args=(open_session, stdin, stdout), kwargs={"warn": warn}
            )
            runner.start()
            started = time.monotonic()
            with os.fdopen(write_end, "wb") as feed:  # closing it is the session's EOF
                feed.write(json.dumps({"query": QUERY, "limit": 5}).encode() + b"\n")
                feed.flush()
                wait_for_request(fake)
                feed.write(b'{"op": "reload"}\n')
                feed.flush()
                assert fake.connections_closed.wait(WAIT_LIMIT)
            runner.join(10)
            assert not runner.is_alive()
        assert time.monotonic() - started < 5.0  # far below the 10 s deadline
        first, second = (json.loads(line) for line in stdout.getvalue().splitlines())
        fresh = Session.open(config_path=config, skills_dirs=[skills], cwd=tmp_path)[0]
        fresh.close()
        baseline = keyword_search(fresh.snapshot.catalog, QUERY, 5)
        assert [m["name"] for m in first["details"]["matches"]] == names(baseline)
        assert second == {"ok": True}
        assert len(fake.requests) == 1


class TestRealCatalog:
    """The 119 real skills of ../shared/realdata go through the whole path."""

    def catalog(self, path: Path, root: Path) -> Catalog:
        entries: dict[str, str] = {}
        for entry in json.loads(path.read_text()):
            if not entry.get("disable_model_invocation"):
                entries.setdefault(entry["name"], entry["description"])  # first one wins
        return catalog_of(root, entries)

    @pytest.mark.parametrize("fit", [False, True])
    def test_every_shortlist_is_a_valid_request_and_answers_are_used(
        self, fake: FakeSystemOne, real_catalog_json: Path, tmp_path: Path, fit: bool
    ) -> None:
        catalog = self.catalog(real_catalog_json, tmp_path)
        session = Session(fake, max_candidates=64, experimental_fit=fit)
        queries = [
            "fuzz a rust crate",
            "review my pull request",
            "extract text from a pdf",
            "write a new skill",
            "audit a smart contract",
            "debug a failing test",
        ]
        for query in queries:
            # The last candidate sent wins: often a long, truncated or non-ASCII description.
            def handler(body: dict[str, Any]) -> Any:
                last = body["state"]["candidates"][-1]["name"]
                if fit:
                    return fitted({last: 0.9}, 0.1, {last: 0.95})(body)
                return ranked({last: 0.9}, 0.1)(body)

            fake.handler = handler
            result, _ = session.search(catalog, query=query)
            seen = fake.requests[-1]
            assert seen.format_error is None
            sent = seen.body["state"]["candidates"]
            assert len(sent) == 64
            assert [skill.name for skill in result.matches] == [sent[-1]["name"]]
            local = {skill.name: skill for skill in catalog.skills}
            assert result.matches[0] is local[sent[-1]["name"]]
            assert all(len(c["description"].encode()) <= 512 for c in sent)
        assert len(fake.requests) == len(queries)


class TestUntrustedAnswers:
    def test_random_garbage_never_escapes_a_search(
        self, session: Session, catalog: Catalog
    ) -> None:
        import random

        rng = random.Random(20261130)
        atoms: list[Any] = [None, True, 0, 1, -1, 0.5, 1e308, 10**40, "", "c0", "none", [], {}]

        def garbage(depth: int) -> Any:
            if depth == 0 or rng.random() < 0.3:
                return rng.choice(atoms)
            if rng.random() < 0.5:
                return [garbage(depth - 1) for _ in range(rng.randint(0, 3))]
            keys = [
                "selection",
                "type",
                "choice",
                "probabilities",
                "noul",
                "c0",
                "c1",
                "none",
                "answers",
                "usage",
                "input_tokens",
            ]
            return {rng.choice(keys): garbage(depth - 1) for _ in range(rng.randint(0, 4))}

        bodies: list[bytes] = []
        for _ in range(60):
            answer = {"model": "m", "answers": garbage(4), "usage": garbage(2)}
            if rng.random() < 0.5:
                answer["answers"] = {"selection": {"type": "choice", "probabilities": garbage(2)}}
            bodies.append(json.dumps(answer).encode())
        session.fake.handler = lambda body: (200, bodies.pop())
        while bodies:
            result, baseline = session.search(catalog, query=f"merge pdf {len(bodies)}")
            assert result is baseline
            assert session.recorder.last.decision is Decision.FAILURE
            assert session.recorder.last.reason is not Reason.INTERNAL  # caught as untrusted

    def test_a_defect_of_ours_still_returns_the_baseline(
        self, session: Session, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(*args: object) -> None:
            raise RuntimeError("a bug")

        monkeypatch.setattr("siftlib.skills.rerank.build_request", broken)
        result, baseline = session.search(catalog)
        assert result is baseline
        assert session.recorder.last.reason is Reason.INTERNAL
