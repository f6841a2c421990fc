"""Benchmark the gateway against the ceiling of its stack, side by side in one run.

1. Cache hits over `POST /v2/search` with a bearer token, 3.2 KB answers (14 hits), SearXNG
   and a capped Tavily enabled as operators run sift, driven by the C load generator
   `wrk -t2 -c16` (a Python client saturates before the server and hides its cost):
   requests per second, p50/p99 latency and server CPU per request (user + system time of
   the server process, from /proc) of a real `sift serve`, against a bare stdlib
   `ThreadingHTTPServer` answering the same bytes through the stdlib's own
   `send_response`/`send_header`, in one write. Targets (issue 43): sift >= 0.6 of the bare
   server's requests per second and <= 1.8x its CPU per request. A third row, the gateway
   with its pipeline replaced by an answer held in memory, splits sift's cost between the
   HTTP layer and the pipeline. Each server runs in its own process, one after the other, in
   three alternating rounds; each server's best round counts (this shared machine swings by
   a third from one round to the next).
2. Overhead of a Tavily-only search through sift (a new query each time, so never cached)
   against the same fake Tavily called directly with the same body, one client, sequential.
   Target: sift p50 <= 1.05 x direct p50 + 3 ms. Measured with a fake answering at once and
   with one answering after 20 ms.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from bodykit import fixture_bytes  # noqa: E402
from gatewaykit import FakeUpstream, write_config  # noqa: E402

CONNECTIONS = 16
LIMIT = 14  # hits per answer: about 3.2 KB
SECONDS = 3.0
ROUNDS = 3
TOKEN = "bench-token"
BARE_SERVER = r"""
import socket, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
BODY = open(sys.argv[1], "rb").read()
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = 65536
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *args):
        pass
class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
server = Server(("127.0.0.1", 0), Handler)
print("listening on 127.0.0.1:%d" % server.server_address[1], file=sys.stderr, flush=True)
server.serve_forever()
"""
# The gateway with the pipeline replaced by one answer held in memory: the HTTP layer's share.
CANNED_SERVER = r"""
import sys
from siftlib.config import load_config, load_secrets
from siftlib.search.pipeline import Searcher, SearchRequest
from siftlib.logs import configure_logging
from siftlib.gateway.server import GatewayServer
configure_logging()
config = load_config(sys.argv[1])
secrets = load_secrets(config.secret_env)
searcher = Searcher(config, secrets, allow_private_upstreams=True)
answer = searcher.search(SearchRequest(query="sqlite wal mode", k=5))
class Canned:
    metrics = searcher.metrics
    def search(self, request, **options):
        return answer
