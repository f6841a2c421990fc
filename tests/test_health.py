"""The rolling per-source record behind `/healthz` (siftlib/search/health.py)."""

from __future__ import annotations

from siftlib.search.health import FAILING_AFTER, WINDOW, Health


def test_a_source_never_seen_has_an_empty_record() -> None:
    assert Health().report("searxng") == {
        "recent": 0,
        "success_rate": None,
        "p50_ms": None,
        "p90_ms": None,
    }
    assert not Health().failing("searxng")


def test_failing_after_m_consecutive_failures_and_ok_again_after_one_success() -> None:
    health = Health()
    for _ in range(FAILING_AFTER - 1):
        health.record("tavily", ok=False, ms=8000.0)
    assert not health.failing("tavily")
    health.record("tavily", ok=False, ms=None)
    assert health.failing("tavily")
    health.record("tavily", ok=True, ms=300.0)
    assert not health.failing("tavily")
    health.record("tavily", ok=False, ms=None)
    assert not health.failing("tavily")  # the run starts over


def test_failures_of_one_source_leave_the_others_alone() -> None:
    health = Health(failing_after=2)
    health.record("tavily", ok=False, ms=None)
    health.record("searxng", ok=True, ms=10.0)
    health.record("tavily", ok=False, ms=None)
    assert health.failing("tavily") and not health.failing("searxng")


def test_rate_and_nearest_rank_percentiles_over_the_last_n_outcomes() -> None:
    health = Health()
    for ms in range(1, 31):  # 30 outcomes; only the last 20 (11..30 ms) count
        health.record("searxng", ok=ms % 5 != 0, ms=float(ms))
    # Of 11..30, 15, 20, 25 and 30 failed: 16 of 20.
    assert health.report("searxng") == {
        "recent": WINDOW,
        "success_rate": 0.8,
        "p50_ms": 20,  # the 10th of 20
        "p90_ms": 28,  # the 18th of 20
    }


def test_outcomes_that_never_went_out_have_no_latency() -> None:
    health = Health()
    health.record("brave_llm", ok=False, ms=None)
    health.record("brave_llm", ok=True, ms=120.4)
    assert health.report("brave_llm") == {
        "recent": 2,
        "success_rate": 0.5,
        "p50_ms": 120,
        "p90_ms": 120,
    }
