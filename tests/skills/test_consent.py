"""Consent (spec §4): only the global config's `[skill_search.reranking]` table opts in."""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from pathlib import Path

import pytest

from siftlib.skills.consent import RerankSettings, api_key, load_settings

SECRET = "sk-live-DO-NOT-PRINT-4242"


def write_config(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, table: str) -> tuple[RerankSettings, list[str]]:
    config = write_config(tmp_path / "global" / "config.toml", table)
    return load_settings(config, cwd=tmp_path / "work")


def reranking(body: str) -> str:
    return "[skill_search.reranking]\nenabled = true\n" + body + "\n"


# --- defaults and consent -----------------------------------------------------------------


def test_missing_file_means_defaults_and_no_diagnostic(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "absent.toml", cwd=tmp_path) == (RerankSettings(), [])


def test_defaults_are_the_spec_table() -> None:
    assert RerankSettings() == RerankSettings(
        enabled=False,
        experimental_fit=False,
        min_fit_probability=0.75,
        model="jev-latest",
        timeout_ms=1000,
        cache_max_entries=128,
        cache_ttl_ms=300000,
        max_candidates=32,
        max_query_bytes=2048,
        max_name_bytes=256,
        max_description_bytes=512,
        max_payload_bytes=32768,
        min_probability=0.55,
        min_margin=0.10,
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[server]\nlisten = '127.0.0.1:1'\n",
        "[skill_search]\n",
        "[skill_search.reranking]\n",
        "[skill_search.reranking]\nenabled = false\n",
    ],
)
def test_no_consent(tmp_path: Path, text: str) -> None:
    settings, diagnostics = load(tmp_path, text)
    assert settings.enabled is False and diagnostics == []


def test_literal_true_is_consent(tmp_path: Path) -> None:
    settings, diagnostics = load(tmp_path, "[skill_search.reranking]\nenabled = true\n")
    assert settings == RerankSettings(enabled=True) and diagnostics == []


def test_dotted_key_form_is_the_same_table(tmp_path: Path) -> None:
    settings, _ = load(tmp_path, "skill_search.reranking.enabled = true\n")
    assert settings.enabled is True


def test_every_setting_is_read(tmp_path: Path) -> None:
    settings, diagnostics = load(
        tmp_path,
        reranking(
            "experimental_fit = true\nmin_fit_probability = 0.9\nmodel = 'jev-2'\n"
            "timeout_ms = 2500\ncache_max_entries = 0\ncache_ttl_ms = 0\nmax_candidates = 64\n"
            "max_query_bytes = 100\nmax_name_bytes = 1\nmax_description_bytes = 0\n"
            "max_payload_bytes = 256\nmin_probability = 1\nmin_margin = 0"
        ),
    )
    assert diagnostics == []
    assert settings == RerankSettings(
        enabled=True,
        experimental_fit=True,
        min_fit_probability=0.9,
        model="jev-2",
        timeout_ms=2500,
        cache_max_entries=0,
        cache_ttl_ms=0,
        max_candidates=64,
        max_query_bytes=100,
        max_name_bytes=1,
        max_description_bytes=0,
        max_payload_bytes=256,
        min_probability=1.0,
        min_margin=0.0,
    )
    assert isinstance(settings.min_probability, float)


def test_a_broken_server_section_does_not_matter(tmp_path: Path) -> None:
    settings, diagnostics = load(
        tmp_path, "[server]\nnonsense = 1\n[skill_search.reranking]\nenabled = true\n"
    )
    assert settings.enabled is True and diagnostics == []


# --- validation: one case per key and bound ------------------------------------------------

INTEGER_BOUNDS = {
    "timeout_ms": (1, 10000),
    "cache_max_entries": (0, 1024),
    "cache_ttl_ms": (0, 3600000),
    "max_candidates": (1, 64),
    "max_query_bytes": (1, 8192),
    "max_name_bytes": (1, 256),
    "max_description_bytes": (0, 2048),
    "max_payload_bytes": (256, 65536),
}

VALID = [(key, str(low)) for key, (low, _) in INTEGER_BOUNDS.items()]
VALID += [(key, str(high)) for key, (_, high) in INTEGER_BOUNDS.items()]
VALID += [
    ("min_fit_probability", "0.5000001"),
    ("min_fit_probability", "1.0"),
    ("min_fit_probability", "1"),
    ("min_probability", "0"),
    ("min_probability", "1.0"),
    ("min_margin", "0.0"),
    ("min_margin", "1"),
    ("model", "'m'"),
    ("model", "'" + "é" * 128 + "'"),  # 256 UTF-8 bytes
    ("experimental_fit", "false"),
    ("experimental_fit", "true"),
]

