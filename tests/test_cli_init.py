"""`sift init` as typed: where it writes, what it says, and that it never overwrites.

The SearXNG probe's refusal sentences are checked through `main()` (the probe is the same
code in or out of a process); its exit 1 and the unreachable case stay as typed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from clikit import sift
from gatewaykit import FakeUpstream

from siftlib.cli import main
from siftlib.config import load_config


def test_init_writes_where_sift_looks_and_a_search_then_finds_it() -> None:
    config_dir = Path(os.environ["XDG_CONFIG_HOME"]) / "sift"
    done = sift("init")
    assert done.returncode == 0, done.stderr
    config_path, secret_path = config_dir / "config.toml", config_dir / "secret.env"
    assert done.stdout.splitlines()[:2] == [
        f"wrote {config_path} (every setting at its default; no search source enabled)",
        f"wrote {secret_path} (mode 0600: provider keys and caller tokens go here)",
    ]
    assert "--config" not in done.stdout  # the default place needs no flag
    assert stat.S_IMODE(secret_path.stat().st_mode) == 0o600
    assert load_config(None).secret_env == secret_path
    # The next thing a person runs: it reads the new file and names the keys to set.
    search = sift("search", "sqlite", "wal")
    assert search.returncode == 2
    assert "no search source is enabled" in search.stderr and str(config_path) in search.stderr


def test_init_refuses_to_overwrite_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "secret.env").write_text("TAVILY_API_KEY=mine\n")
    done = sift("init", "--dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == (
        f"sift init: {tmp_path / 'secret.env'} exists: sift init never overwrites; "
        "move it away or choose --dir DIR\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.env"]
    assert (tmp_path / "secret.env").read_text() == "TAVILY_API_KEY=mine\n"


def test_init_dir_writes_both_files_there_and_says_how_to_use_them(tmp_path: Path) -> None:
    done = sift("init", "--dir", str(tmp_path / "etc"), env={"SIFT_CONFIG": ""})
    assert done.returncode == 0, done.stderr
    config_path = tmp_path / "etc" / "config.toml"
    assert load_config(str(config_path)).secret_env == tmp_path / "etc" / "secret.env"
    assert f'sift search --config {config_path} "your query"' in done.stdout
    again = sift("init", "--dir", str(tmp_path / "etc"))
    assert again.returncode == 2 and "never overwrites" in again.stderr


def test_init_writes_the_file_sift_config_names(tmp_path: Path) -> None:
    target = tmp_path / "sift.toml"
    done = sift("init", env={"SIFT_CONFIG": str(target)})
    assert done.returncode == 0, done.stderr
    assert target.is_file() and (tmp_path / "secret.env").is_file()
    assert "--config" not in done.stdout  # $SIFT_CONFIG already points there


def test_init_searxng_on_a_rate_limited_instance_names_the_limiter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limited = FakeUpstream(b"Too Many Requests", status=429)
    try:
        code = main(["init", "--dir", str(tmp_path), "--searxng", limited.url])
    finally:
        limited.close()
    assert code == 1
    assert capsys.readouterr().err == (
        f"sift init: {limited.url} rate-limits sift (429): turn its limiter off in "
        "settings.yml, `server: limiter: false`, and restart SearXNG; nothing written\n"
    )
    assert list(tmp_path.iterdir()) == []
    assert limited.calls[0].path == "/search?q=sift&format=json&pageno=1"


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        (b"<p>hi</p>", 200, "answered, but not with SearXNG's JSON: is it the SearXNG root URL?"),
        (b"{}", 500, "answered 500 to a JSON search"),
    ],
)  # fmt: skip
def test_init_searxng_refuses_what_is_not_a_working_searxng(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes, status: int, said: str
) -> None:
    fake = FakeUpstream(body, status=status)
    try:
        code = main(["init", "--dir", str(tmp_path), "--searxng", fake.url])
    finally:
        fake.close()
    assert code == 1
    assert capsys.readouterr().err == f"sift init: {fake.url} {said}; nothing written\n"
    assert list(tmp_path.iterdir()) == []


def test_init_searxng_where_nothing_listens_says_so(tmp_path: Path) -> None:
    fake = FakeUpstream()
    fake.close()  # the port is now closed
    done = sift("init", "--dir", str(tmp_path), "--searxng", fake.url)
    assert done.returncode == 1
    assert (
        done.stderr == f"sift init: nothing answers at {fake.url}: ConnectError; nothing written\n"
    )
    assert sift("init", "--dir", str(tmp_path), "--searxng", "ftp://x").returncode == 2


def test_init_searxng_enables_the_source_in_an_existing_config_keeping_the_rest(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    assert sift("init", "--dir", str(tmp_path)).returncode == 0
    config_path = tmp_path / "config.toml"
    before = config_path.read_text()
    done = sift("init", "--dir", str(tmp_path), "--searxng", searxng.url)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.splitlines()[1] == f"enabled [search.searxng] at {searxng.url} in {config_path}"
    )
    after = config_path.read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert changed == [
        ("enabled = false", "enabled = true"),
        ('url = "http://127.0.0.1:8888"', f'url = "{searxng.url}"'),
    ]
    config = load_config(str(config_path))
    assert [(s.name, s.url) for s in config.enabled_sources] == [("searxng", searxng.url)]
    assert sift("search", "--config", str(config_path), "wal").returncode == 0
    assert not list(tmp_path.glob(".*"))  # the draft is gone


def test_init_under_umask_0_writes_private_files_in_a_private_folder(tmp_path: Path) -> None:
    target = tmp_path / "new" / "sift"
    previous = os.umask(0)
    try:
        done = sift("init", "--dir", str(target))
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    for name in ("config.toml", "secret.env"):
        assert stat.S_IMODE((target / name).stat().st_mode) == 0o600
