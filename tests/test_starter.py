"""The starter files of `sift init`: every key at its default, loadable, never overwriting."""

from __future__ import annotations

import stat
import tomllib
from dataclasses import fields, replace
from pathlib import Path

import pytest

from siftlib.config import load_config, load_secrets
from siftlib.skills.consent import RerankSettings, load_settings
from siftlib.starter import StarterExists, render_config, write_starter


def test_the_starter_config_loads_to_exactly_the_defaults(tmp_path: Path) -> None:
    config_path, secret_path = write_starter(
        config_path=tmp_path / "config.toml", db=tmp_path / "cache.db"
    )
    loaded = load_config(str(config_path))
    (tmp_path / "empty.toml").write_text("")
    expected = replace(
        load_config(str(tmp_path / "empty.toml")),
        path=config_path,
        db=tmp_path / "cache.db",
        secret_env=secret_path,
        secret_env_configured=True,
    )
    assert loaded == expected
    assert load_settings(config_path, cwd=tmp_path) == (RerankSettings(), [])  # [skill_search]


def test_the_starter_config_names_every_setting() -> None:
    data = tomllib.loads(render_config(db=Path("/db"), secret_env=Path("/s.env")))
    assert set(data["server"]) == {"listen", "db", "secret_env", "permit_restricted"}
    assert set(data["search"]) == {
        "k", "timeout", "rerank", "digest", "cache_ttl", "searxng", "brave_llm", "tavily"
    }  # fmt: skip
    assert set(data["search"]["searxng"]) == {"enabled", "url"}
    assert set(data["search"]["brave_llm"]) == {"enabled", "url", "daily_credit_cap"}
    assert set(data["search"]["tavily"]) == {"enabled", "url", "daily_credit_cap", "no_rerank"}
    assert set(data["skill_search"]["reranking"]) == {f.name for f in fields(RerankSettings)}


def test_a_path_with_quotes_stays_one_toml_string() -> None:
    text = render_config(db=Path('/odd "dir"\\cache.db'), secret_env=Path("/s.env"))
    assert tomllib.loads(text)["server"]["db"] == '/odd "dir"\\cache.db'


def test_the_secret_template_is_private_and_sets_nothing(tmp_path: Path) -> None:
    _, secret_path = write_starter(config_path=tmp_path / "config.toml", db=tmp_path / "c.db")
    assert stat.S_IMODE(secret_path.stat().st_mode) == 0o600
    secrets = load_secrets(secret_path, environ={})
    assert secrets.callers() == {}
    assert secrets.get("TAVILY_API_KEY") is None and secrets.get("BRAVE_API_KEY") is None


@pytest.mark.parametrize("existing", ["config.toml", "secret.env"])
def test_an_existing_file_stops_both(existing: str, tmp_path: Path) -> None:
    (tmp_path / existing).write_text("mine\n")
    with pytest.raises(StarterExists, match="never overwrites"):
        write_starter(config_path=tmp_path / "config.toml", db=tmp_path / "c.db")
    assert [p.name for p in tmp_path.iterdir()] == [existing]
    assert (tmp_path / existing).read_text() == "mine\n"
