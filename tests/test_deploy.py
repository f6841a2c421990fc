"""deploy/: the compose file, its sift config and the systemd units say what they promise.

Docker is not on the test machine, so the compose file is read, not run: every service on the
host's loopback, the files it mounts present, Valkey set as sift's store needs. The SearXNG
unit's command line is run for real (searxngkit), with its paths moved into the test venv.
"""

from __future__ import annotations

import configparser
import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gatewaykit import FakeUpstream
from searxngkit import VENV, page_body, real_searxng, require_searxng

from siftlib.config import load_config

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def unit(name: str) -> configparser.SectionProxy:
    """Return the `[Service]` section of a unit in deploy/systemd/."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(DEPLOY / "systemd" / name, encoding="utf-8")
    return parser["Service"]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """deploy/compose.yaml as data, read by the SearXNG venv's PyYAML (sift has none)."""
    require_searxng()
    code = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))"
    done = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", code, str(DEPLOY / "compose.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


@pytest.fixture
def page() -> Iterator[FakeUpstream]:
    fake = FakeUpstream(page_body(2))
    yield fake
    fake.close()


def test_the_compose_sift_config_enables_searxng_where_the_settings_put_it() -> None:
    config = load_config(str(DEPLOY / "sift" / "config.toml"))
    assert config.listen == "127.0.0.1:8787"
    assert [(s.name, s.url) for s in config.enabled_sources] == [
        ("searxng", "http://127.0.0.1:8888")
    ]
    assert config.store == "valkey://127.0.0.1:6379/0"
    settings = (DEPLOY / "searxng" / "settings.yml").read_text()
    assert 'bind_address: "127.0.0.1"' in settings and "port: 8888 " in settings


def test_every_compose_service_listens_on_loopback_only(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert sorted(services) == ["searxng", "sift", "valkey"]
    for service in services.values():
        assert service["network_mode"] == "host" and "ports" not in service
    assert services["searxng"]["environment"]["GRANIAN_HOST"] == "127.0.0.1"
    assert services["searxng"]["environment"]["GRANIAN_PORT"] == "8888"
    valkey = services["valkey"]["command"].split()
    assert valkey[valkey.index("--bind") + 1] == "127.0.0.1"
    assert valkey[valkey.index("--port") + 1] == "6379"
    # sift's caps need a store that never evicts a counter.
    assert valkey[valkey.index("--maxmemory-policy") + 1] == "noeviction"
    assert services["sift"]["environment"]["SIFT_CONFIG"] == "/etc/sift/config.toml"


def test_what_compose_mounts_and_builds_is_in_the_clone(compose: dict[str, Any]) -> None:
    services = compose["services"]
    mounts = [
        volume.split(":")[:2]
        for service in services.values()
        for volume in service.get("volumes", [])
        if volume.startswith("./")
    ]
    assert ["./searxng/settings.yml", "/etc/searxng/settings.yml"] in mounts
    assert ["./sift/config.toml", "/etc/sift/config.toml"] in mounts
    for source, _ in mounts:
        assert (DEPLOY / source).is_file(), source
    build = services["sift"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).is_file()


def test_the_sift_unit_reloads_with_sighup_and_stops_with_sigterm() -> None:
    service = unit("sift.service")
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["KillSignal"] == "SIGTERM"
    assert shlex.split(service["ExecStart"])[1:] == ["serve"]


def test_the_searxng_unit_command_serves_the_settings_as_json(
    tmp_path: Path, page: FakeUpstream
) -> None:
    service = unit("searxng.service")
    assert service["WorkingDirectory"] == "/opt/searxng/src"
    assert "SEARXNG_SETTINGS_PATH=/etc/searxng/settings.yml" in service["Environment"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == "/opt/searxng/.venv/bin/granian"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"

    def moved(port: int) -> list[str]:
        # The unit's own command, from the test venv and on a free port.
        line = [str(VENV / "bin" / "granian"), *argv[1:]]
        line[line.index("--port") + 1] = str(port)
        return line

    with real_searxng(tmp_path, engine_url=page.url, argv=moved) as instance:
        answer = httpx.get(
            f"{instance.url}/search", params={"q": "wal", "format": "json"}, trust_env=False
        )
    assert answer.status_code == 200
    assert [hit["url"] for hit in answer.json()["results"]] == [
        "https://docs.example.org/wal/0",
        "https://docs.example.org/wal/1",
    ]
