"""The §7 validation and decision rules, one test per branch."""

from __future__ import annotations

import math

import pytest

from siftlib.skills.decide import (
    Decision,
    Distribution,
    InvalidAnswer,
    Outcome,
    Reason,
    decide,
    decide_fit,
    normalise,
    rank,
    validate_distribution,
    validate_fits,
)

IDS = ["c0", "c1", "c2"]
GATES = {"min_probability": 0.55, "min_margin": 0.10}
FIT_GATES = {**GATES, "min_fit_probability": 0.75}


def selection(probabilities: dict[str, object]) -> dict[str, object]:
    return {
        "selection": {
            "type": "choice",
            "choice": "c0",
            "confidence": 0.9,
            "probabilities": probabilities,
        }
    }


def dist(*candidates: float, none: float) -> Distribution:
    return Distribution(candidates=candidates, no_match=none)


def valid(probabilities: dict[str, object], ids: list[str] = IDS) -> Distribution:
    return validate_distribution(normalise(selection(probabilities)), ids)


def rejected(probabilities: dict[str, object], ids: list[str] = IDS) -> Reason:
    with pytest.raises(InvalidAnswer) as caught:
        valid(probabilities, ids)
    return caught.value.reason


class TestNormalise:
    def test_labels_become_ids_and_none_becomes_null(self) -> None:
        shaped = normalise(selection({"c1": 0.7, "none": 0.3}))
        assert shaped == {
            "probabilities": [{"id": "c1", "probability": 0.7}, {"id": None, "probability": 0.3}]
        }

    @pytest.mark.parametrize(
        "answers",
        [
            {},
            {"selection": {"type": "noul", "noul": 0.5}},
            {"selection": {"type": "choice", "choice": "c0", "confidence": 0.99}},
            {"selection": {"type": "choice", "probabilities": [0.5, 0.5]}},
            {"selection": "c0"},
        ],
    )
    def test_no_distribution_is_malformed_never_invented(self, answers: dict[str, object]) -> None:
        with pytest.raises(InvalidAnswer) as caught:
            normalise(answers)
        assert caught.value.reason is Reason.MALFORMED


class TestValidate:
    def test_complete_distribution_in_submitted_order(self) -> None:
        d = valid({"none": 0.05, "c2": 0.10, "c0": 0.60, "c1": 0.25})
        assert d == dist(0.60, 0.25, 0.10, none=0.05)

    def test_near_one_sum_is_normalised_to_one(self) -> None:
        d = valid({"c0": 0.6000004, "c1": 0.25, "c2": 0.1, "none": 0.05})
        assert math.isclose(math.fsum([*d.candidates, d.no_match]), 1.0, abs_tol=1e-15)
        assert d.candidates[0] < 0.6000004

    @pytest.mark.parametrize("total_off", [0.0000011, -0.0000011, 0.1, -0.5])
    def test_sum_off_by_more_than_a_millionth_is_rejected(self, total_off: float) -> None:
        assert (
            rejected({"c0": 0.6 + total_off, "c1": 0.25, "c2": 0.1, "none": 0.05}) is Reason.BAD_SUM
        )

    def test_unknown_id(self) -> None:
        assert rejected({"c0": 0.6, "c1": 0.25, "c9": 0.1, "none": 0.05}) is Reason.UNKNOWN_ID

    def test_provider_text_as_label_is_unknown(self) -> None:
        assert rejected({"pdf": 0.6, "c1": 0.25, "c2": 0.1, "none": 0.05}) is Reason.UNKNOWN_ID

    def test_missing_id(self) -> None:
        assert rejected({"c0": 0.65, "c1": 0.25, "none": 0.10}) is Reason.MISSING_ID

    def test_missing_no_match(self) -> None:
        assert rejected({"c0": 0.65, "c1": 0.25, "c2": 0.10}) is Reason.MISSING_ID

    def test_empty_answer(self) -> None:
        assert rejected({}) is Reason.MISSING_ID

    def test_duplicate_id(self) -> None:
        shaped = {
            "probabilities": [
                {"id": "c0", "probability": 0.3},
                {"id": "c0", "probability": 0.3},
                {"id": "c1", "probability": 0.2},
                {"id": "c2", "probability": 0.1},
                {"id": None, "probability": 0.1},
            ]
        }
        with pytest.raises(InvalidAnswer) as caught:
            validate_distribution(shaped, IDS)
        assert caught.value.reason is Reason.DUPLICATE_ID

    @pytest.mark.parametrize("value", ["0.6", None, True, [0.6], {"p": 0.6}])
    def test_wrong_types(self, value: object) -> None:
        assert rejected({"c0": value, "c1": 0.25, "c2": 0.1, "none": 0.05}) is Reason.WRONG_TYPE

    @pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.1, 1.2])
    def test_out_of_range(self, value: float) -> None:
        assert rejected({"c0": value, "c1": 0.0, "c2": 0.0, "none": 0.0}) is Reason.OUT_OF_RANGE

    def test_integer_probabilities_are_numbers(self) -> None:
        assert valid({"c0": 1, "c1": 0, "c2": 0, "none": 0}) == dist(1.0, 0.0, 0.0, none=0.0)


