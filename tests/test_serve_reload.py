"""SIGHUP in `sift serve`: a new config applies to the next search; a bad one is refused.

Each test runs `sift serve` as a process and signals it, as `systemctl reload` or
`kill -HUP` would; its stderr is read on a thread so a test can wait for a log line.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bodykit import searxng_body
from clikit import Serving, serving
from gatewaykit import FakeUpstream, call, wait_until, write_config


class Said:
    """What a serving process writes on stderr, gathered line by line on a thread."""

    def __init__(self, process: Serving) -> None:
        self.lines = list(process.said)
        stream = process.process.stderr
        assert stream is not None
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    def wait_for(self, text: str) -> str:
        """Return the first line containing `text`, waiting for it."""
        wait_until(lambda: any(text in line for line in self.lines), f"a log line with {text!r}")
        return next(line for line in self.lines if text in line)


@contextmanager
def gateway_process(config: Path) -> Iterator[tuple[Serving, Said]]:
    with serving("--config", str(config), "--allow-private-upstreams") as running:
        yield running, Said(running)


def search(url: str, query: str = "sqlite wal") -> tuple[int, dict[str, object]]:
    reply = call(url, "POST", "/v1/search", {"query": query})
    return reply.status, reply.json


def test_a_source_enabled_by_a_reload_answers_the_next_search(tmp_path: Path) -> None:
    upstream = FakeUpstream(searxng_body(2))
    config = write_config(tmp_path)
    try:
        with gateway_process(config) as (running, said):
            assert search(running.url)[0] == 422  # no source yet
            write_config(tmp_path, searxng=upstream.url)
            running.process.send_signal(signal.SIGHUP)
            line = said.wait_for("reloaded")
            assert f"sources: searxng {upstream.url}" in line
            status, body = search(running.url)
            assert status == 200
            assert [hit["url"] for hit in body["results"]] == [  # type: ignore[union-attr]
                "https://example.org/page0",
                "https://example.org/page1",
            ]
            assert running.process.poll() is None
    finally:
        upstream.close()


def test_an_invalid_reload_is_refused_and_the_old_config_stays(tmp_path: Path) -> None:
    upstream = FakeUpstream(searxng_body(1))
    config = write_config(tmp_path, searxng=upstream.url)
    try:
        with gateway_process(config) as (running, said):
            assert search(running.url)[0] == 200
            config.write_text(config.read_text() + "[search.searxng]\nbogus = 1\n")
            running.process.send_signal(signal.SIGHUP)
            line = said.wait_for("reload refused")
            assert "ERROR reload refused, still serving the previous config: " in line
            assert str(config) in line
            status, body = search(running.url, "another query")
            assert status == 200 and body["cached"] is False
            assert len(upstream.calls) == 2
    finally:
        upstream.close()


def test_searches_in_flight_finish_on_the_config_they_started_with(tmp_path: Path) -> None:
    gate = threading.Event()
    old = FakeUpstream(searxng_body(1, prefix="https://old.example/"), gate=gate)
    new = FakeUpstream(searxng_body(1, prefix="https://new.example/"))
    config = write_config(tmp_path, searxng=old.url, timeout="20s")
    answers: list[tuple[int, dict[str, object]]] = []
    try:
        with gateway_process(config) as (running, said):
            flying = [
                threading.Thread(target=lambda q=q: answers.append(search(running.url, q)))
                for q in ("first", "second", "third")
            ]
            for thread in flying:
                thread.start()
            wait_until(lambda: len(old.calls) == 3, "three searches waiting on the old upstream")
            write_config(tmp_path, searxng=new.url, timeout="20s")
            running.process.send_signal(signal.SIGHUP)
            said.wait_for("reloaded")
            status, body = search(running.url, "after")
            assert status == 200
            assert body["results"][0]["url"] == "https://new.example/0"  # type: ignore[index]
            gate.set()
            for thread in flying:
                thread.join(30)
            assert [status for status, _ in answers] == [200, 200, 200]
            assert {body["results"][0]["url"] for _, body in answers} == {  # type: ignore[index]
                "https://old.example/0"
            }
            running.process.send_signal(signal.SIGTERM)
            assert running.process.wait(30) == 0
            said.wait_for("sift serve: stopped")
            assert said.lines[-1] == "sift serve: stopped\n"
    finally:
        gate.set()
        old.close()
        new.close()
