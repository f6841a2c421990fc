"""deploy/searxng/settings.yml against a real SearXNG: sift searches it, `sift init` probes it.

The instance runs from `make searxng`'s venv with the shipped settings, its engines swapped
for one loopback `json_engine` page (searxngkit). Skipped, saying why, when
`../shared/vendor` is absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from clikit import sift
from gatewaykit import FakeUpstream, write_config
from searxngkit import Instance, page_body, real_searxng, require_searxng


@pytest.fixture(scope="module")
def page() -> Iterator[FakeUpstream]:
    """The loopback page the SearXNG engine reads: three items."""
    fake = FakeUpstream(page_body(3))
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory, page: FakeUpstream) -> Iterator[Instance]:
    """One real SearXNG for the module, with deploy/'s settings as shipped."""
    require_searxng()
    with real_searxng(tmp_path_factory.mktemp("searxng"), engine_url=page.url) as running:
        yield running


def test_the_shipped_settings_answer_json_without_a_limiter(instance: Instance) -> None:
    # sift asks many times from one address: twenty quick searches all answer, none 429.
    with httpx.Client(trust_env=False) as client:
        for _ in range(20):
            answer = client.get(f"{instance.url}/search", params={"q": "wal", "format": "json"})
            assert answer.status_code == 200
    body = answer.json()
    assert [hit["url"] for hit in body["results"]][:1] == ["https://docs.example.org/wal/0"]
    assert body["unresponsive_engines"] == []


def test_sift_search_finds_what_the_real_searxng_returns(
    tmp_path: Path, instance: Instance, page: FakeUpstream
) -> None:
    config = write_config(tmp_path, searxng=instance.url, timeout="20s")  # a loaded machine
    asked = len(page.calls)
    done = sift("search", "--config", str(config), "--json", "write-ahead log")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert [hit["url"] for hit in answer["results"]] == [
        f"https://docs.example.org/wal/{i}" for i in range(3)
    ]
    assert answer["results"][0]["title"] == "WAL page 0"
    assert answer["results"][0]["snippet"] == "About write-ahead logging, part 0."
    assert {hit["source"] for hit in answer["results"]} == {"searxng"}
    assert [hit["engines"] for hit in answer["results"]] == [1, 1, 1]
    assert answer["warnings"] == [] and answer["cached"] is False
    # The engine read the page with the caller's query: sift -> SearXNG -> the loopback page.
    assert len(page.calls) > asked and "write-ahead" in page.calls[-1].path


def test_init_searxng_probes_the_real_instance_and_enables_it(
    tmp_path: Path, instance: Instance
) -> None:
    done = sift("init", "--dir", str(tmp_path), "--searxng", instance.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"SearXNG at {instance.url} answers JSON (3 results")
    config = tmp_path / "config.toml"
    search = sift("search", "--config", str(config), "sqlite wal")
    assert search.returncode == 0, search.stderr
    assert search.stdout.startswith("WAL page 0\nhttps://docs.example.org/wal/0\n")


def test_init_searxng_with_json_off_says_what_to_change_and_writes_nothing(
    tmp_path: Path, page: FakeUpstream
) -> None:
    def json_off(text: str) -> str:
        assert "formats: [html, json]" in text
        return text.replace("formats: [html, json]", "formats: [html]")

    with real_searxng(tmp_path / "searxng", engine_url=page.url, edit=json_off) as off:
        done = sift("init", "--dir", str(tmp_path / "etc"), "--searxng", off.url)
    assert done.returncode == 1
    assert done.stderr == (
        f"sift init: {off.url} refuses JSON (403): add json to its settings.yml, "
        "`search: formats: [html, json]`, and restart SearXNG; nothing written\n"
    )
    assert not (tmp_path / "etc").exists()