class TestRank:
    def test_descending(self) -> None:
        assert rank(dist(0.1, 0.6, 0.25, none=0.05)) == [1, 2, 0, None]

    def test_ties_keep_shortlist_order(self) -> None:
        assert rank(dist(0.3, 0.3, 0.3, none=0.1)) == [0, 1, 2, None]

    def test_tie_with_no_match_puts_no_match_first(self) -> None:
        assert rank(dist(0.2, 0.4, 0.0, none=0.4)) == [None, 1, 0, 2]


class TestDecide:
    def test_worked_example_returns_everything_above_no_match(self) -> None:
        outcome = decide(dist(0.60, 0.25, 0.10, none=0.05), **GATES)
        assert outcome == Outcome(Decision.ACCEPTED, Reason.WINNER, (0, 1, 2))

    def test_candidates_at_or_below_no_match_are_left_out(self) -> None:
        outcome = decide(dist(0.10, 0.70, 0.10, none=0.10), **GATES)
        assert outcome.ranked == (1,)

    def test_accepted_no_match(self) -> None:
        outcome = decide(dist(0.10, 0.05, 0.05, none=0.80), **GATES)
        assert (outcome.decision, outcome.ranked) == (Decision.NO_MATCH, ())

    def test_low_probability_is_uncertain(self) -> None:
        outcome = decide(dist(0.54, 0.20, 0.20, none=0.06), **GATES)
        assert (outcome.decision, outcome.reason) == (Decision.UNCERTAIN, Reason.LOW_PROBABILITY)

    def test_low_margin_is_uncertain(self) -> None:
        outcome = decide(dist(0.56, 0.47, 0.0, none=0.0), min_probability=0.5, min_margin=0.10)
        assert (outcome.decision, outcome.reason) == (Decision.UNCERTAIN, Reason.LOW_MARGIN)

    def test_margin_counts_no_match_as_runner_up(self) -> None:
        outcome = decide(dist(0.58, 0.0, 0.0, none=0.42), min_probability=0.5, min_margin=0.2)
        assert outcome.reason is Reason.LOW_MARGIN

    def test_gates_are_inclusive(self) -> None:
        outcome = decide(dist(0.6, 0.5, 0.0, none=0.0), min_probability=0.6, min_margin=0.1)
        assert outcome.decision is Decision.ACCEPTED

    def test_tie_between_winner_and_no_match_with_zero_margin_is_no_match(self) -> None:
        outcome = decide(dist(0.5, 0.0, 0.0, none=0.5), min_probability=0.5, min_margin=0.0)
        assert outcome.decision is Decision.NO_MATCH

    def test_only_gated_outcomes_are_cacheable(self) -> None:
        assert decide(dist(0.9, 0.05, 0.0, none=0.05), **GATES).cacheable
        assert decide(dist(0.0, 0.0, 0.0, none=1.0), **GATES).cacheable
        assert not decide(dist(0.4, 0.3, 0.3, none=0.0), **GATES).cacheable
        assert not Outcome(Decision.FAILURE, Reason.TIMEOUT).cacheable


def fit_answers(fits: dict[str, object], probabilities: dict[str, object]) -> dict[str, object]:
    answers = selection(probabilities)
    for name, value in fits.items():
        answers[name] = {"type": "noul", "noul": value}
    return answers


class TestValidateFits:
    SEL = {"c0": 0.6, "c1": 0.25, "c2": 0.1, "none": 0.05}

    def test_every_fit_question(self) -> None:
        answers = fit_answers({"fit_c0": 0.9, "fit_c1": 0.1, "fit_c2": 0.5}, self.SEL)
        assert validate_fits(answers, IDS) == (0.9, 0.1, 0.5)

    @pytest.mark.parametrize(
        ("fits", "reason"),
        [
            ({"fit_c0": 0.9, "fit_c1": 0.1}, Reason.MISSING_ID),
            ({"fit_c0": 0.9, "fit_c1": 0.1, "fit_c2": 0.5, "fit_c3": 0.5}, Reason.UNKNOWN_ID),
            ({"fit_c0": 1.5, "fit_c1": 0.1, "fit_c2": 0.5}, Reason.OUT_OF_RANGE),
            ({"fit_c0": math.nan, "fit_c1": 0.1, "fit_c2": 0.5}, Reason.OUT_OF_RANGE),
            ({"fit_c0": "yes", "fit_c1": 0.1, "fit_c2": 0.5}, Reason.WRONG_TYPE),
        ],
    )
    def test_rejects(self, fits: dict[str, object], reason: Reason) -> None:
        with pytest.raises(InvalidAnswer) as caught:
            validate_fits(fit_answers(fits, self.SEL), IDS)
        assert caught.value.reason is reason

    def test_missing_selection(self) -> None:
        answers = fit_answers({"fit_c0": 0.9, "fit_c1": 0.1, "fit_c2": 0.5}, self.SEL)
        del answers["selection"]
        with pytest.raises(InvalidAnswer) as caught:
            validate_fits(answers, IDS)
        assert caught.value.reason is Reason.MISSING_ID

    def test_wrong_answer_type(self) -> None:
        answers = fit_answers({"fit_c0": 0.9, "fit_c1": 0.1, "fit_c2": 0.5}, self.SEL)
        answers["fit_c1"] = {"type": "choice", "noul": 0.1}
        with pytest.raises(InvalidAnswer) as caught:
            validate_fits(answers, IDS)
        assert caught.value.reason is Reason.MALFORMED


