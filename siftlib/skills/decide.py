"""Turn the provider's untrusted answer into a decision (skills.md §6 normalisation, §7).

The pipeline is: `normalise` the raw answers into
`{"probabilities": [{"id": "c0", "probability": p}, ..., {"id": None, "probability": p}]}`,
`validate_distribution` it strictly against the submitted IDs, then `decide` (or `decide_fit`
in experimental fit mode). Nothing here invents a probability: `choice` and `confidence` are
never read. The outcome names candidates by their shortlist index only; the caller rebuilds
results from its private ID → skill map.

    outcome = decide(validate_distribution(normalise(answers), ids), min_probability=0.55,
                     min_margin=0.10)

Outside fit mode, answers to questions that were not asked are ignored (a repeated
`selection` is not); fit mode requires exactly the questions asked. Comparisons against
thresholds allow `EPSILON` of float slack, so that a distribution rescaled to sum 1 (or
`1 - t` computed in floating point) does not flip a boundary case.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NO_MATCH_LABEL = "none"
SELECTION = "selection"
SUM_TOLERANCE = 0.000001
EPSILON = 1e-9


class Decision(enum.Enum):
    """What a search decided, kept apart from the public result."""

    ACCEPTED = "accepted"
    NO_MATCH = "no_match"
    UNCERTAIN = "uncertain"
    FAILURE = "failure"
    SKIPPED = "skipped"


class Reason(enum.Enum):
    """Why a search decided what it did."""

    # accepted / no-match
    WINNER = "winner"
    NO_MATCH_WINNER = "no_match_winner"
    ALL_INAPPLICABLE = "all_inapplicable"
    CACHED = "cached"
    # uncertain
    LOW_PROBABILITY = "low_probability"
    LOW_MARGIN = "low_margin"
    NONE_APPLICABLE = "none_applicable"
    # no provider call
    EMPTY_CATALOG = "empty_catalog"
    EXACT_NAME = "exact_name"
    NO_REQUEST = "no_request"
    ENVELOPE_TOO_LARGE = "envelope_too_large"
    CLOSED = "closed"
    # failures of the call
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    STALE = "stale"
    NETWORK = "network"
    AUTH = "auth"
    RATE_LIMITED = "rate_limited"
    REJECTED = "rejected"
    SERVER_ERROR = "server_error"
    HTTP_STATUS = "http_status"
    OVERSIZE = "oversize"
    # failures of the answer
    MALFORMED = "malformed"
    UNKNOWN_ID = "unknown_id"
    DUPLICATE_ID = "duplicate_id"
    MISSING_ID = "missing_id"
    WRONG_TYPE = "wrong_type"
    OUT_OF_RANGE = "out_of_range"
    BAD_SUM = "bad_sum"
    # a defect of ours, still served by the keyword baseline
    INTERNAL = "internal"


class InvalidAnswer(Exception):
    """The provider's answer is not a valid distribution (or fit set)."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.value)
        self.reason = reason


@dataclass(frozen=True)
class Distribution:
    """A validated selection distribution: one probability per submitted ID, plus no-match."""

    candidates: tuple[float, ...]
    no_match: float


@dataclass(frozen=True)
class Outcome:
    """A decision, its reason and the chosen shortlist indexes in result order."""

    decision: Decision
    reason: Reason
    ranked: tuple[int, ...] = ()

    @property
    def cacheable(self) -> bool:
        """Only validated, gated outcomes may be cached (§8)."""
        return self.decision in (Decision.ACCEPTED, Decision.NO_MATCH)


def fail(reason: Reason) -> Outcome:
    """Return a failure outcome (the caller serves the keyword baseline)."""
    return Outcome(Decision.FAILURE, reason)


def fit_question(index: int) -> str:
    """Name the fit question of candidate `c<index>`."""
    return f"fit_c{index}"