INVALID = [(key, str(low - 1)) for key, (low, _) in INTEGER_BOUNDS.items()]
INVALID += [(key, str(high + 1)) for key, (_, high) in INTEGER_BOUNDS.items()]
INVALID += [(key, "true") for key in INTEGER_BOUNDS]  # a boolean is not an integer
INVALID += [(key, "'100'") for key in INTEGER_BOUNDS]
INVALID += [(key, "100.0") for key in INTEGER_BOUNDS]
INVALID += [
    ("min_fit_probability", "0.5"),  # the lower bound is excluded
    ("min_fit_probability", "0.4"),
    ("min_fit_probability", "1.0000001"),
    ("min_probability", "-0.01"),
    ("min_probability", "1.01"),
    ("min_margin", "-0.1"),
    ("min_margin", "1.5"),
]
INVALID += [
    (key, bad)
    for key in ("min_fit_probability", "min_probability", "min_margin")
    for bad in ("nan", "inf", "-inf", "true", "'0.7'")
]
INVALID += [
    ("model", "''"),
    ("model", "'   '"),
    ("model", "'" + "é" * 128 + "x'"),  # 257 UTF-8 bytes
    ("model", "7"),
    ("model", "true"),
    ("experimental_fit", "1"),
    ("experimental_fit", "'yes'"),
]


@pytest.mark.parametrize(("key", "value"), VALID)
def test_valid_value(tmp_path: Path, key: str, value: str) -> None:
    settings, diagnostics = load(tmp_path, reranking(f"{key} = {value}"))
    assert diagnostics == []
    assert settings.enabled is True


@pytest.mark.parametrize(("key", "value"), INVALID)
def test_invalid_value_disables_reranking(tmp_path: Path, key: str, value: str) -> None:
    config = tmp_path / "global" / "config.toml"
    settings, diagnostics = load(tmp_path, reranking(f"{key} = {value}"))
    assert settings == RerankSettings()
    (diagnostic,) = diagnostics
    assert diagnostic.startswith(f"{config}: skill_search.reranking.{key} must be ")
    assert diagnostic.endswith("; skill reranking is disabled")


@pytest.mark.parametrize("value", ["'true'", "1", "0", "'yes'", "[true]", "{ value = true }"])
def test_only_literal_true_enables(tmp_path: Path, value: str) -> None:
    settings, diagnostics = load(tmp_path, f"[skill_search.reranking]\nenabled = {value}\n")
    assert settings == RerankSettings()
    (diagnostic,) = diagnostics
    assert "skill_search.reranking.enabled must be true or false" in diagnostic


def test_diagnostics_name_the_rule_not_the_value(tmp_path: Path) -> None:
    settings, diagnostics = load(
        tmp_path,
        reranking(
            f"model = '{SECRET}{'x' * 300}'\ntimeout_ms = '{SECRET}'\nmin_margin = '{SECRET}'"
        ),
    )
    assert settings.enabled is False
    assert len(diagnostics) == 3
    assert all(SECRET not in d for d in diagnostics)
    assert "model must be a non-blank string of at most 256 UTF-8 bytes" in diagnostics[0]
    assert "timeout_ms must be an integer from 1 to 10000" in diagnostics[1]
    assert "min_margin must be a finite number in [0, 1]" in diagnostics[2]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[skill_search.reranking]\nenabled = true\napi_key = 'x'\n", "key 'api_key'"),
        ("[skill_search]\nrerank = true\n", "skill_search has key 'rerank'"),
        ("[skill_search]\nreranking = true\n", "skill_search.reranking must be a table"),
        ("skill_search = 3\n", "skill_search must be a table"),
        (f"[skill_search.reranking]\nenabled = true\n'{SECRET}' = 1\n", "an unknown key"),
        (
            "[skill_search.reranking]\nenabled = true\nabcdefghijklmnopqrstuvwxyzabcdefg = 1\n",
            "an unknown key",
        ),
    ],
)
def test_unknown_keys_and_wrong_tables_disable(tmp_path: Path, text: str, fragment: str) -> None:
    settings, diagnostics = load(tmp_path, text)
    assert settings == RerankSettings()
    assert len(diagnostics) == 1 and fragment in diagnostics[0]
    assert SECRET not in diagnostics[0]


