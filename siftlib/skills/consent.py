"""Consent to reranking (spec §4): the `[skill_search.reranking]` table of the global config.

Only the global config file (`--config` > `$SIFT_CONFIG` > the user config dir) may opt in,
and only with the literal `enabled = true` inside that table. A project `.sift/config.toml`
(in the working directory or a parent up to the git root) never counts: a reranking table
there is ignored with a diagnostic, and so is the global config when it *is* such a project
file. Validation is strict: an unknown key, a wrong type (a boolean is not a number), a
non-finite or out-of-range value disables reranking for the whole config, with a diagnostic
naming the key and the rule but never the value. Keyword search is unaffected.

The API key comes only from `TYPESAFE_API_KEY`, and is read only once consent is given.

    settings, diagnostics = load_settings(resolve_config_path(args.config), cwd=Path.cwd())
    key = api_key(settings)  # None unless opted in and set
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from siftlib.config import read_toml
from siftlib.errors import ConfigError
from siftlib.skills.catalog import project_configs
from siftlib.skills.mode import MODES

API_KEY_VARIABLE = "TYPESAFE_API_KEY"
_TABLE = "skill_search.reranking"
_INTEGERS = {
    "timeout_ms": (1, 10_000),
    "cache_max_entries": (0, 1024),
    "cache_ttl_ms": (0, 3_600_000),
    "max_candidates": (1, 64),
    "max_query_bytes": (1, 8192),
    "max_name_bytes": (1, 256),
    "max_description_bytes": (0, 2048),
    "max_payload_bytes": (256, 65_536),
}
# name -> (low, high, low bound included)
_NUMBERS = {
    "min_fit_probability": (0.5, 1.0, False),
    "min_probability": (0.0, 1.0, True),
    "min_margin": (0.0, 1.0, True),
}
_BOOLEANS = ("enabled", "experimental_fit")
_MAX_MODEL_BYTES = 256
# Setting-like names only: lowercase words joined by "_", as no pasted secret looks.
_SHOWABLE_KEY = re.compile(r"(?=.{1,32}$)[a-z]+(?:_[a-z]+)*")


@dataclass(frozen=True)
class RerankSettings:
    """The effective reranking settings; the defaults mean reranking is off."""

    enabled: bool = False
    experimental_fit: bool = False
    min_fit_probability: float = 0.75
    model: str = "jev-latest"
    timeout_ms: int = 1000
    cache_max_entries: int = 128
    cache_ttl_ms: int = 300000
    max_candidates: int = 32
    max_query_bytes: int = 2048
    max_name_bytes: int = 256
    max_description_bytes: int = 512
    max_payload_bytes: int = 32768
    min_probability: float = 0.55
    min_margin: float = 0.10


_KNOWN = frozenset(f.name for f in fields(RerankSettings))


def load_settings(config_path: Path, *, cwd: Path) -> tuple[RerankSettings, list[str]]:
    """Return the reranking settings of the global config, and diagnostics for the user."""
    diagnostics: list[str] = []
    project_files = project_configs(Path(os.path.abspath(cwd)))
    for path in project_files:
        if _has_reranking_table(path):
            diagnostics.append(
                f"{path}: [{_TABLE}] in a project config is ignored;"
                " only the global config can enable reranking"
            )
    if _same_file(config_path, project_files):
        return RerankSettings(), diagnostics
    try:
        data = read_toml(config_path)
    except ConfigError:
        diagnostics.append(f"{config_path}: cannot be read as TOML; skill reranking is disabled")
        return RerankSettings(), diagnostics
    values, problems = _validate(data.get("skill_search", {}))
    if problems:
        diagnostics += [f"{config_path}: {p}; skill reranking is disabled" for p in problems]
        return RerankSettings(), diagnostics
    return RerankSettings(**values), diagnostics


def api_key(settings: RerankSettings) -> str | None:
    """Return `TYPESAFE_API_KEY` when reranking is enabled and the key is set, else None."""
    if not settings.enabled:
        return None
    return os.environ.get(API_KEY_VARIABLE, "").strip() or None


def _validate(skill_search: object) -> tuple[dict[str, Any], list[str]]:
    """Check the `[skill_search]` table; return the reranking values and the problems found."""
    if not isinstance(skill_search, Mapping):
        return {}, ["skill_search must be a table"]
    problems = [
        f"skill_search has {_describe_key(key)}, which is not a known setting"
        for key in skill_search
        if key not in ("reranking", "mode")
    ]
    if "mode" in skill_search and skill_search["mode"] not in MODES:
        problems.append('skill_search.mode must be "keyword" or "local"')
    table = skill_search.get("reranking", {})
    if not isinstance(table, Mapping):
        return {}, [*problems, f"{_TABLE} must be a table"]
    values: dict[str, Any] = {}
    for key, value in table.items():
        rule = _rule_broken(key, value)
        if key not in _KNOWN:
            problems.append(f"{_TABLE} has {_describe_key(key)}, which is not a known setting")
        elif rule:
            problems.append(f"{_TABLE}.{key} must be {rule}")
        else:
            values[key] = float(value) if key in _NUMBERS else value
    return values, problems


def _rule_broken(key: str, value: object) -> str | None:
    """Return the rule `value` breaks for setting `key`, or None when it is valid."""
    if key in _BOOLEANS:
        return None if isinstance(value, bool) else "true or false"
    if key in _INTEGERS:
        first, last = _INTEGERS[key]
        valid = isinstance(value, int) and not isinstance(value, bool) and first <= value <= last
        return None if valid else f"an integer from {first} to {last}"
    if key in _NUMBERS:
        low, high, low_included = _NUMBERS[key]
        rule = f"a finite number in {'[' if low_included else '('}{low:g}, {high:g}]"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return rule
        number = float(value)
        if not math.isfinite(number) or number > high or number < low:
            return rule
        return rule if number == low and not low_included else None
    if key == "model":
        valid = (
            isinstance(value, str)
            and bool(value.strip())
            and len(value.encode("utf-8", "surrogatepass")) <= _MAX_MODEL_BYTES
        )
        return None if valid else f"a non-blank string of at most {_MAX_MODEL_BYTES} UTF-8 bytes"
    return None


def _describe_key(key: str) -> str:
    """Name a key in a diagnostic only when it cannot be a pasted secret."""
    return f"key {key!r}" if _SHOWABLE_KEY.fullmatch(key) else "an unknown key"


def _has_reranking_table(path: Path) -> bool:
    try:
        data = read_toml(path)
    except ConfigError:
        return False
    skill_search = data.get("skill_search")
    return isinstance(skill_search, Mapping) and "reranking" in skill_search


def _same_file(path: Path, candidates: list[Path]) -> bool:
    try:
        return any(os.path.samefile(path, candidate) for candidate in candidates)
    except OSError:
        return False
