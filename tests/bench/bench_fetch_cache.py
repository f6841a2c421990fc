"""Benchmark a fetch-cache hit against the ceiling of its stack, side by side in one run.

`POST /v2/scrape` of a page already in the fetch cache (the news article of testdata/fetch,
markdown, SQLite store), driven by `wrk -t2 -c16` with a bearer token: requests per second,
p50/p99 and server CPU per request of a real `sift serve`, against a bare stdlib
`ThreadingHTTPServer` answering the same bytes (bench_server.py's ceiling). Target (issue
40): a hit at >= 0.5x the bare server's requests per second. Three alternating rounds; each
server's best round counts. The page server counts the requests that reach it under load:
a hit touches no upstream, so it must stay at zero.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "bench"))
sys.path.insert(0, str(REPO))

from bench_server import BARE_SERVER, CONNECTIONS, ROUNDS, SECONDS, TOKEN, load, post, start, stop  # noqa: E402
from bodykit import TESTDATA_FETCH  # noqa: E402
from fetchkit import PageServer, page  # noqa: E402


def cache_hits(home: Path, env: dict[str, str]) -> None:
    article = (TESTDATA_FETCH / "news-article.html").read_bytes()
    with PageServer({"/2026/03/tram": page(article)}) as site:
        config = home / "config.toml"
        config.write_text(
            "[server]\n"
            f'listen = "127.0.0.1:0"\ndb = "{home / "cache.db"}"\n'
            f'secret_env = "{home / "secret.env"}"\n'
            f'[fetch]\nallow = ["{site.allow}"]\ncache_max_age = "1h"\n'
        )
        (home / "secret.env").write_text(f"SIFT_TOKEN_BENCH={TOKEN}\n")
        request = {"url": site.url + "/2026/03/tram", "formats": ["markdown"]}
        argv = [sys.executable, str(REPO / "sift.py"), "serve", "--config", str(config)]
        sift, sift_port = start(argv, env, home / "sift.log")
        post(sift_port, "/v2/scrape", request)  # a miss: fills the cache
        hit = post(sift_port, "/v2/scrape", request)
        assert json.loads(hit)["data"]["metadata"]["cacheState"] == "hit"
        body_file = home / "body.json"
        body_file.write_bytes(hit)
        bare, bare_port = start(
            [sys.executable, "-c", BARE_SERVER, str(body_file)], env, home / "bare.log"
        )
        primed = len(site.hits)
        servers = {"bare": (bare, bare_port), "sift": (sift, sift_port)}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        body = json.dumps(request).encode()
        try:
            for _ in range(ROUNDS):
                for name, (proc, port) in servers.items():
                    results[name].append(
                        load(proc.pid, port, body, home / "post.lua", path="/v2/scrape")
                    )
        finally:
            for proc in (sift, bare):
                stop(proc)
        under_load = len(site.hits) - primed
    best = {name: max(rounds, key=lambda r: r["rps"]) for name, rounds in results.items()}
    print(f"fetch-cache hits, POST /v2/scrape, wrk -t2 -c{CONNECTIONS} (keep-alive),")
    print(f"   {len(hit)}-byte answers, best of {ROUNDS} rounds of {SECONDS:g} s each")
    print(f"   {'server':<28}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'CPU us/req':>12}")
    for name, label in (
        ("bare", "bare stdlib (ceiling)"),
        ("sift", "sift serve (fetch-cache hits)"),
    ):
        r = best[name]
        print(
            f"   {label:<28}{r['rps']:>9.0f}{r['p50']:>9.2f}{r['p99']:>9.2f}{r['errors']:>8.0f}"
            f"{r['cpu_us']:>12.0f}"
        )
    ratio = best["sift"]["rps"] / best["bare"]["rps"]
    verdict = "meets" if ratio >= 0.5 else "MISSES"
    print(f"   sift / ceiling req/s = {ratio:.2f} (target >= 0.5: {verdict})")
    print(f"   requests that reached the page under load: {under_load}")


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("bench: wrk is missing: `apt-get install wrk` (make bench installs it)")
    with tempfile.TemporaryDirectory(prefix="sift-bench-") as tmp:
        home = Path(tmp)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "XDG_"))},
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
        }
        cache_hits(home, env)


if __name__ == "__main__":
    main()
