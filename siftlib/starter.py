"""The starter files `sift init` writes: a commented `config.toml` and a `secret.env` template.

    written = write_starter(config_path=Path("~/.config/sift/config.toml").expanduser())

`config.toml` holds every setting at its default, each with a comment saying what it does, so
the operator edits values instead of guessing keys; loading it gives exactly the defaults (a
test checks this against `Config` and `RerankSettings`). `secret.env` goes beside it, its keys
commented out so that nothing blank counts as set. Both files are created 0600 and the
folders sift makes for them 0700, whatever the umask: under umask 0 another local user could
otherwise add pinholes to the config or point it at their own store.
The config's `server.secret_env` names that file, so the two always go together.

Nothing is ever overwritten: when either file exists, neither is written (`StarterExists`).
Each file is created with `O_EXCL`, so a race with another writer fails rather than clobbers.
The one edit `sift init` makes to an existing config is `enable_searxng`: it sets `enabled`
and `url` in the `[search.searxng]` table (adding the table when there is none) and keeps
every other line and comment; the result must load with that source enabled at that URL
before it replaces the file, else the file is left alone (`ConfigError`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from siftlib import __version__
from siftlib.errors import ConfigError

SEARXNG_DEFAULT = "http://127.0.0.1:8888"
_SEARXNG_HEADER = re.compile(r"\s*\[\s*search\.searxng\s*\]\s*(#.*)?$")

CONFIG_TEMPLATE = """\
# sift configuration: every setting at its default. Written by `sift init`; edit freely.
# Durations are strings: "250ms", "8s", "10m", "1h". Unknown keys and wrong types are errors.

[server]
listen = "127.0.0.1:8787"          # HOST:PORT of `sift serve`; beyond loopback needs a caller token
db = "{db}"   # SQLite store: result cache and daily credits
secret_env = "{secret_env}"   # provider keys and caller tokens
permit_restricted = []             # caller names whose work no other caller may observe
store = "sqlite"                   # or "redis://host:6379/0" (rediss://, valkey://) to share one
store_prefix = "sift:"             # key prefix on a shared store
store_fallback_share = 0.5         # share of a daily cap one gateway may spend while it is down

[search]
k = 8                              # results per search when the caller does not say (1-50)
timeout = "8s"                     # per source, a hard wall-clock deadline
rerank = true                      # true: reciprocal-rank fusion; false: concatenation
digest = false                     # reserved; accepted, always off
cache_ttl = "1h"                   # how long a fused answer is served from the cache

# No source is enabled by default: the bake-off (bakeoff/BAKEOFF.md) decides which to enable.
# Set enabled = true on at least one before searching.

[search.searxng]                   # a SearXNG instance with JSON output enabled; free
enabled = {searxng_enabled}
url = "{searxng_url}"

[search.brave_llm]                 # Brave's LLM Context API; needs BRAVE_API_KEY in secret.env
enabled = false
url = "https://api.search.brave.com/res/v1/llm/context"
daily_credit_cap = 0               # calls per UTC day; 0 = no cap

[search.tavily]                    # Tavily search; needs TAVILY_API_KEY in secret.env
enabled = false
url = "https://api.tavily.com/search"
daily_credit_cap = 500             # credits per UTC day; 0 = no cap
no_rerank = false                  # true: Tavily's own order is kept as a prefix

# `sift fetch`, /v1/fetch and /v2/scrape: reading one page an agent names, through a guard
# that refuses private and metadata addresses.
[fetch]
enabled = true
timeout = "20s"                    # wall clock for the whole fetch, redirects included; max 60s
max_bytes = "10MiB"                # body bytes read after decompression
max_chars = 2000000                # characters of content returned
max_redirects = 5                  # 0-20
user_agent = "sift/{version}"
allow = []                         # exact "host:port" pinholes through the guard
per_host = 4                       # concurrent fetches to one host
pdf_max_pages = 200                # pages of a PDF read; past it a warning
cache_max_age = "1h"               # fetch cache: default maxAge, longest life of an entry; "0s" off
cache_max_bytes = "256MiB"         # fetch cache: stored answers; the oldest go first past it

# A headless Chromium for pages a script builds (apt-get install chromium-headless-shell, or
# chromium); off by default.
# Every byte it moves goes through sift's guard, as a plain fetch does.
[fetch.browser]
enabled = false
executable = "auto"                # chromium-headless-shell if installed, else chromium
pages = 2                          # renders at once (1-16)
render = "auto"                    # "auto": application shells only; "always": every HTML page
max_bytes = "50MiB"                # everything one render's subresources may move

# `sift rerank-skills`: "local" (the default) ranks offline and can say that no skill fits;
# "keyword" is the substring baseline (a project's .sift/config.toml may choose either).
# Semantic reranking by a hosted model is off unless you opt in below (only this global config
# can) and export TYPESAFE_API_KEY; it takes precedence over local, and falls back to keyword.
# Off, nothing leaves the machine.
[skill_search]
mode = "local"

