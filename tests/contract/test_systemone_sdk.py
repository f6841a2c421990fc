"""The official TypeSafe SDK (typesafe-sdk 0.7.5) agrees with sift's System One wire format.

`make test` checks every request the fake System One receives and every answer it sends with
hand-written rules (`tests/skills/systemone_fake.py`); here the SDK's own models judge the
same bodies and answers, so neither sift nor the fake can drift from the real format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from skills.systemone_fake import (
    catalog_of,
    check_request,
    check_response,
    choice,
    envelope,
    fitted,
    ranked,
)

from siftlib.skills.consent import RerankSettings
from siftlib.skills.provider import build_body
from siftlib.skills.shortlist import OutboundRequest, build_request

pytestmark = pytest.mark.contract

SKILLS = {
    "pdf-forms": "Fill in and flatten PDF forms.",
    "csv-clean": "Clean up messy CSV files — quotes, encodings, stray delimiters.",
    "git-bisect": "Find the commit that introduced a bug with git bisect.",
}


def sdk_check_request(body: dict[str, Any]) -> None:
    """Raise unless the SDK's request models accept `body`, with no unknown field."""
    import typesafe_sdk
    from typesafe_sdk._schemas import models as wire

    wire.SystemOneRequest.model_validate(body)
    for question in body["questions"].values():
        model = {"choice": typesafe_sdk.Choice, "noul": typesafe_sdk.Noul}[question["type"]]
        model.model_validate(question)  # extra="forbid"


def sdk_check_response(raw: bytes) -> None:
    """Decode `raw` as the SDK does; raise when it would reject it."""
    import httpx2
    import typesafe_sdk

    request = httpx2.Request("POST", "https://api.typesafe.ai/v1/systemone")
    typesafe_sdk.SystemOneResponse.from_http_response(
        httpx2.Response(200, content=raw, request=request)
    )


def bodies(tmp_path: Path) -> list[dict[str, Any]]:
    """The bodies sift sends: selection only and fit mode, small and at the envelope bounds."""
    small = build_request(catalog_of(tmp_path / "a", SKILLS), "fill a pdf form", RerankSettings())
    many = {f"skill-{i:02d}": "" for i in range(64)}
    large = build_request(
        catalog_of(tmp_path / "b", many), "skill", RerankSettings(max_candidates=64)
    )
    assert isinstance(small, OutboundRequest) and isinstance(large, OutboundRequest)
    return [
        json.loads(build_body(request, model=model, fit=fit))
        for request in (small, large)
        for model in ("jev-latest", "m" * 256)
        for fit in (False, True)
    ]


def test_every_body_sift_sends_is_a_request_the_sdk_accepts(tmp_path: Path) -> None:
    for body in bodies(tmp_path):
        sdk_check_request(body)
        check_request(body)  # the fake's rules accept it too


def test_every_answer_the_fake_builds_is_one_the_sdk_decodes(tmp_path: Path) -> None:
    for body in bodies(tmp_path):
        names = [c["name"] for c in body["state"]["candidates"]]
        replies = [
            ranked({names[0]: 0.9}, 0.05)(body),
            ranked({}, 1.0)(body),
            fitted({names[-1]: 0.6}, 0.2, {names[-1]: 0.8})(body),
        ]
        for reply in replies:
            assert isinstance(reply, tuple) and reply[0] == 200
            sdk_check_response(reply[1])
    sdk_check_response(envelope({}, tokens=(0, 0)))


@pytest.mark.parametrize(
    "answer",
    [
        {"type": "choice", "choice": "c9", "confidence": 0.5, "probabilities": {"c0": 0.5}},
        {"type": "noul", "noul": 1.5},
        {"type": "noul", "noul": "0.5"},
    ],
)
def test_answers_the_fake_refuses_are_not_in_the_format(answer: dict[str, Any]) -> None:
    raw = json.dumps(
        {"model": "m", "answers": {"a": answer}, "usage": {"input_tokens": 1, "output_tokens": 1}}
    ).encode()
    with pytest.raises(AssertionError):
        check_response(raw)


def test_the_fake_choice_helper_names_the_most_probable_label(tmp_path: Path) -> None:
    body = bodies(tmp_path)[0]
    answer = choice(body, {"git-bisect": 0.7}, 0.1)
    assert answer["probabilities"][answer["choice"]] == 0.7
