"""Indexes built once per catalog snapshot, and built when a session opens, not in a search."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from siftlib.skills import relevance
from siftlib.skills.catalog import Catalog, Skill
from siftlib.skills.keyword import KeywordIndex
from siftlib.skills.memo import PerCatalog
from siftlib.skills.relevance import RelevanceIndex
from siftlib.skills.session import Session


def catalog_of(*names: str) -> Catalog:
    return Catalog(
        skills=tuple(
            Skill(name, f"{name} things", Path(f"/s/{name}/SKILL.md"), Path(f"/s/{name}"))
            for name in names
        )
    )


def test_one_build_per_catalog_even_when_searches_race() -> None:
    builds: list[Catalog] = []
    started = threading.Event()

    def build(catalog: Catalog) -> int:
        builds.append(catalog)
        started.wait(0.2)  # hold the first build while the others ask
        return len(catalog.skills)

    cache = PerCatalog(build)
    catalog = catalog_of("pdf", "xlsx")
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(cache(catalog))) for _ in range(4)]
    for thread in threads:
        thread.start()
    started.set()
    for thread in threads:
        thread.join()
    assert results == [2, 2, 2, 2]
    assert builds == [catalog]


def test_an_equal_catalog_gets_its_own_and_a_collected_one_is_dropped() -> None:
    cache = PerCatalog(lambda catalog: object())
    first, second = catalog_of("pdf"), catalog_of("pdf")
    assert cache(first) is cache(first)
    assert cache(first) is not cache(second)
    del first
    gc.collect()
    assert len(cache._built) == 1


def test_the_indexes_are_the_scorers_own() -> None:
    catalog = catalog_of("pdf", "xlsx")
    assert KeywordIndex.of(catalog) is KeywordIndex.of(catalog)
    assert RelevanceIndex.of(catalog) is RelevanceIndex.of(catalog)


@pytest.mark.parametrize(("mode", "builds"), [("keyword", 0), ("local", 1), (None, 1)])
def test_session_open_builds_the_relevance_index_its_mode_needs(
    mode: str | None, builds: int, catalog_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    real = RelevanceIndex.build

    def counting(skills: tuple[Skill, ...]) -> RelevanceIndex:
        built.append(len(skills))
        return real(skills)

    monkeypatch.setattr(relevance.RelevanceIndex, "build", counting)
    session, _ = Session.open(
        config_path=Path("/absent"), skills_dirs=[catalog_dir], cwd=catalog_dir, mode=mode
    )
    assert len(built) == builds  # a one-shot keyword search never builds it
    session.search("fill in a pdf form", 3, mode=mode)
    assert len(built) == builds  # the search itself builds nothing
