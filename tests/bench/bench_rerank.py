"""Benchmark: the latency an opted-in skill search adds, and the eval's keyword baseline.

A fake System One on 127.0.0.1 answers at once with a fixed, valid answer. Side by side, in
one interleaved loop: the provider's own time (measured inside the fake), a bare httpx POST
of the same body on a fresh connection (what any client pays), and `SystemOneReranker.search`
with the cache off (keyword baseline computed first, as the command does). Target: the search adds
under 5 ms over the provider's own time. Then `sift rerank-skills eval`'s keyword-mode
figures on the fixture set: the baseline any reranker must beat.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from siftlib.skills.consent import RerankSettings  # noqa: E402
from siftlib.skills.eval import evaluate  # noqa: E402
from siftlib.skills.fixtures import load_catalog, load_fixtures  # noqa: E402
from siftlib.skills.keyword import keyword_search  # noqa: E402
from siftlib.skills.observe import SearchObservation  # noqa: E402
from siftlib.skills.provider import build_body  # noqa: E402
from siftlib.skills.rerank import SystemOneReranker  # noqa: E402
from siftlib.skills.shortlist import OutboundRequest, build_request  # noqa: E402

FIXTURES = REPO / "testdata" / "skills" / "eval" / "dev.jsonl"
QUERY = "merge three pdf files into one"
ROUNDS = 300
TARGET_MS = 5.0

server_times: list[float] = []


def answer_for(body: dict[str, Any]) -> bytes:
    ids = [c["id"] for c in body["state"]["candidates"]]
    probabilities = dict.fromkeys(ids, 0.0)
    probabilities[ids[1]], probabilities[ids[0]], probabilities["none"] = 0.6, 0.3, 0.1
    answers = {
        "selection": {
            "type": "choice",
            "choice": ids[1],
            "confidence": 0.6,
            "probabilities": probabilities,
        }
    }
    return json.dumps(
        {
            "model": "jev-bench",
            "answers": answers,
            "usage": {"input_tokens": 900, "output_tokens": 3},
        }
    ).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answer = b""

    def do_POST(self) -> None:  # noqa: N802
        started = time.perf_counter()
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)
        server_times.append((time.perf_counter() - started) * 1000)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    catalog = load_catalog([FIXTURES.parent / "catalog"])
    settings = RerankSettings(enabled=True, cache_max_entries=0, timeout_ms=5000)
    request = build_request(catalog, QUERY, settings)
    assert isinstance(request, OutboundRequest)
    body = build_body(request, model=settings.model, fit=False)
    Handler.answer = answer_for(json.loads(body))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    decisions: list[str] = []
    reranker = SystemOneReranker(
        settings,
        "bench-key",
        base_url=url,
        observers=[
            lambda e: (
                decisions.append(e.decision.value) if isinstance(e, SearchObservation) else None
            )
        ],
    )
    bare = httpx.Client(
        transport=httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    )
    headers = {"Authorization": "Bearer bench-key", "Content-Type": "application/json"}
    searched: list[float] = []
    posted: list[float] = []
    for round_ in range(ROUNDS + 20):  # the first 20 warm up
        started = time.perf_counter()
        bare.post(url + "/v1/systemone", content=body, headers=headers).raise_for_status()
        post_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        baseline = keyword_search(catalog, QUERY, 5)
        result = reranker.search(catalog, QUERY, 5, baseline)
        search_ms = (time.perf_counter() - started) * 1000
        if round_ >= 20:
            posted.append(post_ms)
            searched.append(search_ms)
    reranker.close()
    bare.close()
    server.shutdown()
    assert set(decisions) == {"accepted"}, decisions
    assert result.matches[0].name == request.candidates[1].name
    provider = server_times[-2 * ROUNDS :]

    added = statistics.median(searched) - statistics.median(provider)
    over_post = statistics.median(searched) - statistics.median(posted)
    print(f"opted-in search vs a fake that answers at once ({ROUNDS} rounds, interleaved)")
    for label, values in (
        ("provider's own time", provider),
        ("bare httpx POST", posted),
        ("SystemOneReranker.search", searched),
    ):
        print(f"  {label:<24} p50 {ms(values, 0.5):6.3f} ms  p90 {ms(values, 0.9):6.3f} ms")
    verdict = "met" if added < TARGET_MS else "MISSED"
    print(f"  added over provider      p50 {added:6.3f} ms  (target < {TARGET_MS} ms: {verdict})")
    print(f"  added over bare POST     p50 {over_post:6.3f} ms")

    fixtures = load_fixtures(FIXTURES, catalog)
    keyword = evaluate("keyword", catalog, {"dev": fixtures}, limit=5)["dev"]
    print(
        f"eval keyword baseline ({len(fixtures)} queries, {len(catalog.skills)} skills):"
        f" selection {keyword.selection_accuracy:.1%} ({keyword.selection_hits}/"
        f"{keyword.selection_total}), no-match {keyword.no_match_accuracy:.1%}"
        f" ({keyword.no_match_hits}/{keyword.no_match_total}),"
        f" p50 {keyword.percentile_ms(50):.3f} ms, p90 {keyword.percentile_ms(90):.3f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
