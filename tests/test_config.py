"""Strict config loading, durations and secrets (search.md §2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest
from clikit import sift

from siftlib.config import (
    Secrets,
    default_db,
    default_secret_env,
    load_client_config,
    load_config,
    load_secrets,
    parse_duration,
    resolve_config_path,
)
from siftlib.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


def test_missing_default_file_means_all_defaults() -> None:
    config = load_config(None)
    assert (config.k, config.timeout, config.rerank, config.digest, config.cache_ttl) == (
        8,
        8.0,
        True,
        False,
        3600.0,
    )
    assert config.listen == "127.0.0.1:8787"
    assert config.enabled_sources == ()
    tavily = config.source("tavily")
    assert (tavily.url, tavily.daily_credit_cap, tavily.no_rerank) == (
        "https://api.tavily.com/search",
        500,
        False,
    )
    assert config.source("brave_llm").url == "https://api.search.brave.com/res/v1/llm/context"
    assert config.db.name == "cache.db" and config.secret_env.name == "secret.env"


def test_full_file(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """
[server]
listen = "127.0.0.1:9000"
db = "/var/lib/sift/server.db"
permit_restricted = ["Alice"]
[search]
k = 12
timeout = "250ms"
rerank = false
cache_ttl = "10m"
[search.searxng]
enabled = true
url = "http://127.0.0.1:8888"
[search.tavily]
enabled = true
daily_credit_cap = 0
no_rerank = true
""",
        )
    )
    assert config.db == Path("/var/lib/sift/server.db")
    assert config.permit_restricted == ("alice",)
    assert (config.k, config.timeout, config.rerank, config.cache_ttl) == (12, 0.25, False, 600.0)
    assert [s.name for s in config.enabled_sources] == ["searxng", "tavily"]
    assert config.source("tavily").daily_credit_cap == 0 and config.source("tavily").no_rerank


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("surprise = 1", "surprise"),
        ("[server]\nport = 8787", "server.port"),
        ("[search]\nlimit = 5", "search.limit"),
        ("[search.tavily]\napi_key = 'x'", "search.tavily.api_key"),
        ("[search.searxng]\nno_rerank = true", "search.searxng.no_rerank"),
        ("[search.bing]\nenabled = true", "search.bing"),
    ],
)
def test_unknown_key_names_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert f"{path}: {key} is not a known setting" == str(error.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[search]\nk = '8'", "search.k"),
        ("[search]\nk = true", "search.k"),
        ("[search]\nk = 8.0", "search.k"),
        ("[search]\nrerank = 1", "search.rerank"),
        ("[search]\ntimeout = 8", "search.timeout"),
        ("[search.tavily]\ndaily_credit_cap = true", "search.tavily.daily_credit_cap"),
        ("[search.tavily]\nenabled = 'yes'", "search.tavily.enabled"),
        ("[server]\npermit_restricted = 'alice'", "server.permit_restricted"),
        ("[server]\npermit_restricted = [1]", "server.permit_restricted"),
        ("[server]\nlisten = 8787", "server.listen"),
        ("search = 1", "search"),
    ],
)
def test_wrong_type_names_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^{path}: {key} must be"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[search]\nk = 0", "search.k"),
        ("[search]\nk = 51", "search.k"),
        ("[search]\ntimeout = '8 seconds'", "search.timeout"),
        ("[search]\ntimeout = '0s'", "search.timeout"),
        ("[search]\ncache_ttl = '-1h'", "search.cache_ttl"),
        ("[search.tavily]\ndaily_credit_cap = -1", "search.tavily.daily_credit_cap"),
        ("[search.searxng]\nurl = 'ftp://127.0.0.1'", "search.searxng.url"),
        ("[search.tavily]\nurl = 'https://user:pw@api.tavily.com/search'", "search.tavily.url"),
        ("[search.searxng]\nurl = 'http://127.0.0.1:99999'", "search.searxng.url"),
        ("[search.searxng]\nurl = 'not a url'", "search.searxng.url"),
        ("[server]\nstore = 'postgres://db/sift'", "server.store"),
        ("[server]\nstore = 'redis://'", "server.store"),
        ("[server]\nstore = 'redis://127.0.0.1:99999'", "server.store"),
        ("[server]\nstore = 'redis://127.0.0.1:6379/sift'", "server.store"),
        ("[server]\nstore = 'redis://127.0.0.1:6379/0?socket_timeout=9'", "server.store"),
        ("[server]\nstore_fallback_share = 1.5", "server.store_fallback_share"),
        ("[server]\nstore_fallback_share = '0.5'", "server.store_fallback_share"),
        ("[server]\nstore_fallback_share = true", "server.store_fallback_share"),
    ],
)
def test_bad_value_names_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^{path}: {key} "):
        load_config(path)


def test_userinfo_password_never_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "[search.tavily]\nurl = 'https://user:hunter2@api.tavily.com/'")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "hunter2" not in str(error.value)


def test_a_store_url_names_a_shared_store_of_the_redis_protocol(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "")).store == "sqlite"
    for url in ("redis://10.0.0.5:6379/2", "rediss://cache.internal", "valkey://sift@vk:6380"):
        text = f'[server]\nstore = "{url}"\nstore_prefix = "fleet:"\nstore_fallback_share = 1'
        config = load_config(write(tmp_path, text))
        assert (config.store, config.store_prefix, config.store_fallback_share) == (
            url,
            "fleet:",
            1.0,
        )


def test_a_store_password_belongs_in_secret_env_and_is_never_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nstore = 'redis://sift:hunter2-pw@10.0.0.5:6379/0'\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "SIFT_STORE_PASSWORD" in str(error.value)
    assert "hunter2" not in str(error.value)


@pytest.mark.parametrize(
    "url", ["redis://[S3cretPW]:6379/0", "redis://[cache.internal]:6379/0", "redis://[::1:6379/0"]
)
def test_a_bracketed_store_host_that_is_no_ip_is_a_sentence_that_echoes_nothing(
    tmp_path: Path, url: str
) -> None:
    path = write(tmp_path, f"[server]\nstore = '{url}'\n")
    with pytest.raises(ConfigError, match=rf"^{path}: server.store ") as error:
        load_config(path)
    assert "S3cretPW" not in str(error.value) and "cache.internal" not in str(error.value)
    assert error.value.__context__ is None or error.value.__suppress_context__
    assert load_config(write(tmp_path, "[server]\nstore = 'redis://[::1]:6379/0'\n")).store


def test_a_store_url_without_the_redis_extra_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if `sift[redis]` were not installed
    path = write(tmp_path, "[server]\nstore = 'redis://127.0.0.1:6379/0'\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).endswith(
        "server.store needs the optional extra sift[redis]: pip install 'sift[redis]'"
    )


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[search\n"))


NOT_UTF8 = b"[search]\nk = 5 # caf\xe9\n"


def run_sift(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "sift.py"), *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["search", "wal", "--local"],
        ["serve"],
        ["bakeoff", "run", "--queries", "q", "--targets", "t", "--out", "o"],
    ],
    ids=["search", "serve", "bakeoff"],
)
def test_a_config_that_is_not_utf8_is_a_config_error_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(NOT_UTF8)
    done = run_sift(*command, "--config", str(path))
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert f"{path}: not valid UTF-8" in done.stderr


def test_a_client_config_that_is_not_utf8_is_a_config_error_exit_2() -> None:
    client_toml = resolve_config_path(None).parent / "client.toml"
    client_toml.parent.mkdir(parents=True, exist_ok=True)
    client_toml.write_bytes(b'url = "http://127.0.0.1:9" # caf\xe9\n')
    done = run_sift("search", "wal")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert f"{client_toml}: not valid UTF-8" in done.stderr


def test_skill_search_table_is_allowed_and_left_to_skill_search(tmp_path: Path) -> None:
    # Skill search validates its own table (an invalid one only disables reranking).
    path = write(tmp_path, "[skill_search.reranking]\nenabled = 'not validated here'")
    assert str(load_config(path).path) == path


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("250ms", 0.25), ("8s", 8.0), ("10m", 600.0), ("1h", 3600.0), ("1.5s", 1.5)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["8", "8 s", "s", "1d", "-1s", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_config_path_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_home = Path(os.environ["XDG_CONFIG_HOME"])
    assert resolve_config_path(None) == config_home / "sift" / "config.toml"
    from_env, explicit = Path(write(tmp_path, "")), tmp_path / "explicit.toml"
    explicit.write_text("")
    monkeypatch.setenv("SIFT_CONFIG", str(from_env))
    assert resolve_config_path(None) == from_env
    assert resolve_config_path(str(explicit)) == explicit


@pytest.mark.parametrize("named_by", ["--config", "$SIFT_CONFIG"])
def test_a_named_config_file_must_exist(
    named_by: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "absent.toml"
    if named_by == "$SIFT_CONFIG":
        monkeypatch.setenv("SIFT_CONFIG", str(absent))
    with pytest.raises(ConfigError) as error:
        load_config(str(absent) if named_by == "--config" else None)
    assert str(error.value) == f"{absent}: no such config file (named by {named_by})"


def test_secret_env_parsing(tmp_path: Path) -> None:
    path = tmp_path / "secret.env"
    path.write_text(
        "# provider keys\n"
        "BRAVE_API_KEY=brave-1\n"
        'TAVILY_API_KEY="tvly 2"\n'
        "export SIFT_TOKEN_ALICE='tok-a'\n"
        "\n"
        "SIFT_TOKEN_BOB = tok-b\n"
        "SIFT_TOKEN_=ignored\n"
    )
    secrets = load_secrets(path, environ={"TAVILY_API_KEY": "env", "OTHER": "x"})
    assert secrets.get("BRAVE_API_KEY") == "brave-1"
    assert secrets.get("TAVILY_API_KEY") == "tvly 2"  # the file wins over the environment
    assert secrets.callers() == {"alice": "tok-a", "bob": "tok-b"}
    assert "brave-1" not in repr(secrets) and "tok-a" not in repr(secrets)


@pytest.mark.parametrize("token", ["tök-ä", "tok\u00a0x"])
def test_a_caller_token_that_is_not_ascii_is_a_config_error(tmp_path: Path, token: str) -> None:
    # A header value is read as latin-1 bytes: such a token could never match a request.
    path = tmp_path / "secret.env"
    path.write_text(f"SIFT_TOKEN_OPS={token}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="^SIFT_TOKEN_OPS: a caller token must be ASCII$"):
        load_secrets(path, environ={}).callers()


def test_environment_is_the_fallback(tmp_path: Path) -> None:
    secrets = load_secrets(
        tmp_path / "absent.env", environ={"TAVILY_API_KEY": "tvly-env", "SIFT_TOKEN_CI": "t"}
    )
    assert secrets.get("TAVILY_API_KEY") == "tvly-env"
    assert secrets.get("BRAVE_API_KEY") is None
    assert secrets.callers() == {"ci": "t"}


def test_blank_secret_is_missing() -> None:
    assert Secrets({"TAVILY_API_KEY": "  "}, environ={}).get("TAVILY_API_KEY") is None


def test_malformed_secret_line_never_echoes_its_value(tmp_path: Path) -> None:
    path = tmp_path / "secret.env"
    path.write_text("BRAVE_API_KEY=ok\nthis-is-a-leaked-token\n")
    with pytest.raises(ConfigError) as error:
        load_secrets(path, environ={})
    assert "line 2" in str(error.value) and "leaked" not in str(error.value)


def test_client_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_client_config(None) is None
    assert load_client_config("http://127.0.0.1:8787/") == load_client_config(
        "http://127.0.0.1:8787"
    )
    client_toml = resolve_config_path(None).parent / "client.toml"
    client_toml.parent.mkdir(parents=True, exist_ok=True)
    client_toml.write_text('url = "http://10.0.0.5:8787"\ntoken = "file-token"\n')
    client = load_client_config(None)
    assert client is not None and (client.url, client.token) == (
        "http://10.0.0.5:8787",
        "file-token",
    )
    monkeypatch.setenv("SIFT_TOKEN", "env-token")
    client = load_client_config(None)
    assert client is not None and client.token == "env-token"
    client_toml.write_text('url = "http://x"\nsecret = 1\n')
    with pytest.raises(ConfigError, match="secret is not a known setting"):
        load_client_config(None)


@pytest.mark.skipif(sys.platform != "linux", reason="sift works out the XDG directories on Linux")
@pytest.mark.parametrize("xdg", ["absolute", "relative", "unset"])
def test_the_default_paths_are_where_platformdirs_puts_them(
    xdg: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable, value in (("XDG_CONFIG_HOME", "conf"), ("XDG_STATE_HOME", "state")):
        if xdg == "unset":
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, str(tmp_path / value) if xdg == "absolute" else value)
    assert default_db() == Path(platformdirs.user_state_dir("sift")) / "cache.db"
    assert default_secret_env() == Path(platformdirs.user_config_dir("sift")) / "secret.env"
    assert str(tmp_path) in str(default_db())


@pytest.mark.parametrize(
    "entry", ["169.254.169.254:80", "[fd00:ec2::254]:80", "[::ffff:169.254.169.254]:80"]
)
def test_a_pinhole_on_a_cloud_metadata_address_is_refused(tmp_path: Path, entry: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[fetch]\nallow = ["{entry}"]\n')
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    assert str(error.value) == (
        f"{path}: fetch.allow {entry!r} is a cloud metadata address, which no pinhole opens "
        "(it hands out the machine's credentials)"
    )


BROKEN_CLIENT = "raise ImportError('a broken build of the client')\n"


@pytest.mark.parametrize(
    "command",
    [["search", "--local", "sqlite wal"], ["serve"], ["fetch", "--local", "https://a.example/"]],
)
def test_a_store_client_installed_but_broken_is_the_config_error_naming_the_extra(
    tmp_path: Path, command: list[str]
) -> None:
    broken = tmp_path / "site" / "redis"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(BROKEN_CLIENT)
    text = "[server]\nstore = 'redis://127.0.0.1:6379/0'\nlisten = '127.0.0.1:0'\n"
    text += "[search.searxng]\nenabled = true\nurl = 'http://127.0.0.1:9'\n"
    text += "[fetch]\nenabled = true\n"
    path = write(tmp_path, text)
    done = sift(*command, "--config", path, env={"PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 2
    assert "sift[redis]" in done.stderr and "Traceback" not in done.stderr


def test_a_bracketed_store_host_is_a_config_error_at_the_command_line(tmp_path: Path) -> None:
    text = "[server]\nstore = 'redis://[S3cretPW]:6379/0'\n"
    text += "[search.searxng]\nenabled = true\nurl = 'http://127.0.0.1:9'\n"
    done = sift("search", "--local", "--config", write(tmp_path, text), "sqlite wal")
    assert done.returncode == 2
    assert "server.store" in done.stderr
    assert "S3cretPW" not in done.stderr + done.stdout and "Traceback" not in done.stderr
