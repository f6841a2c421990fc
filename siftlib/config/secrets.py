"""`secret.env`: provider keys and caller tokens, loaded once, never shown.

    secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
    secrets.get("TAVILY_API_KEY")        # the file's value, else the environment's, else None

Secrets live in a private map loaded once; the process environment is the fallback for each
key. `Secrets` never shows a value in its repr, and errors name a key or a line number, never
a value.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from siftlib.errors import ConfigError
from siftlib.lazylog import LazyLogger

__all__ = ["Secrets", "load_secrets", "parse_secret_env"]

log = LazyLogger("sift")


class Secrets:
    """Keys from `secret.env`, with the process environment as fallback; values never shown."""

    def __init__(
        self,
        values: Mapping[str, str],
        environ: Mapping[str, str] | None = None,
        *,
        file_missing: bool = False,
    ) -> None:
        self._values = dict(values)
        self._environ = os.environ if environ is None else environ
        self.file_missing = file_missing

    def __repr__(self) -> str:
        return f"<Secrets keys={sorted(self._keys())}>"

    def _keys(self) -> set[str]:
        return set(self._values) | {k for k in self._environ if k.startswith(("SIFT_TOKEN_",))}

    def get(self, key: str) -> str | None:
        """Return a secret's value, or None when it is missing or blank."""
        value = self._values.get(key) or self._environ.get(key) or ""
        return value.strip() or None

    def callers(self) -> dict[str, str]:
        """Return caller name (lowercased) → bearer token, from `SIFT_TOKEN_<NAME>` keys.

        A token that is not ASCII is a `ConfigError` (its key is named, never its value).
        """
        found: dict[str, str] = {}
        for source in (self._environ, self._values):  # the file wins over the environment
            for key, value in source.items():
                name = key[len("SIFT_TOKEN_") :].lower()
                if key.startswith("SIFT_TOKEN_") and name and value.strip():
                    if not value.isascii():
                        # Header values arrive as bytes read as latin-1: no such token
                        # could ever match, so refuse it here rather than never match.
                        raise ConfigError(f"{key}: a caller token must be ASCII")
                    found[name] = value.strip()
        return found


def parse_secret_env(text: str, path: Path) -> dict[str, str]:
    """Parse `KEY=value` lines (`#` comments, optional quotes, optional `export`)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            # The line may hold a secret: name only its number.
            raise ConfigError(f"{path}: line {number} is not KEY=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def load_secrets(
    path: Path, environ: Mapping[str, str] | None = None, *, expected: bool = False
) -> Secrets:
    """Load `secret.env` once; a missing file leaves only the environment.

    Warns (on the `sift` logger) when an `expected` file is missing, and when the file is
    open to group or others, with the `chmod` that fixes it.
    """
    try:
        with path.open(encoding="utf-8") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            text = f.read()
    except FileNotFoundError:
        if expected:
            log.warning(
                "%s (server.secret_env) does not exist: keys come from the environment only",
                path,
            )
        return Secrets({}, environ, file_missing=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__})") from None
    if mode & 0o077:
        log.warning(
            "%s has mode %04o, so other users may read its keys: run chmod 600 %s",
            path,
            mode,
            path,
        )
    return Secrets(parse_secret_env(text, path), environ)