def normalise(answers: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Reshape the `selection` answer into the §6 list; labels become IDs, `none` becomes None.

    `answers` values come from JSON objects that may carry duplicate keys: a mapping exposing
    `pairs` (see `provider.JSONObject`) keeps them, so duplicates survive to validation.
    """
    names = [name for name, _ in getattr(answers, "pairs", None) or answers.items()]
    if names.count(SELECTION) > 1:
        raise InvalidAnswer(Reason.MALFORMED)
    selection = answers.get(SELECTION)
    if not isinstance(selection, Mapping) or selection.get("type") != "choice":
        raise InvalidAnswer(Reason.MALFORMED)
    probabilities = selection.get("probabilities")
    if not isinstance(probabilities, Mapping):
        raise InvalidAnswer(Reason.MALFORMED)
    pairs = getattr(probabilities, "pairs", None) or list(probabilities.items())
    return {
        "probabilities": [
            {"id": None if label == NO_MATCH_LABEL else label, "probability": value}
            for label, value in pairs
        ]
    }


def _probability(value: object) -> float:
    """Check one untrusted probability: a finite real number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAnswer(Reason.WRONG_TYPE)
    if isinstance(value, int) and not 0 <= value <= 1:
        raise InvalidAnswer(Reason.OUT_OF_RANGE)  # before float(), which overflows on huge ints
    number = float(value)
    if not math.isfinite(number) or number < 0.0 or number > 1.0:
        raise InvalidAnswer(Reason.OUT_OF_RANGE)
    return number


def validate_distribution(normalised: Mapping[str, Any], ids: Sequence[str]) -> Distribution:
    """Accept exactly one entry per submitted ID plus one no-match, summing to 1 (§7)."""
    entries = normalised.get("probabilities")
    if not isinstance(entries, list) or not entries:
        raise InvalidAnswer(Reason.MISSING_ID)
    index = {candidate_id: i for i, candidate_id in enumerate(ids)}
    values: dict[str | None, float] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise InvalidAnswer(Reason.MALFORMED)
        candidate_id = entry.get("id")
        if candidate_id is not None and candidate_id not in index:
            raise InvalidAnswer(Reason.UNKNOWN_ID)
        if candidate_id in values:
            raise InvalidAnswer(Reason.DUPLICATE_ID)
        values[candidate_id] = _probability(entry.get("probability"))
    if len(values) != len(ids) + 1:
        raise InvalidAnswer(Reason.MISSING_ID)
    total = math.fsum(values.values())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise InvalidAnswer(Reason.BAD_SUM)
    scale = 1.0 if total == 1.0 else 1.0 / total
    return Distribution(
        candidates=tuple(values[candidate_id] * scale for candidate_id in ids),
        no_match=values[None] * scale,
    )


def validate_fits(answers: Mapping[str, Any], ids: Sequence[str]) -> tuple[float, ...]:
    """Require `selection` and exactly one `fit_cN` noul per submitted ID, each in [0, 1]."""
    expected = {SELECTION, *(fit_question(i) for i in range(len(ids)))}
    names = [name for name, _ in (getattr(answers, "pairs", None) or answers.items())]
    if len(names) != len(set(names)):
        raise InvalidAnswer(Reason.DUPLICATE_ID)
    if set(names) - expected:
        raise InvalidAnswer(Reason.UNKNOWN_ID)
    if expected - set(names):
        raise InvalidAnswer(Reason.MISSING_ID)
    fits = []
    for i in range(len(ids)):
        answer = answers[fit_question(i)]
        if not isinstance(answer, Mapping) or answer.get("type") != "noul" or "noul" not in answer:
            raise InvalidAnswer(Reason.MALFORMED)
        fits.append(_probability(answer["noul"]))
    return tuple(fits)


def rank(distribution: Distribution) -> list[int | None]:
    """Order alternatives by probability; ties keep shortlist order, no-match first among equals."""
    alternatives: list[tuple[float, int, int | None]] = [(distribution.no_match, -1, None)]
    alternatives += [(p, i, i) for i, p in enumerate(distribution.candidates)]
    alternatives.sort(key=lambda item: (-item[0], item[1]))
    return [index for _, _, index in alternatives]


def _gate(
    distribution: Distribution, *, min_probability: float, min_margin: float
) -> tuple[list[int | None], Reason | None]:
    """Rank and apply the probability and margin gates; a reason means uncertain."""
    order = rank(distribution)
    # There is always a second alternative: no-match plus at least one candidate.
    p1, p2 = (_probability_of(distribution, index) for index in order[:2])
    if p1 < min_probability - EPSILON:
        return order, Reason.LOW_PROBABILITY
    if p1 - p2 < min_margin - EPSILON:
        return order, Reason.LOW_MARGIN
    return order, None


def _probability_of(distribution: Distribution, index: int | None) -> float:
    return distribution.no_match if index is None else distribution.candidates[index]


def decide(distribution: Distribution, *, min_probability: float, min_margin: float) -> Outcome:
    """Apply the §7 rules: gate the winner, then keep every candidate strictly above no-match."""
    order, uncertain = _gate(distribution, min_probability=min_probability, min_margin=min_margin)
    if uncertain is not None:
        return Outcome(Decision.UNCERTAIN, uncertain)
    if order[0] is None:
        return Outcome(Decision.NO_MATCH, Reason.NO_MATCH_WINNER)
    above = tuple(
        i for i in order if i is not None and distribution.candidates[i] > distribution.no_match
    )
    return Outcome(Decision.ACCEPTED, Reason.WINNER, above)


def decide_fit(
    distribution: Distribution,
    fits: Sequence[float],
    *,
    min_probability: float,
    min_margin: float,
    min_fit_probability: float,
) -> Outcome:
    """Apply the experimental fit rules of §7 on top of the choice gates."""
    threshold = min_fit_probability
    applicable = {i for i, fit in enumerate(fits) if fit >= threshold - EPSILON}
    if all(fit <= 1.0 - threshold + EPSILON for fit in fits):
        return Outcome(Decision.NO_MATCH, Reason.ALL_INAPPLICABLE)
    order, uncertain = _gate(distribution, min_probability=min_probability, min_margin=min_margin)
    if uncertain is not None:
        return Outcome(Decision.UNCERTAIN, uncertain)
    if order[0] is None:
        return Outcome(Decision.NO_MATCH, Reason.NO_MATCH_WINNER)
    chosen = tuple(i for i in order if i is not None and i in applicable)
    if not chosen:
        return Outcome(Decision.UNCERTAIN, Reason.NONE_APPLICABLE)
    return Outcome(Decision.ACCEPTED, Reason.WINNER, chosen)
