"""`sift serve` as an operator meets it: what it says at start, how it stops, what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import serving, sift
from gatewaykit import FakeUpstream, call, write_config


def test_start_up_names_the_sources_it_will_call_and_the_store(
    tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    config = write_config(tmp_path, searxng=searxng.url, tavily=tavily.url + "/search")
    (tmp_path / "secret.env").write_text("TAVILY_API_KEY=tvly-test-key\n")
    (tmp_path / "secret.env").chmod(0o600)
    with serving("--config", str(config), "--allow-private-upstreams") as gateway:
        code, rest = gateway.stop()
    said = "".join(gateway.said)
    line = (
        f"INFO sources: searxng {searxng.url}, tavily {tavily.url}/search; "
        f"store: SQLite {tmp_path / 'cache.db'}\n"
    )
    assert said.count(line) == 1
    assert said.index(line) < said.index("listening on")  # before the first request
    assert "tvly-test-key" not in said + rest
    assert (code, rest.splitlines()[-1]) == (0, "sift serve: stopped")


def test_start_up_says_when_no_source_is_enabled(tmp_path: Path) -> None:
    with serving("--config", str(write_config(tmp_path))) as gateway:
        code, _ = gateway.stop()
    assert "INFO sources: none; store: SQLite " in "".join(gateway.said)
    assert code == 0


def test_an_idle_gateway_stops_on_sigterm(tmp_path: Path) -> None:
    with serving("--config", str(write_config(tmp_path))) as gateway:
        code, rest = gateway.stop()
    assert (code, rest) == (0, "sift serve: stopped\n")  # how fast: tests/bench/bench_serve_stop.py


def test_a_port_out_of_range_is_named() -> None:
    done = sift("serve", "--listen", "127.0.0.1:99999")
    assert (done.returncode, done.stderr) == (
        2,
        "sift serve: listen address '127.0.0.1:99999': port must be 1–65535\n",
    )


def test_a_body_without_query_says_query_is_required(tmp_path: Path, searxng: FakeUpstream) -> None:
    with serving("--config", str(write_config(tmp_path, searxng=searxng.url))) as gateway:
        native = call(gateway.url, "POST", "/v1/search", {"q": "sqlite wal"})
        firecrawl = call(gateway.url, "POST", "/v2/search", {"q": "sqlite wal"})
        gateway.stop()
    assert (native.status, native.json) == (
        400,
        {"error": "invalid query", "details": "query is required"},
    )
    assert firecrawl.status == 400 and firecrawl.json["details"] == "query is required"
    assert searxng.calls == []


def test_a_missing_secret_env_is_said_at_start_and_in_healthz(
    tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    config = write_config(tmp_path, searxng=searxng.url, tavily=tavily.url + "/search")
    secret_env = tmp_path / "secret.env"  # named by the config, never written
    with serving("--config", str(config), "--allow-private-upstreams") as gateway:
        health = call(gateway.url, "GET", "/healthz")
        code, rest = gateway.stop()
    said = "".join(gateway.said) + rest
    warning = (
        f"WARNING {secret_env} (server.secret_env) does not exist: "
        "keys come from the environment only\n"
    )
    assert said.count(warning) == 1
    assert health.json["status"] == "degraded"
    assert health.json["degraded"] == [
        "search.tavily: missing key",
        "server.secret_env: file missing",
    ]
    assert str(secret_env) not in json.dumps(health.json)
    assert code == 0
