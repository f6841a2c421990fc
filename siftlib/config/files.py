"""Where sift's files are, and reading one: `config.toml`, `client.toml`, `secret.env`, the store.

    path = resolve_config_path(None)   # --config > $SIFT_CONFIG > the user config dir
    data = read_toml(path)             # {} when the default file is missing

On Linux the XDG directories are worked out here; platformdirs answers on other systems.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from siftlib.errors import ConfigError

__all__ = [
    "default_db",
    "default_secret_env",
    "locate_config",
    "read_toml",
    "resolve_config_path",
    "user_config_dir",
]


def user_config_dir() -> Path:
    if (found := _xdg_dir("XDG_CONFIG_HOME", "~/.config")) is not None:
        return found
    import platformdirs

    return Path(platformdirs.user_config_dir("sift"))


def _user_state_dir() -> Path:
    if (found := _xdg_dir("XDG_STATE_HOME", "~/.local/state")) is not None:
        return found
    import platformdirs

    return Path(platformdirs.user_state_dir("sift"))


def _xdg_dir(variable: str, fallback: str) -> Path | None:
    """Return sift's XDG base directory on Linux, as platformdirs gives it there; else None.

    The variable when it holds an absolute path, else the fallback under the home directory.
    Worked out here because importing platformdirs took longer than the rest of reading the
    config of a cached `sift search`; platformdirs still answers on other systems.
    """
    if sys.platform != "linux":
        return None
    base = os.environ.get(variable, "")
    return Path(base if os.path.isabs(base) else os.path.expanduser(fallback), "sift")


def default_db() -> Path:
    """Return where the store file goes when `server.db` does not say: the user state dir."""
    return _user_state_dir() / "cache.db"


def default_secret_env() -> Path:
    """Return where `secret.env` is when `server.secret_env` does not say: the user config dir."""
    return user_config_dir() / "secret.env"


def locate_config(explicit: str | None = None) -> tuple[Path, str | None]:
    """Return the config path and what named it: `--config`, `$SIFT_CONFIG`, or None (default)."""
    if explicit:
        return Path(explicit), "--config"
    if os.environ.get("SIFT_CONFIG"):
        return Path(os.environ["SIFT_CONFIG"]), "$SIFT_CONFIG"
    return user_config_dir() / "config.toml", None


def resolve_config_path(explicit: str | None = None) -> Path:
    """Return the config path: `--config` > `$SIFT_CONFIG` > the user config dir.

    Only the default path may be missing (all defaults): a file named by `--config` or
    `$SIFT_CONFIG` that does not exist is a `ConfigError`, since running on defaults then
    would quietly do something other than what was meant.
    """
    path, named_by = locate_config(explicit)
    if named_by and not path.exists():
        raise ConfigError(f"{path}: no such config file (named by {named_by})")
    return path


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; a missing file is an empty table."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc
