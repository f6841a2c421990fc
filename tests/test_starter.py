"""The starter files of `sift init`: every key at its default, loadable, never overwriting."""

from __future__ import annotations

import stat
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from siftlib.config import load_config, load_secrets
from siftlib.config import tables as config_module
from siftlib.errors import ConfigError
from siftlib.skills.consent import RerankSettings, load_settings
from siftlib.starter import StarterExists, enable_searxng, render_config, write_starter


def test_the_starter_config_loads_to_exactly_the_defaults(tmp_path: Path) -> None:
    config_path, secret_path = write_starter(
        config_path=tmp_path / "config.toml", db=tmp_path / "cache.db"
    )
    loaded = load_config(str(config_path))
    (tmp_path / "empty.toml").write_text("")
    expected = load_config(str(tmp_path / "empty.toml"))._replace(
        path=config_path,
        db=tmp_path / "cache.db",
        secret_env=secret_path,
        secret_env_configured=True,
    )
    assert loaded == expected
    assert load_settings(config_path, cwd=tmp_path) == (RerankSettings(), [])  # [skill_search]


def test_the_starter_config_names_every_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Record the keys each table of the loader accepts, so a new setting that the starter
    # does not name fails here rather than surprising the first person to need it.
    accepted: dict[str, set[str]] = {}
    check_keys = config_module.Table.check_keys

    def spy(table: config_module.Table, allowed: set[str]) -> None:
        accepted[table.prefix] = set(allowed)
        check_keys(table, allowed)

    monkeypatch.setattr(config_module.Table, "check_keys", spy)
    config_path, _ = write_starter(config_path=tmp_path / "config.toml", db=tmp_path / "c.db")
    load_config(str(config_path))
    data = tomllib.loads(config_path.read_text())
    assert accepted  # the loader checks its tables
    for prefix, allowed in accepted.items():
        table = data
        for part in prefix.rstrip(".").split(".") if prefix else []:
            table = table[part]
        assert set(table) == allowed, prefix or "the top level"
    assert set(data["skill_search"]) == {"mode", "reranking"}
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


def test_enable_searxng_adds_the_table_to_a_config_without_one(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text("# mine\n[search]\nk = 5\n[search.tavily]\nenabled = true\n")
    config_path.chmod(0o640)
    enable_searxng(config_path, "http://10.0.0.7:8080")
    assert config_path.read_text() == (
        "# mine\n[search]\nk = 5\n[search.tavily]\nenabled = true\n"
        '[search.searxng]\nenabled = true\nurl = "http://10.0.0.7:8080"\n'
    )
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o640
    config = load_config(str(config_path))
    assert [s.name for s in config.enabled_sources] == ["searxng", "tavily"] and config.k == 5


def test_enable_searxng_leaves_a_config_it_cannot_edit_alone(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    text = "[search]\nsearxng = { enabled = false }\n"
    config_path.write_text(text)
    with pytest.raises(ConfigError):
        enable_searxng(config_path, "http://127.0.0.1:8888")
    assert config_path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]
