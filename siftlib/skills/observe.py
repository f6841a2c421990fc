"""What a reranked search tells its observers: provider call events and one observation.

Observers receive `Attempt` events and one `SearchObservation` per search: enums, catalog
indexes and validated token counts only, never text, paths or keys. A raising observer is
ignored, so an observer never changes a search.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from siftlib.skills.catalog import Catalog, Skill
from siftlib.skills.decide import Decision, Outcome, Reason
from siftlib.skills.keyword import SkillResult


class CacheState(enum.Enum):
    """What the session cache did for a search."""

    NOT_USED = "not_used"
    DISABLED = "disabled"
    HIT = "hit"
    MISS = "miss"
    STORED = "stored"


class ShortlistKind(enum.Enum):
    """Whether a shortlist was built, and whether it could be sent."""

    NONE = "none"
    NO_REQUEST = "no_request"
    REQUEST = "request"


class AttemptEvent(enum.Enum):
    """A step of the one provider call a search may make."""

    STARTED = "started"
    ANSWERED = "answered"
    FAILED = "failed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class Attempt:
    """A provider call event; `reason` is set when it failed or was aborted."""

    event: AttemptEvent
    reason: Reason | None = None


@dataclass(frozen=True)
class SearchObservation:
    """How one search went, as enums and indexes into the sorted catalog."""

    decision: Decision
    reason: Reason
    cache: CacheState
    shortlist_kind: ShortlistKind
    shortlist: tuple[int, ...]
    keyword: tuple[int, ...]
    result: tuple[int, ...]
    total: int
    input_tokens: int | None
    output_tokens: int | None


class Observer(Protocol):
    """Receives attempt events and search observations."""

    def __call__(self, event: Attempt | SearchObservation, /) -> None: ...


@dataclass
class Trail:
    """What a search did so far, for its observation."""

    cache: CacheState = CacheState.NOT_USED
    shortlist_kind: ShortlistKind = ShortlistKind.NONE
    shortlist: tuple[Skill, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None


def notify(observers: Sequence[Observer], event: Attempt | SearchObservation) -> None:
    """Hand `event` to each observer; one that raises is ignored."""
    for observer in observers:
        with contextlib.suppress(Exception):  # an observer never changes a search
            observer(event)


def observation(
    catalog: Catalog, outcome: Outcome, trail: Trail, baseline: SkillResult, result: SkillResult
) -> SearchObservation:
    """Return how a search went, naming skills by their index in `catalog`."""
    position = {skill.name: i for i, skill in enumerate(catalog.skills)}

    def indexes(skills: Sequence[Skill]) -> tuple[int, ...]:
        return tuple(position[skill.name] for skill in skills if skill.name in position)

    return SearchObservation(
        decision=outcome.decision,
        reason=outcome.reason,
        cache=trail.cache,
        shortlist_kind=trail.shortlist_kind,
        shortlist=indexes(trail.shortlist),
        keyword=indexes(baseline.matches),
        result=indexes(result.matches),
        total=result.total,
        input_tokens=trail.input_tokens,
        output_tokens=trail.output_tokens,
    )
