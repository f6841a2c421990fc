"""`make demo`: a real `sift serve` over loopback fakes replaying testdata/'s recorded answers.

Starts three fake upstreams (SearXNG, Brave LLM Context, Tavily) that answer every request with
a recorded fixture, a gateway pointed at them (with the test-only --allow-private-upstreams),
then one search through `sift search` and one through the Firecrawl SDK. Nothing leaves the
machine; every hit shown is a recorded fixture, not a live search result.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from gatewaykit import FakeUpstream, fixture_bytes, write_config  # noqa: E402

QUERY = "sqlite wal mode"
TOKEN = "demo-token-not-a-secret"
BANNER = "RECORDED FIXTURES from testdata/ (loopback fakes), not live search results"


def main() -> int:
    """Run the demo; return 0 when both searches succeeded."""
    fakes = {
        "searxng": FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json")),
        "brave_llm": FakeUpstream(fixture_bytes("brave_llm/wal-generic-and-sources.json")),
        "tavily": FakeUpstream(fixture_bytes("tavily/wal-usage-unsorted.json")),
    }
    with tempfile.TemporaryDirectory(prefix="sift-demo-") as tmp:
        home = Path(tmp)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "XDG_"))},
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "PYTHONUNBUFFERED": "1",
        }
        config = write_config(
            home,
            searxng=fakes["searxng"].url,
            brave_llm=fakes["brave_llm"].url + "/res/v1/llm/context",
            tavily=fakes["tavily"].url + "/search",
        )
        (home / "secret.env").write_text(
            "BRAVE_API_KEY=demo-brave-key\nTAVILY_API_KEY=demo-tavily-key\n"
            f"SIFT_TOKEN_DEMO={TOKEN}\n"
        )
        sift = [sys.executable, str(REPO / "sift.py")]
        server = subprocess.Popen(
            [*sift, "serve", "--config", str(config), "--allow-private-upstreams"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = _wait_for_listen(server)
            print(f"== {BANNER}")
            print(f"== gateway: {url} (sift serve, --allow-private-upstreams: demo only)\n")

            print(f'== 1. sift search "{QUERY}" --server {url} --k 3   [{BANNER}]')
            cli = subprocess.run(
                [*sift, "search", QUERY, "--server", url, "--k", "3"],
                env={**env, "SIFT_TOKEN": TOKEN},
                capture_output=True,
                text=True,
                timeout=60,
            )
            print(cli.stdout, end="")
            print(cli.stderr, end="", file=sys.stderr)

            print(f"\n== 2. Firecrawl SDK: Firecrawl(api_url={url!r}).search(limit=3)   [{BANNER}]")
            from firecrawl import Firecrawl

            data = Firecrawl(api_url=url, api_key=TOKEN).search(query=QUERY, limit=3)
            for hit in data.web or []:
                print(f"{hit.title}\n{hit.url}\n{hit.description}\n")
            print(f"== {BANNER}")
            return 0 if cli.returncode == 0 and data.web else 1
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
            for fake in fakes.values():
                fake.close()


def _wait_for_listen(server: subprocess.Popen[str]) -> str:
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(r"listening on (\S+):(\d+)", line)
        if found:
            # From here on, show the gateway's own log lines (one INFO line per search).
            threading.Thread(target=_forward, args=(server.stderr,), daemon=True).start()
            return f"http://{found.group(1)}:{found.group(2)}"
    raise SystemExit("demo: sift serve exited before listening")


def _forward(stream: IO[str]) -> None:
    for line in stream:
        sys.stderr.write(f"   [sift serve] {line}")


if __name__ == "__main__":
    sys.exit(main())
