"""`sift init` as typed: where it writes, what it says, and that it never overwrites."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clikit import sift

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
