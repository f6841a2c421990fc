"""Several `sift serve` processes on one real redis-server: one cache, one budget (store.md §3)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from gatewaykit import FakeUpstream, call, serve_process, wait_until, write_config
from rediskit import RedisServer

from siftlib.cli import main
from siftlib.config import Secrets, load_config
from siftlib.search.pipeline import Searcher, SearchRequest
from siftlib.store.factory import open_configured_store
from siftlib.store.redis import RETRY_AFTER, SETTLE_AFTER

pytestmark = pytest.mark.one_worker  # a browser or gateways for the module

PASSWORD = "pw-4c1d-never-shown"
TOKENS = {"alice": "tok-alice", "bob": "tok-bob"}
# After an outage a gateway tries the store again after RETRY_AFTER and trusts its totals
# SETTLE_AFTER later.
TRUSTED_AFTER = RETRY_AFTER + SETTLE_AFTER


@pytest.fixture
def shared_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that wants a password, as a fleet's would."""
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    server.start()
    yield server
    server.stop()


class Fleet:
    """Gateway processes on one Redis, each with its own config directory and log."""

    def __init__(self, root: Path, redis_url: str, stack: ExitStack, **config: Any) -> None:
        self.root, self.redis_url, self.stack, self.config = root, redis_url, stack, config
        self.logs: list[Path] = []

    def start(self, *, password: str = PASSWORD, share: float | None = None) -> str:
        directory = self.root / f"gateway{len(self.logs)}"
        directory.mkdir()
        path = write_config(directory, store=self.redis_url, restricted=("alice",), **self.config)
        if share is not None:
            text = path.read_text().replace("[search]", f"store_fallback_share = {share}\n[search]")
            path.write_text(text)
        lines = [f"SIFT_STORE_PASSWORD={password}", "TAVILY_API_KEY=tvly-key"]
        lines += [f"SIFT_TOKEN_{name.upper()}={token}" for name, token in TOKENS.items()]
        (directory / "secret.env").write_text("\n".join(lines) + "\n")
        log = directory / "serve.log"
        self.logs.append(log)
        return self.stack.enter_context(serve_process(path, log=log))

    def output(self) -> str:
        return "".join(log.read_text() for log in self.logs)


@pytest.fixture
def fleet(
    tmp_path: Path, shared_redis: RedisServer, searxng: FakeUpstream, tavily: FakeUpstream
) -> Iterator[Callable[..., Fleet]]:
    with ExitStack() as stack:

        def make(**config: Any) -> Fleet:
            options = {"searxng": searxng.url, "tavily": tavily.url, **config}
            return Fleet(tmp_path, shared_redis.url, stack, **options)

        yield make


def search(url: str, query: str, caller: str = "bob") -> dict[str, Any]:
    reply = call(url, "POST", "/v1/search", {"query": query}, token=TOKENS[caller])
    assert reply.status == 200, reply.raw
    answer: dict[str, Any] = reply.json
    return answer


def test_two_gateways_with_8_threads_each_end_exactly_at_the_cap(
    fleet: Callable[..., Fleet], tavily: FakeUpstream, shared_redis: RedisServer
) -> None:
    gateways = fleet(tavily_cap=40)
    urls = [gateways.start(), gateways.start()]
    answers: list[dict[str, Any]] = []
    go = threading.Event()

    def race(url: str, name: str) -> None:
        go.wait()
        for i in range(6):
            answers.append(search(url, f"race {name} query {i}"))

    threads = [
        threading.Thread(target=race, args=(url, f"{n}-{t}"))
        for n, url in enumerate(urls)
        for t in range(8)
    ]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 2 * 8 * 6
    # 96 distinct searches for 40 credits: never past the cap across both gateways...
    assert len(tavily.calls) <= 40
    # ...and exactly at it. On a starved machine a reserve whose reply came late twice holds its
    # credit until the gateway withdraws it, so one can still be free after the race: fresh
    # searches spend it then (on a quiet machine none is needed).
    deadline = time.monotonic() + 20
    while len(tavily.calls) < 40:
        assert time.monotonic() < deadline, f"the fleet stopped at {len(tavily.calls)} of 40"
        answers.append(search(urls[len(answers) % 2], f"after the race {len(answers)}"))
    assert len(tavily.calls) == 40
    assert sum("tavily" in a["sizes"]["sources_ok"] for a in answers) == 40
    assert sum("tavily: daily cap" in a["warnings"] for a in answers) == len(answers) - 40
    with shared_redis.client() as client:
        assert [key.decode() for key in client.keys("sift:cap:*")] == [
            f"sift:cap:tavily:{time.strftime('%Y-%m-%d', time.gmtime())}"
        ]
        counter = client.keys("sift:cap:*")[0]
        wait_until(lambda: int(client.get(counter)) == 40, "the counter at the cap")


