"""Configuration: `config.toml`, `client.toml` and `secret.env`.

Strict by design: an unknown key or a wrongly typed value is a `ConfigError` naming the key
and the file; nothing is coerced (a boolean is not an integer). A missing config file means
all defaults. Durations are strings such as "250ms", "8s", "10m", "1h".

One module per concept: where the files are and reading them (`files`), the strict reading of
a TOML table (`tables`), the settings and their loaders (`settings`), the secrets
(`secrets`). This front door names what the rest of sift uses.
"""

from __future__ import annotations

from siftlib.config.files import (
    default_db,
    default_secret_env,
    locate_config,
    read_toml,
    resolve_config_path,
)
from siftlib.config.secrets import Secrets, load_secrets
from siftlib.config.settings import (
    PAID_SOURCES,
    SOURCE_ORDER,
    BrowserConfig,
    Config,
    FetchConfig,
    load_client_config,
    load_config,
)
from siftlib.config.tables import parse_duration

__all__ = [
    "PAID_SOURCES",
    "SOURCE_ORDER",
    "BrowserConfig",
    "Config",
    "FetchConfig",
    "Secrets",
    "default_db",
    "default_secret_env",
    "load_client_config",
    "load_config",
    "load_secrets",
    "locate_config",
    "parse_duration",
    "read_toml",
    "resolve_config_path",
]