class TestDecideFit:
    def test_all_inapplicable_is_intentional_no_match_whatever_the_choice(self) -> None:
        outcome = decide_fit(dist(0.9, 0.05, 0.0, none=0.05), (0.25, 0.1, 0.0), **FIT_GATES)
        assert (outcome.decision, outcome.reason) == (Decision.NO_MATCH, Reason.ALL_INAPPLICABLE)

    def test_applicable_candidates_in_choice_order_even_at_or_below_no_match(self) -> None:
        # c2 is applicable but its choice probability (0.05) equals no-match: still returned.
        outcome = decide_fit(dist(0.2, 0.7, 0.05, none=0.05), (0.9, 0.8, 0.75), **FIT_GATES)
        assert outcome == Outcome(Decision.ACCEPTED, Reason.WINNER, (1, 0, 2))

    def test_uncertain_and_inapplicable_candidates_are_left_out(self) -> None:
        outcome = decide_fit(dist(0.7, 0.2, 0.05, none=0.05), (0.9, 0.5, 0.1), **FIT_GATES)
        assert outcome.ranked == (0,)

    def test_choice_gates_still_apply(self) -> None:
        fits = (0.9, 0.9, 0.9)
        outcome = decide_fit(dist(0.5, 0.3, 0.15, none=0.05), fits, **FIT_GATES)
        assert (outcome.decision, outcome.reason) == (Decision.UNCERTAIN, Reason.LOW_PROBABILITY)
        gates = {**FIT_GATES, "min_margin": 0.3}
        outcome = decide_fit(dist(0.6, 0.35, 0.0, none=0.05), fits, **gates)
        assert (outcome.decision, outcome.reason) == (Decision.UNCERTAIN, Reason.LOW_MARGIN)

    def test_accepted_no_match_stays_empty(self) -> None:
        outcome = decide_fit(dist(0.1, 0.05, 0.05, none=0.8), (0.9, 0.5, 0.1), **FIT_GATES)
        assert (outcome.decision, outcome.ranked) == (Decision.NO_MATCH, ())

    def test_accepted_winner_with_none_applicable_falls_back(self) -> None:
        outcome = decide_fit(dist(0.8, 0.1, 0.05, none=0.05), (0.5, 0.6, 0.3), **FIT_GATES)
        assert (outcome.decision, outcome.reason) == (Decision.UNCERTAIN, Reason.NONE_APPLICABLE)

    def test_fit_thresholds_are_inclusive_both_ways(self) -> None:
        gates = {**GATES, "min_fit_probability": 0.8}
        # 0.2 <= 1 - 0.8 (which is 0.19999999999999996 in floating point): inapplicable.
        assert (
            decide_fit(dist(0.9, 0.05, 0.0, none=0.05), (0.2, 0.2, 0.2), **gates).decision
            is Decision.NO_MATCH
        )
        assert decide_fit(dist(0.9, 0.05, 0.0, none=0.05), (0.8, 0.2, 0.2), **gates).ranked == (0,)


def test_a_repeated_selection_answer_is_malformed() -> None:
    from siftlib.skills.provider import parse_response

    raw = (
        b'{"model":"m","answers":{"selection":{"type":"choice","probabilities":{"c0":1,"none":0}},'
        b'"selection":{"type":"choice","probabilities":{"c0":0,"none":1}}},'
        b'"usage":{"input_tokens":1,"output_tokens":1}}'
    )
    with pytest.raises(InvalidAnswer) as caught:
        normalise(parse_response(raw).answers)
    assert caught.value.reason is Reason.MALFORMED


def test_answers_to_questions_not_asked_are_ignored_outside_fit_mode() -> None:
    answers = selection({"c0": 0.9, "c1": 0.0, "c2": 0.0, "none": 0.1})
    answers["extra"] = {"type": "noul", "noul": 0.5}
    assert validate_distribution(normalise(answers), IDS).candidates[0] == 0.9


def test_a_huge_integer_is_out_of_range_not_an_overflow() -> None:
    assert rejected({"c0": 10**400, "c1": 0, "c2": 0, "none": 0}) is Reason.OUT_OF_RANGE
