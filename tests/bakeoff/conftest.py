"""Fixtures for the bake-off: loopback fake providers with known answers, a config, a clock.

The four queries below have hand-chosen answers from each provider (in the providers' wire
formats), so every figure of a run — hits, target hits, credits — can be computed by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bodykit import searxng_answer, tavily_answer
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from siftlib.config import load_config, load_secrets
from siftlib.search.pipeline import Searcher
from siftlib.store.factory import open_store

QUERIES = [
    "sqlite wal mode",
    "python asyncio timeout",
    "rust borrow checker",
    "best pizza dough",
]
TARGETS = [
    "https://sqlite.org/wal.html",
    "docs.python.org",
    "rust-lang.org",
    "open",
]
RUST_BOOK = "https://doc.rust-lang.org/book/ch04-02-references-and-borrowing.html"

# query → [(url, score)], best first: SearXNG's own scores.
SEARXNG = {
    QUERIES[0]: [
        ("https://SQLite.org/wal.html/", 3.0),
        ("https://blog.example/wal", 2.0),
        ("https://forum.example/t/1", 1.0),
    ],
    QUERIES[1]: [
        ("https://qa.example/asyncio-timeout", 3.0),
        ("https://blog.example/asyncio", 2.0),
        ("https://tutorial.example/py", 1.0),
    ],
    QUERIES[2]: [
        ("https://blog.example/borrow", 3.0),
        ("https://qa.example/borrow", 2.0),
        ("https://video.example/borrow", 1.0),
    ],
    QUERIES[3]: [
        ("https://food.example/dough", 3.0),
        ("https://blog.example/pizza", 2.0),
        ("https://recipes.example/neapolitan", 1.0),
    ],
}
BRAVE = {
    QUERIES[0]: ["https://blog.example/wal", "https://docs.example/sqlite"],
    QUERIES[1]: [
        "https://docs.python.org/3/library/asyncio-task.html",
        "https://qa.example/asyncio-timeout",
    ],
    QUERIES[2]: ["https://qa.example/borrow", "https://blog.example/rust"],
    QUERIES[3]: ["https://food.example/dough", "https://pizza.example/guide"],
}
# Tavily as sift asks it (include_usage) and as an agent's own tool asks it (no usage).
TAVILY = {
    QUERIES[0]: ["https://forum.example/t/1", "https://only-t.example/a"],
    QUERIES[1]: ["https://only-t.example/b", "https://blog.example/asyncio"],
    QUERIES[2]: [RUST_BOOK, "https://qa.example/borrow"],
    QUERIES[3]: ["https://pizza.example/guide", "https://food.example/dough"],
}
TAVILY_DIRECT = {
    QUERIES[0]: ["https://only-t.example/a", "https://blog.example/wal"],
    QUERIES[1]: ["https://only-t.example/b"],
    QUERIES[2]: [RUST_BOOK],
    QUERIES[3]: ["https://pizza.example/guide"],
}

BRAVE_KEY = "brave-test-key-0001"
TAVILY_KEY = "tvly-test-key-0001"


def _title(url: str) -> str:
    return "Page " + url.rsplit("/", 1)[-1]


@dataclass
class Providers:
    """The three fake providers on one loopback server, and the requests they received."""

    server: HTTPServer
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def searxng_url(self) -> str:
        return self.server.url_for("/").rstrip("/")

    @property
    def brave_url(self) -> str:
        return self.server.url_for("/res/v1/llm/context")

    @property
    def tavily_url(self) -> str:
        return self.server.url_for("/search-api")

    def count(self, kind: str) -> int:
        """Return how many requests of a kind (`searxng`, `brave`, `tavily`, `direct`) came in."""
        return sum(1 for name, _ in self.calls if name == kind)

    def searxng(self, request: Request) -> Response:
        query = request.args["q"]
        assert request.args["format"] == "json" and request.args["pageno"] == "1"
        self.calls.append(("searxng", {"q": query}))
        if query not in SEARXNG:
            return Response("busy", status=503)
        results = [
            {
                "url": url,
                "title": _title(url),
                "content": f"About {query}.",
                "score": score,
                "engines": ["ddg"],
                "positions": [i + 1],
                "category": "general",
            }
            for i, (url, score) in enumerate(SEARXNG[query])
        ]
        body = searxng_answer(query, results)
        return Response(json.dumps(body), content_type="application/json")

    def brave(self, request: Request) -> Response:
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return Response("{}", status=401, content_type="application/json")
        query = request.args["q"]
        self.calls.append(("brave", {"q": query}))
        generic = [
            {"url": u, "title": _title(u), "snippets": [f"On {query}.", "More."]}
            for u in BRAVE[query]
        ]
        sources = {
            u: {"title": _title(u), "hostname": u.split("/")[2], "age": None} for u in BRAVE[query]
        }
        body = {"grounding": {"generic": generic, "map": []}, "sources": sources}
        return Response(json.dumps(body), content_type="application/json")

    def tavily(self, request: Request) -> Response:
        if request.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            return Response('{"detail": {"error": "Unauthorized"}}', status=401)
        sent = json.loads(request.get_data())
        direct = "include_usage" not in sent
        self.calls.append(("direct" if direct else "tavily", sent))
        urls = (TAVILY_DIRECT if direct else TAVILY)[sent["query"]]
        results = [
            {
                "url": u,
                "title": _title(u),
                "content": f"Tavily on {sent['query']}.",
                "score": 0.9 - i / 10,
                "raw_content": None,
            }
            for i, u in enumerate(urls)
        ]
        body = tavily_answer(sent["query"], results, response_time=0.42)
        body["request_id"] = "req-0001"
        if not direct:
            body["usage"] = {"credits": 1}
        return Response(json.dumps(body), content_type="application/json")


@pytest.fixture
def providers(httpserver: HTTPServer) -> Providers:
    """Fake SearXNG, Brave LLM Context and Tavily answering the four known queries."""
    fake = Providers(httpserver)
    httpserver.expect_request("/search", method="GET").respond_with_handler(fake.searxng)
    httpserver.expect_request("/res/v1/llm/context", method="GET").respond_with_handler(fake.brave)
    httpserver.expect_request("/search-api", method="POST").respond_with_handler(fake.tavily)
    return fake


def write_config(
    directory: Path,
    providers: Providers,
    *,
    enabled: tuple[str, ...] = ("searxng", "brave_llm", "tavily"),
    keys: tuple[str, ...] = ("BRAVE_API_KEY", "TAVILY_API_KEY"),
    k: int = 3,
) -> Path:
    """Write config.toml and secret.env pointing every source at the fakes; return the config."""
    secrets = {"BRAVE_API_KEY": BRAVE_KEY, "TAVILY_API_KEY": TAVILY_KEY}
    (directory / "secret.env").write_text("".join(f"{key}={secrets[key]}\n" for key in keys))
    (directory / "secret.env").chmod(0o600)
    urls = {
        "searxng": providers.searxng_url,
        "brave_llm": providers.brave_url,
        "tavily": providers.tavily_url,
    }
    tables = "".join(
        f'[search.{name}]\nenabled = {"true" if name in enabled else "false"}\nurl = "{url}"\n'
        for name, url in urls.items()
    )
    path = directory / "config.toml"
    path.write_text(
        f'[server]\ndb = "{directory / "cache.db"}"\nsecret_env = "{directory / "secret.env"}"\n'
        f'[search]\nk = {k}\ntimeout = "5s"\n{tables}'
    )
    return path


def write_inputs(directory: Path, queries: list[str], targets: list[str]) -> tuple[Path, Path]:
    """Write a query file and a targets file; return their paths."""
    q, t = directory / "search_queries.txt", directory / "search_targets.txt"
    q.write_text("".join(f"{line}\n" for line in queries))
    t.write_text("".join(f"{line}\n" for line in targets))
    return q, t


@pytest.fixture
def open_searcher() -> Iterator[Callable[[Path], Searcher]]:
    """Open a Searcher (with its SQLite store) for a config file; close them after the test."""
    opened: list[tuple[Searcher, Any]] = []

    def make(config_path: Path) -> Searcher:
        config = load_config(str(config_path))
        store = open_store(config.db)
        searcher = Searcher(
            config, load_secrets(config.secret_env), store=store, allow_private_upstreams=True
        )
        opened.append((searcher, store))
        return searcher

    yield make
    for searcher, store in opened:
        searcher.close()
        store.close()


class StepClock:
    """A latency clock: a start reading returns now; an end reading first adds the next step."""

    def __init__(self, steps_ms: list[int]) -> None:
        self.steps = list(steps_ms)
        self.now = 1000.0
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:
            self.now += self.steps.pop(0) / 1000
        return self.now


def make_run(
    run_dir: Path,
    *,
    configs: tuple[str, ...] = (
        "searxng",
        "searxng+brave",
        "searxng+brave+tavily",
        "tavily-direct",
    ),
    not_run: dict[str, str] | None = None,
    queries: int = 3,
    targets: list[str] | None = None,
    skipped: set[tuple[str, int]] = frozenset(),  # type: ignore[assignment]
) -> Path:
    """Write a finished run directory by hand: distinct hits per configuration and query."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for index in range(queries):
        for number, config in enumerate(configs):
            line: dict[str, Any] = {
                "query_index": index,
                "query": f"query number {index}",
                "config": config,
                "hits": [
                    {
                        "rank": r,
                        "url": f"https://site{number}.example/q{index}/r{r}",
                        "title": f"Title {number}-{index}-{r}",
                        "snippet": f"Snippet {number} {r}",
                    }
                    for r in (1, 2)
                ],
                "latency_ms": 100 * (number + 1) + index,
                "credits": {"tavily": int("tavily" in config), "brave_llm": int("brave" in config)},
                "warnings": [f"{config}: a warning"] if index == 0 else [],
            }
            if (config, index) in skipped:
                line.update(
                    hits=[],
                    latency_ms=None,
                    credits={"tavily": 0, "brave_llm": 0},
                    warnings=[],
                    skipped="max credits",
                )
            lines.append(json.dumps(line))
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    meta_configs: dict[str, Any] = {c: {"ran": True, "reason": None} for c in configs}
    for name, reason in (not_run or {}).items():
        meta_configs[name] = {"ran": False, "reason": reason}
    meta = {
        "date": "2026-11-30T04:00:00Z",
        "k": 2,
        "sift_version": "0.1.0",
        "configs": meta_configs,
    }
    (run_dir / "meta.json").write_text(json.dumps(meta))
    if targets is not None:
        (run_dir / "targets.txt").write_text("".join(f"{t}\n" for t in targets))
    return run_dir


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Return every file under `directory`: relative path → (bytes, mode)."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