server = GatewayServer(("127.0.0.1", 0), Canned(), callers=secrets.callers())
print("listening on 127.0.0.1:%d" % server.server_port, file=sys.stderr, flush=True)
server.serve_forever()
"""


def start(argv: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start a server process logging to `log`; return it with the port it printed."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, env=env, stderr=sink)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read_text())
        if found:
            return proc, int(found.group(1))
        time.sleep(0.05)
    raise SystemExit(f"bench: {argv[1:3]} did not start:\n{log.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
"""
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def cpu_seconds(pid: int) -> float:
    """Return a process's user plus system CPU time so far, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def load(
    pid: int, port: int, body: bytes, script: Path, path: str = "/v2/search"
) -> dict[str, float]:
    """Drive `wrk -t2 -c16` for SECONDS; return req/s, p50, p99, errors and CPU us/request."""
    script.write_text(WRK_SCRIPT % (body.decode(), TOKEN))
    url = f"http://127.0.0.1:{port}{path}"
    argv = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{SECONDS:g}s", "--latency", "-s", str(script)]
    before = cpu_seconds(pid)
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    spent = cpu_seconds(pid) - before
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    errors = int(bad.group(1)) if bad else 0
    errors += sum(int(n) for n in sockets.groups()) if sockets else 0
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": _ms(latency["50"]),
        "p99": _ms(latency["99"]),
        "errors": errors,
        "cpu_us": spent / max(done, 1) * 1e6,
    }


def searxng_answer(n: int) -> bytes:
    """Return a SearXNG answer of `n` distinct real-shaped results (the recorded five, cycled).

    Fourteen of them make a `/v2/search` answer of about 3.2 KB, the size operators' agents
    get and the held-back harness measures: a cache hit's cost grows with its answer.
    """
    answer = json.loads(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    recorded = [r for r in answer["results"] if isinstance(r.get("url"), str)]
    results = []
    for i in range(n):
        result = dict(recorded[i % len(recorded)])
        result["url"] = result["url"].replace("://", f"://r{i}.", 1)  # a host of its own
        results.append(result)
    return json.dumps({"query": "sqlite wal mode", "results": results}).encode()


def post(port: int, path: str, payload: dict[str, object], token: str | None = TOKEN) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, json.dumps(payload), headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.status == 200, (response.status, data[:200])
    return data


def cache_hits(home: Path, env: dict[str, str]) -> None:
    searxng = FakeUpstream(searxng_answer(LIMIT))
    tavily = FakeUpstream(fixture_bytes("tavily/wal-usage-unsorted.json"))
    # As operators run it: the free source and a paid one under a daily cap.
    config = write_config(
        home / "hits", searxng=searxng.url, tavily=tavily.url + "/search", tavily_cap=1000
    )
    (home / "hits" / "secret.env").write_text(
        f"SIFT_TOKEN_BENCH={TOKEN}\nTAVILY_API_KEY=bench-key\n"
    )
    request = json.dumps({"query": "sqlite wal mode", "limit": LIMIT}).encode()
    sift_argv = [
        *[sys.executable, str(REPO / "sift.py"), "serve", "--config", str(config)],
        "--allow-private-upstreams",  # the fake Tavily is on loopback
    ]
    sift, sift_port = start(sift_argv, env, home / "sift.log")
    answer = post(sift_port, "/v2/search", json.loads(request))  # fills the cache
    body_file = home / "body.json"
    body_file.write_bytes(answer)
    bare_argv = [sys.executable, "-c", BARE_SERVER, str(body_file)]
    bare, bare_port = start(bare_argv, env, home / "bare.log")
    canned_argv = [sys.executable, "-c", CANNED_SERVER, str(config)]
    canned, canned_port = start(canned_argv, {**env, "PYTHONPATH": str(REPO)}, home / "canned.log")
    primed = len(searxng.calls) + len(tavily.calls)
    servers = {
        "bare": (bare, bare_port),
        "canned": (canned, canned_port),
        "sift": (sift, sift_port),
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
    try:
        for _ in range(ROUNDS):
            for name, (proc, port) in servers.items():
                results[name].append(load(proc.pid, port, request, home / "post.lua"))
    finally:
        for proc in (sift, bare, canned):
            stop(proc)
        searxng.close()
        tavily.close()
    best = {name: max(rounds, key=lambda r: r["rps"]) for name, rounds in results.items()}
    print(f"1. cache hits, POST /v2/search, wrk -t2 -c{CONNECTIONS} (keep-alive),")
    print(f"   {len(answer)}-byte answers, best of {ROUNDS} rounds of {SECONDS:g} s each")
    print(f"   {'server':<28}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'CPU us/req':>12}")
    rows = (
        ("bare", "bare stdlib (ceiling)"),
        ("sift", "sift serve (cache hits)"),
        ("canned", "  HTTP layer only [1]"),
    )
    for name, label in rows:
        r = best[name]
        print(
            f"   {label:<28}{r['rps']:>9.0f}{r['p50']:>9.2f}{r['p99']:>9.2f}{r['errors']:>8.0f}"
            f"{r['cpu_us']:>12.0f}"
        )
    ratio = best["sift"]["rps"] / best["bare"]["rps"]
    verdict = "meets" if ratio >= 0.6 else "MISSES"
    print(f"   sift / ceiling req/s = {ratio:.2f} (target >= 0.6: {verdict})")
    cpu = best["sift"]["cpu_us"] / best["bare"]["cpu_us"]
    verdict = "meets" if cpu <= 1.8 else "MISSES"
    print(f"   sift / ceiling CPU per request = {cpu:.2f} (target <= 1.8: {verdict})")
    print(f"   upstream calls while under load: {len(searxng.calls) + len(tavily.calls) - primed}")
    layer = best["canned"]["cpu_us"] - best["bare"]["cpu_us"]
    pipeline = best["sift"]["cpu_us"] - best["canned"]["cpu_us"]
    print(
        f"   [1] the gateway answering from memory, no pipeline; CPU per request beyond the"
        f" ceiling: HTTP layer {layer:.0f} us, pipeline cache hit (lookup, log line) "
        f"{pipeline:.0f} us"
    )


def tavily_overhead(home: Path, env: dict[str, str], delay: float, n: int) -> None:
    import httpx

    tavily = FakeUpstream(fixture_bytes("tavily/wal-usage-unsorted.json"), delay=delay)
    directory = home / f"tavily-{delay}"
    directory.mkdir()
    config = write_config(directory, tavily=tavily.url + "/search")
    (directory / "secret.env").write_text(f"TAVILY_API_KEY=bench-key\nSIFT_TOKEN_BENCH={TOKEN}\n")
    argv = [sys.executable, str(REPO / "sift.py"), "serve", "--config", str(config)]
    sift, port = start([*argv, "--allow-private-upstreams"], env, directory / "sift.log")
    direct_ms: list[float] = []
    sift_ms: list[float] = []
    try:
        with httpx.Client(trust_env=False) as client:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
            for i in range(n):
                body = {
                    "query": f"sqlite wal mode {i}",
                    "max_results": 8,
                    "search_depth": "basic",
                    "include_answer": False,
                    "include_raw_content": False,
                    "include_images": False,
                    "include_usage": True,
                }
                started = time.perf_counter()
                response = client.post(
                    tavily.url + "/search", json=body, headers={"Authorization": "Bearer k"}
                )
                response.read()
                direct_ms.append((time.perf_counter() - started) * 1000)

                started = time.perf_counter()
                conn.request(
                    "POST", "/v1/search", json.dumps({"query": f"sqlite wal {i}"}), headers
                )
                answer = conn.getresponse()
                answer.read()
                sift_ms.append((time.perf_counter() - started) * 1000)
                assert answer.status == 200
            conn.close()
    finally:
        stop(sift)
        tavily.close()
    direct, through = statistics.median(direct_ms), statistics.median(sift_ms)
    bound = 1.05 * direct + 3.0
    verdict = "meets" if through <= bound else "MISSES"
    print(
        f"   fake Tavily answering after {delay * 1000:>3.0f} ms: direct p50 {direct:7.2f} ms,"
        f" through sift p50 {through:7.2f} ms (+{through - direct:.2f} ms);"
        f" bound {bound:.2f} ms: {verdict}"
    )


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("bench: wrk is missing: `apt-get install wrk` (make bench installs it)")
    with tempfile.TemporaryDirectory(prefix="sift-bench-") as tmp:
        home = Path(tmp)
        (home / "hits").mkdir()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "XDG_"))},
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
        }
        cache_hits(home, env)
        print("2. overhead of a Tavily-only search (never cached), one sequential client, n=150")
        tavily_overhead(home, env, 0.0, 150)
        tavily_overhead(home, env, 0.02, 150)


if __name__ == "__main__":
    main()
