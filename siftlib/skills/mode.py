"""Which way a skill search ranks (spec §10): the keyword baseline or local ranking.

A search's mode comes from, first to last: its own `--mode` (or a `--stdio` request's
`"mode"`), the nearest project config's `[skill_search] mode` (`.sift/config.toml` in the
working directory or a parent up to the git root), the global config's, then the default.
A project config may choose, since neither mode sends anything anywhere. Reranking, when
opted in (§4), still takes precedence over local mode; only an explicit `keyword` mode forces
the baseline and so skips the provider.

The default is `local` (the issue's "local as the default", once local mode met its targets on
the held-out sets, `make bench`), except when reranking is opted in: then it is `keyword`, so
that every fallback of reranking, a missing key included, stays the unchanged keyword result
(§3). Decisions where the spec was silent: a project config overrides the global one (it is
the more specific), and an invalid `mode` in a config is ignored with a diagnostic (in the
global config it also disables reranking, as every invalid `[skill_search]` value does).

    mode, diagnostics = configured_mode(config_path, cwd=Path.cwd(), reranking=False)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from siftlib.config import read_toml
from siftlib.errors import ConfigError, ToolError
from siftlib.skills.catalog import project_configs

MODES = ("keyword", "local")
DEFAULT_MODE = "local"


def check_mode(value: object) -> str:
    """Return `value` if it names a mode; raise `ToolError` otherwise."""
    if not isinstance(value, str) or value not in MODES:
        raise ToolError('mode must be "keyword" or "local"')
    return value


def configured_mode(config_path: Path, *, cwd: Path, reranking: bool) -> tuple[str, list[str]]:
    """Return the mode the configs choose (nearest project config first), else the default
    (`keyword` when `reranking` is opted in), and diagnostics."""
    diagnostics: list[str] = []
    for path in [*project_configs(Path(os.path.abspath(cwd))), config_path]:
        value = _mode_in(path)
        if value is None:
            continue
        try:
            return check_mode(value), diagnostics
        except ToolError as exc:
            diagnostics.append(f"{path}: [skill_search] {exc}; this setting is ignored")
    return ("keyword" if reranking else DEFAULT_MODE), diagnostics


def _mode_in(path: Path) -> object:
    """Return the `[skill_search] mode` value of a config file, or None when it has none."""
    if not os.path.isfile(path):
        return None
    try:
        skill_search = read_toml(path).get("skill_search")
    except ConfigError:
        return None  # an unreadable config is reported where it is loaded
    return skill_search.get("mode") if isinstance(skill_search, Mapping) else None