def test_unreadable_toml_disables_without_echoing_it(tmp_path: Path) -> None:
    settings, diagnostics = load(tmp_path, f"[skill_search.reranking]\nenabled = true\n{SECRET}\n")
    assert settings == RerankSettings()
    assert diagnostics == [
        f"{tmp_path / 'global' / 'config.toml'}: cannot be read as TOML;"
        " skill reranking is disabled"
    ]


def test_experimental_fit_without_enabled_stays_off(tmp_path: Path) -> None:
    settings, diagnostics = load(tmp_path, "[skill_search.reranking]\nexperimental_fit = true\n")
    assert settings.enabled is False and diagnostics == []


# --- project config --------------------------------------------------------------------------


def test_project_config_never_enables(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "pkg"
    project = write_config(cwd / ".sift" / "config.toml", reranking("model = 'evil'"))
    parent = write_config(repo / ".sift" / "config.toml", "[skill_search.reranking]\n")
    above = write_config(tmp_path / ".sift" / "config.toml", reranking(""))
    settings, diagnostics = load_settings(tmp_path / "no-global.toml", cwd=cwd)
    assert settings == RerankSettings()
    assert diagnostics == [
        f"{project}: [skill_search.reranking] in a project config is ignored;"
        " only the global config can enable reranking",
        f"{parent}: [skill_search.reranking] in a project config is ignored;"
        " only the global config can enable reranking",
    ]
    assert all(str(above) not in d for d in diagnostics)  # above the git root: never looked at


def test_project_config_cannot_change_global_settings(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write_config(tmp_path / ".sift" / "config.toml", reranking("min_probability = 0.01"))
    config = write_config(tmp_path / "global.toml", reranking("min_probability = 0.9"))
    settings, diagnostics = load_settings(config, cwd=tmp_path)
    assert settings == RerankSettings(enabled=True, min_probability=0.9)
    assert len(diagnostics) == 1 and "is ignored" in diagnostics[0]


def test_project_config_without_reranking_is_silent(tmp_path: Path) -> None:
    write_config(tmp_path / ".sift" / "config.toml", "[search]\nk = 3\n")
    assert load_settings(tmp_path / "none.toml", cwd=tmp_path) == (RerankSettings(), [])


def test_global_path_pointing_at_a_project_config_is_refused(tmp_path: Path) -> None:
    project = write_config(tmp_path / ".sift" / "config.toml", reranking(""))
    settings, diagnostics = load_settings(project, cwd=tmp_path)
    assert settings.enabled is False
    assert len(diagnostics) == 1 and "is ignored" in diagnostics[0]


# --- the API key ---------------------------------------------------------------------------


class RecordingEnviron(MutableMapping[str, str]):
    """An environment that remembers which variables were looked up."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.looked_up = values, set[str]()

    def __getitem__(self, key: str) -> str:
        self.looked_up.add(key)
        return self.values[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.values[key] = value

    def __delitem__(self, key: str) -> None:
        del self.values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __contains__(self, key: object) -> bool:
        self.looked_up.add(str(key))
        return key in self.values


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> RecordingEnviron:
    recording = RecordingEnviron({**os.environ, "TYPESAFE_API_KEY": f"  {SECRET}  "})
    monkeypatch.setattr(os, "environ", recording)
    return recording


def test_key_is_not_read_without_consent(environ: RecordingEnviron) -> None:
    assert api_key(RerankSettings()) is None
    assert "TYPESAFE_API_KEY" not in environ.looked_up


def test_key_is_read_when_opted_in(environ: RecordingEnviron) -> None:
    assert api_key(RerankSettings(enabled=True)) == SECRET
    assert "TYPESAFE_API_KEY" in environ.looked_up


@pytest.mark.parametrize("value", ["", "   \t"])
def test_blank_key_is_no_key(environ: RecordingEnviron, value: str) -> None:
    environ["TYPESAFE_API_KEY"] = value
    assert api_key(RerankSettings(enabled=True)) is None


def test_missing_key_is_no_key(environ: RecordingEnviron) -> None:
    del environ["TYPESAFE_API_KEY"]
    assert api_key(RerankSettings(enabled=True)) is None


def test_settings_never_hold_the_key(environ: RecordingEnviron, tmp_path: Path) -> None:
    settings, diagnostics = load(tmp_path, reranking(""))
    assert SECRET not in repr(settings) and SECRET not in repr(diagnostics)
    assert "TYPESAFE_API_KEY" not in environ.looked_up  # loading reads no key either
