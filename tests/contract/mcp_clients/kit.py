"""Helpers for the MCP SDK contract tests: the launch command, a gated SearXNG, the checks."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatewaykit import FakeUpstream

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
    arguments: dict[str, dict[str, Any]]  # a call of each tool that succeeds

    def launch(self, *, garbage: bool = False) -> tuple[str, list[str]]:
        """Return the command and arguments; with `garbage`, junk lines go to stdin first."""
        if not garbage:
            return self.command, self.args
        script = '{ printf \'not json\\n[1,2]\\n\\377\\n{}\\n\'; cat; } | exec "$0" "$@"'
        return "sh", ["-c", script, self.command, *self.args]


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


def check_structured(tool: dict[str, Any], structured: object) -> None:
    """Validate structured content against the tool's output schema (JSON Schema 2020-12)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(tool["outputSchema"])
    validator.check_schema(tool["outputSchema"])
    validator(tool["outputSchema"]).validate(structured)
    assert json.loads(json.dumps(structured)) == structured
