"""The official MCP Python SDK driving the real `sift mcp` process over stdio.

Each SDK line lives in its own venv (`make contract` builds `.venv-mcp2` with mcp 2.x and
`.venv-mcp1` with mcp 1.26.0, the Hermes 0.19.0 pin): a module here is collected only under
the SDK it is written for, and none under the project's own `.venv`. `sift mcp` runs from
the same venv (`<venv>/bin/sift`), over loopback fakes of SearXNG and the `testdata/`
skill catalog.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from gatewaykit import FakeUpstream, fixture_bytes, write_config

try:
    SDK = version("mcp")
except PackageNotFoundError:
    SDK = ""

WRITTEN_FOR = {"test_sdk2.py": SDK.startswith("2."), "test_sdk126.py": SDK == "1.26.0"}
collect_ignore = [module for module, wanted in WRITTEN_FOR.items() if not wanted]

REPO = Path(__file__).resolve().parents[3]
CATALOG = REPO / "testdata" / "skills" / "catalog"
SIFT = str(Path(sys.executable).parent / "sift")


@dataclass
class Setup:
    """What a contract test starts `sift mcp` with, and the fakes behind it."""

    command: str
    args: list[str]
    env: dict[str, str]
    searxng: GatedSearxng
    gate: threading.Event

    def launch(self, *, garbage: bool = False) -> tuple[str, list[str]]:
        """Return the command and arguments; with `garbage`, junk lines go to stdin first."""
        if not garbage:
            return self.command, self.args
        script = '{ printf \'not json\\n[1,2]\\n\\377\\n{}\\n\'; cat; } | exec "$0" "$@"'
        return "sh", ["-c", script, self.command, *self.args]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    """A SearXNG fake (held by `gate` while a query holds the word `slow`), config and env."""
    gate = threading.Event()
    searxng = GatedSearxng(fixture_bytes("searxng/wal-typed-and-legacy.json"), gate)
    config = write_config(tmp_path, searxng=searxng.url, timeout="20s")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "SIFT_CONFIG": str(config),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    yield Setup(SIFT, ["mcp", "--skills-dir", str(CATALOG)], env, searxng, gate)
    gate.set()
    searxng.close()


class GatedSearxng(FakeUpstream):
    """A SearXNG fake that holds any query containing `slow` until the gate opens."""

    def __init__(self, body: bytes, gate: threading.Event) -> None:
        super().__init__(body)
        self.slow_gate = gate
        self.slow_arrived = threading.Event()
        answer = self._server.RequestHandlerClass._answer  # type: ignore[attr-defined]

        def hold(handler: Any) -> None:
            if "slow" in handler.path:
                self.slow_arrived.set()
                self.slow_gate.wait(30)
            answer(handler)

        self._server.RequestHandlerClass.do_GET = hold  # type: ignore[attr-defined]


ARGUMENTS = {
    "web_search": {"query": "sqlite wal", "limit": 3},
    "skill_search": {"query": "fill pdf form", "limit": 2},
}


def check_structured(tool: dict[str, Any], structured: object) -> None:
    """Validate structured content against the tool's output schema (JSON Schema 2020-12)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(tool["outputSchema"])
    validator.check_schema(tool["outputSchema"])
    validator(tool["outputSchema"]).validate(structured)
    assert json.loads(json.dumps(structured)) == structured