[skill_search.reranking]
enabled = false                    # only the literal true opts in
experimental_fit = false           # also ask, per skill, whether it fits (needs enabled)
min_fit_probability = 0.75         # fit mode: at least this is applicable, (0.5, 1]
model = "jev-latest"
timeout_ms = 1000                  # end-to-end deadline of one provider call (1-10000)
cache_max_entries = 128            # in-memory answers kept per session (0 disables the cache)
cache_ttl_ms = 300000              # how long one is kept (0 disables the cache)
max_candidates = 32                # shortlist size sent to the model (1-64)
max_query_bytes = 2048             # a longer query is not sent (1-8192)
max_name_bytes = 256               # a longer skill name is not sent (1-256)
max_description_bytes = 512        # descriptions are cut to this (0-2048)
max_payload_bytes = 32768          # the whole request body, JSON included (256-65536)
min_probability = 0.55             # the model's best answer needs at least this, [0, 1]
min_margin = 0.10                  # and this lead over the runner-up, [0, 1]
"""

SECRET_TEMPLATE = """\
# sift secrets: KEY=value lines, read once at start. Keep this file mode 0600.
# Values never appear in logs, errors, metrics or /healthz. The process environment is the
# fallback for every key. Remove the leading "# " of a line to set it.

# Provider keys: only the enabled sources need theirs.
# BRAVE_API_KEY=
# TAVILY_API_KEY=

# One line per caller of the gateway: agents send "Authorization: Bearer <token>", and the
# name (here "hermes") is what logs and metrics show. With no caller token, `sift serve`
# runs open, on a loopback address only. A token, for example:
#   python3 -c "import secrets; print(secrets.token_urlsafe(32))"
# SIFT_TOKEN_HERMES=

# TYPESAFE_API_KEY (skill reranking) is read from the environment only, never from here.
"""


class StarterExists(ConfigError):
    """A file `sift init` would write already exists."""


def render_config(*, db: Path, secret_env: Path, searxng: str | None = None) -> str:
    """Return the starter `config.toml` naming these store and secret paths (and SearXNG)."""
    return CONFIG_TEMPLATE.format(
        db=_toml_text(db),
        secret_env=_toml_text(secret_env),
        version=__version__,
        searxng_enabled="true" if searxng else "false",
        searxng_url=_toml_text(searxng or SEARXNG_DEFAULT),
    )


def write_starter(*, config_path: Path, db: Path, searxng: str | None = None) -> list[Path]:
    """Write `config.toml` and a 0600 `secret.env` beside it; return both paths."""
    secret_path = config_path.parent / "secret.env"
    for path in (config_path, secret_path):
        if path.exists():
            raise StarterExists(
                f"{path} exists: sift init never overwrites; move it away or choose --dir DIR"
            )
    _make_private_dirs(config_path.parent)
    _create(secret_path, SECRET_TEMPLATE)
    _create(config_path, render_config(db=db, secret_env=secret_path.absolute(), searxng=searxng))
    return [config_path, secret_path]


def _make_private_dirs(directory: Path) -> None:
    """Create `directory` and its missing parents 0700, whatever the umask (0 gave 0777)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another writer made it meanwhile: its mode is its own
        os.chmod(path, 0o700)


def enable_searxng(config_path: Path, url: str) -> None:
    """Set `[search.searxng]` to enabled at `url` in an existing config, keeping the rest."""
    from siftlib.config import load_config

    load_config(str(config_path))  # a file already broken is named as itself, not the draft
    lines = config_path.read_text(encoding="utf-8").splitlines(keepends=True)
    wanted = {"enabled": "enabled = true\n", "url": f'url = "{_toml_text(url)}"\n'}
    header = next((i for i, line in enumerate(lines) if _SEARXNG_HEADER.match(line)), None)
    if header is None:
        lines += ["\n" if lines and not lines[-1].endswith("\n") else "", "[search.searxng]\n"]
        header = len(lines) - 1
    end = next(
        (i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")),
        len(lines),
    )
    for i in range(header + 1, end):
        key = lines[i].split("=", 1)[0].strip()
        if key in wanted and "=" in lines[i]:
            lines[i] = wanted.pop(key)
    lines[header + 1 : header + 1] = list(wanted.values())
    draft = config_path.with_name(f".{config_path.name}.sift-init")
    draft.write_text("".join(lines), encoding="utf-8")
    try:
        loaded = load_config(str(draft))
        source = loaded.source("searxng")
        if not (source.enabled and source.url == url):
            raise ConfigError(
                f"{config_path}: could not enable [search.searxng] there; set enabled = true "
                f'and url = "{url}" by hand'
            )
        shutil.copymode(config_path, draft)
        os.replace(draft, config_path)
    finally:
        draft.unlink(missing_ok=True)


def _create(path: Path, text: str) -> None:
    """Create a file 0600: the config can name a store with its password, or add pinholes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # exactly owner read/write, whatever the umask
        f.write(text)


def _toml_text(value: str | Path) -> str:
    """Return a path or URL as the inside of a TOML basic string."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"')