def test_a_fill_through_one_gateway_is_a_hit_through_the_other_but_partitions_stay_apart(
    fleet: Callable[..., Fleet], searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    gateways = fleet()
    first, second = gateways.start(), gateways.start()
    assert search(first, "shared fill")["cached"] is False
    calls = len(searxng.calls), len(tavily.calls)
    again = search(second, "shared fill")
    assert again["cached"] is True
    assert (len(searxng.calls), len(tavily.calls)) == calls
    # alice is restricted: her entry is invisible to the fleet on the other gateway, and the
    # fleet's entry is invisible to her.
    assert search(first, "private fill", caller="alice")["cached"] is False
    assert search(second, "private fill", caller="bob")["cached"] is False
    assert search(second, "shared fill", caller="alice")["cached"] is False
    assert search(second, "private fill", caller="alice")["cached"] is True


def store_up(url: str) -> Any:
    """Return a gateway's `store_up` gauge, read from its metrics."""
    return call(url, "GET", "/metrics", token=TOKENS["bob"]).json["store_up"]


def test_the_store_killed_under_load_then_restarted(
    fleet: Callable[..., Fleet], tavily: FakeUpstream, shared_redis: RedisServer
) -> None:
    cap = 40
    gateways = fleet(tavily_cap=cap)
    urls = [gateways.start(share=0.5), gateways.start(share=0.5)]
    answers: list[dict[str, Any]] = []
    stop = threading.Event()

    def load(url: str, name: str) -> None:
        for i in range(200):
            if stop.is_set():
                return
            answers.append(search(url, f"load {name} {i}"))
            answers.append(search(url, "the same cached query"))

    threads = [
        threading.Thread(target=load, args=(url, f"{n}{t}"))
        for n, url in enumerate(urls)
        for t in range(4)
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(answers) >= 20, "20 answers", limit=60)
        assert call(urls[0], "GET", "/healthz").json["store"] == "redis"
        # A starved machine can make three replies in a row late, which marks the store down for
        # a second: what matters is that it is up before the kill.
        wait_until(lambda: store_up(urls[0]) == {"kind=redis": 1}, "the store up under load")
        shared_redis.kill()
        before = len(tavily.calls)
        assert before < cap  # the cap is not reached yet: what follows tests the leases
        # Keep going well past the kill: every search answers, uncached.
        wait_until(
            lambda: sum("store: unavailable" in a["warnings"] for a in answers) >= 60,
            "60 answers without the store",
            limit=60,
        )
        for url in urls:
            health = call(url, "GET", "/healthz").json
            assert health["status"] == "degraded"
            assert "store: redis unreachable" in health["degraded"]
            assert store_up(url) == {"kind=redis": 0}
    finally:  # a failure above must not leave eight threads searching a stopped fleet
        stop.set()
        for thread in threads:
            thread.join(60)
    outage = [a for a in answers if "store: unavailable" in a["warnings"]]
    assert len(outage) >= 60
    # Each gateway spends only its lease (booked on the store before the kill, at most half
    # of what was left), and then refuses Tavily as capped.
    assert len(tavily.calls) - before <= 2 * cap // 2
    assert len(tavily.calls) <= cap
    assert any("tavily: daily cap" in a["warnings"] for a in outage)

    shared_redis.start()  # the same port, empty: no restart of sift
    for n, url in enumerate(urls):
        deadline = time.monotonic() + 20
        # A query of each gateway's own: one the other left a fill lock on would wait FILL_WAIT.
        while "store: unavailable" in search(url, f"after the outage {n}")["warnings"]:
            assert time.monotonic() < deadline, "the gateway did not find the store again"
            time.sleep(0.1)
        health = call(url, "GET", "/healthz").json
        # The store is back; Tavily may well be capped: the outage spent the rest of the cap,
        # and the empty store was raised to the last total seen.
        assert not any(item.startswith("store:") for item in health.get("degraded", [])), health

    # The shared cache works again: an answer stored through one gateway is a hit through
    # the other. A cache key names the sources planned, and a gateway that still holds part
    # of the cap (its lease) plans Tavily while the other does not; a search whose reserve is
    # refused is not stored; a late reply can fail one operation on a loaded machine. So it
    # is tried with fresh queries until both gateways planned alike.
    def shared_hit(i: int) -> bool:
        search(urls[0], f"recovered {i}")
        return search(urls[1], f"recovered {i}")["cached"] is True

    queries = itertools.count()
    wait_until(lambda: shared_hit(next(queries)), "a hit through the other gateway")

    # The empty store did not reset the cap: it was re-created from the last totals seen
    # (leases included), so it counts every call made, and no call passed the cap.
    assert len(tavily.calls) <= cap
    counter = f"sift:cap:tavily:{time.strftime('%Y-%m-%d', time.gmtime())}"
    with shared_redis.client() as client:
        wait_until(lambda: int(client.get(counter) or 0) >= len(tavily.calls), "every call counted")
    output = gateways.output()
    assert f"; store: redis 127.0.0.1:{shared_redis.port}/0\n" in output  # the start line
    assert f"store: redis unreachable at 127.0.0.1:{shared_redis.port}/0;" in output
    assert "reachable again" in output
    assert "Traceback" not in output


def test_the_password_is_in_no_output(
    fleet: Callable[..., Fleet], shared_redis: RedisServer
) -> None:
    gateways = fleet()
    good, wrong = gateways.start(), gateways.start(password="wrong-" + PASSWORD)
    seen = [json.dumps(search(url, "any query")) for url in (good, wrong)]
    for url in (good, wrong):
        seen.append(call(url, "GET", "/healthz").raw.decode())
        seen.append(call(url, "GET", "/metrics", token=TOKENS["bob"]).raw.decode())
    assert "store: redis refused the password (SIFT_STORE_PASSWORD)" in seen[4]
    shared_redis.kill()
    seen.append(json.dumps(search(good, "during the outage")))
    seen.append(call(good, "GET", "/healthz").raw.decode())
    for config in gateways.root.glob("gateway*/config.toml"):
        seen.append(config.read_text())
    seen.append(gateways.output())
    assert all(PASSWORD not in text for text in seen)


def test_the_day_rolls_over_on_an_injected_clock_across_gateways(
    tmp_path: Path, shared_redis: RedisServer, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    clock = [1_764_547_190.0]  # 2025-11-30T23:59:50Z
    path = write_config(
        tmp_path, searxng=searxng.url, tavily=tavily.url, tavily_cap=2, store=shared_redis.url
    )
    config = load_config(str(path))
    secrets = Secrets({"TAVILY_API_KEY": "tvly-key", "SIFT_STORE_PASSWORD": PASSWORD}, environ={})
    searchers = []
    for _ in range(2):
        store = open_configured_store(config, secrets)
        searchers.append(
            Searcher(
                config, secrets, store=store, clock=lambda: clock[0], allow_private_upstreams=True
            )
        )
    try:
        outcomes = [searchers[i % 2].search(SearchRequest(query=f"day one {i}")) for i in range(3)]
        assert ["tavily: daily cap" in o.warnings for o in outcomes] == [False, False, True]
        clock[0] += 20  # 2025-12-01T00:00:10Z
        next_day = searchers[1].search(SearchRequest(query="day two"))
        assert "tavily" in next_day.sources_ok
    finally:
        for searcher in searchers:
            searcher.close()
            assert searcher.store is not None
            searcher.store.close()
    with shared_redis.client() as client:
        assert client.get("sift:cap:tavily:2025-11-30") == b"2"
        assert client.get("sift:cap:tavily:2025-12-01") == b"1"


def test_search_local_uses_the_shared_store(
    tmp_path: Path,
    shared_redis: RedisServer,
    searxng: FakeUpstream,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(tmp_path, searxng=searxng.url, store=shared_redis.url)
    (tmp_path / "secret.env").write_text(f"SIFT_STORE_PASSWORD={PASSWORD}\n")
    argv = ["search", "--local", "--json", "--config", str(path), "sqlite wal"]
    assert main([*argv, "--allow-private-upstreams"]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] is False
    assert main([*argv, "--allow-private-upstreams"]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] is True
    with shared_redis.client() as client:
        assert len(client.keys("sift:search:*")) == 1
    assert not (tmp_path / "cache.db").exists()  # the SQLite file is not used at all


def test_two_gateways_through_a_frozen_store_stay_within_the_cap(
    fleet: Callable[..., Fleet], tavily: FakeUpstream, shared_redis: RedisServer
) -> None:
    cap = 30
    gateways = fleet(tavily_cap=cap)
    first, second = gateways.start(share=0.5), gateways.start(share=0.5)
    for i in range(5):
        for n, url in enumerate((first, second)):
            assert "tavily" in search(url, f"before {n} {i}")["sizes"]["sources_ok"]
    shared_redis.pause()
    # Frozen past two of each gateway's retries (RETRY_AFTER apart): what they send then is
    # queued too, and runs late when the store resumes.
    frozen_until = time.monotonic() + 2 * RETRY_AFTER + 0.5
    for i in range(10):  # 10 searches through each gateway while the store is frozen
        for n, url in enumerate((first, second)):
            assert "store: unavailable" in search(url, f"frozen {n} {i}")["warnings"]
    time.sleep(max(0.0, frozen_until - time.monotonic()))
    shared_redis.resume()
    # Only the second gateway gets searches from now on; the first must still hand over what
    # it spent while the store was frozen. The second searches until Tavily has had the whole
    # cap and half a second more, and at least until it trusts the store's total again (a
    # gateway that trusted it too early, or a hand-over lost, calls Tavily past the cap).
    resumed, capped = time.monotonic(), False
    until = resumed + 20
    i = 0
    while time.monotonic() < until:
        search(second, f"after {i}")
        i += 1
        if len(tavily.calls) >= cap and not capped:
            capped, until = True, max(resumed + TRUSTED_AFTER, time.monotonic() + 0.5)
        time.sleep(0.05)
    assert len(tavily.calls) <= cap  # never 36 against 30
    assert "Traceback" not in gateways.output()
