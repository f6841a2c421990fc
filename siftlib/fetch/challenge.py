"""Telling a challenge or block page from the page that was asked for (issue 40).

    vendor = challenge_of(status=403, headers=page_headers, body=page.body)
    if vendor:                      # "a Cloudflare challenge", "a CAPTCHA wall", …
        raise BlockedBySite(vendor, status)

An anti-bot interstitial, a CAPTCHA wall or a consent wall with nothing behind it is not the
page: returning it as content is the most common complaint about self-hosted scrapers.

Decisions:
- A *vendor marker* is proof on any status, 200 included: a header only the vendor's
  challenge sends (`cf-mitigated: challenge`), or the vendor's challenge script or form in
  the body (`/cdn-cgi/challenge-platform/`, `captcha-delivery.com`, `_pxAppId` with a
  captcha, `_Incapsula_Resource`). A page that merely mentions Cloudflare or embeds a
  reCAPTCHA on a login form is not one.
- A *block page* (Akamai's "Access Denied … Reference #", a generic "verify you are human"
  wall) is recognised only on 403, 429 or 503 and only when the page is short: an ordinary
  403 page without such words stays an ordinary page with its status.
- A *consent wall* is a short page (under 400 words) whose words are mostly a cookie or
  privacy choice, or one served from a consent host (`consent.google.com`, `guce.yahoo.com`,
  …): a cookie banner over an article is not a wall, the article is there.
- Only the first 256 KiB of a body are looked at: every challenge page is smaller.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["challenge_of"]

_LOOKED_AT = 256 * 1024
_BLOCK_STATUSES = frozenset((403, 429, 503))
_SHORT_WORDS = 400
_EMPTY_WORDS = 20
_CONSENT_HOSTS = ("consent.google.", "consent.youtube.com", "guce.yahoo.com", "consent.yahoo.com")

# Proof on any status: what only a vendor's challenge or block page carries (not the scripts
# the same vendors put on ordinary pages: Cloudflare's `/cdn-cgi/challenge-platform/scripts/`,
# PerimeterX's `_pxAppId`, Imperva's `_Incapsula_Resource`, DataDome's `js.datadome.co`).
# Each comes with the lower-case words every match contains: searching a lowered page for
# those is a C-speed scan, so the patterns run only on the rare page that has one (the five
# patterns over a 100 KB page cost 5 ms of every fetch).
_PROOF = (
    (
        "a Cloudflare challenge",
        (b"_cf_chl_opt", b"/cdn-cgi/challenge-platform/h/", b"just a moment"),
        re.compile(
            rb"window\._cf_chl_opt|/cdn-cgi/challenge-platform/h/[a-z]/orchestrate/"
            rb"|<title>\s*Just a moment\.\.\.\s*</title>",
            re.I,
        ),
    ),
    (
        "a Cloudflare block",
        (b"attention required! | cloudflare",),
        re.compile(rb"<title>\s*Attention Required! \| Cloudflare\s*</title>"),
    ),
    (
        "a DataDome block",
        (b"captcha-delivery.com",),
        re.compile(rb"(?:geo|ct)\.captcha-delivery\.com"),
    ),
    (
        "a PerimeterX block",
        (b"px-captcha", b"captcha.px-cdn.net"),
        re.compile(rb"id=[\"']px-captcha[\"']|captcha\.px-cdn\.net", re.I),
    ),
    ("an Imperva block", (b"incapsula incident id",), re.compile(rb"Incapsula incident ID", re.I)),
)
# Proof on a short page, any status: a challenge with next to no words around it (Imperva's
# script on an all but empty page; a CAPTCHA widget together with a human check).
_INCAPSULA = re.compile(rb"_Incapsula_Resource", re.I)
_WIDGET = re.compile(
    rb"g-recaptcha|h-captcha|hcaptcha\.com|challenges\.cloudflare\.com/turnstile", re.I
)
# Not "I'm not a robot": the label of every reCAPTCHA on a comment form.
_HUMAN_CHECK = re.compile(
    rb"verify (?:that )?you are (?:a )?human|are you a robot|unusual traffic", re.I
)
# A block page's words, counted on a short 403, 429 or 503 page only.
_BLOCK = (
    (
        "an Akamai block",
        re.compile(
            rb"<title>\s*Access Denied\s*</title>.*Reference(?:&#32;|\s)+(?:&#35;|#)",
            re.I | re.S,
        ),
    ),
    ("a CAPTCHA wall", _WIDGET),
    ("a CAPTCHA wall", _HUMAN_CHECK),
)
_CONSENT_WORDS = re.compile(
    r"\b(?:cookies?|consent|privacy|personali[sz]ed|partners|accept all|reject all|"
    r"agree|manage (?:options|preferences|settings)|legitimate interest)\b",
    re.I,
)
_INVISIBLE = re.compile(rb"<(script|style|noscript|template)\b.*?</\1\s*>", re.I | re.S)
_TAG = re.compile(rb"<[^>]*>")
_WORD = re.compile(r"\w+")


def challenge_of(
    *, status: int, headers: Mapping[str, str], body: bytes, url: str = ""
) -> str | None:
    """Name the challenge or block page a response is ("a Cloudflare challenge"), else None.

    `headers` maps lower-case field names to values.
    """
    if headers.get("cf-mitigated", "").strip().lower() == "challenge":
        return "a Cloudflare challenge"
    head = body[:_LOOKED_AT]
    lowered = head.lower()
    for vendor, needles, marker in _PROOF:
        if any(needle in lowered for needle in needles) and marker.search(head):
            return vendor
    words = _visible_words(head)
    if len(words) >= _SHORT_WORDS:
        return None
    if status == 403 and "x-datadome" in headers:
        return "a DataDome block"
    if len(words) < _EMPTY_WORDS and _INCAPSULA.search(head):
        return "an Imperva block"
    if _WIDGET.search(head) and _HUMAN_CHECK.search(head):
        return "a CAPTCHA wall"
    if status in _BLOCK_STATUSES:
        for vendor, marker in _BLOCK:
            if marker.search(head):
                return vendor
    return "a consent wall" if _consent_wall(words, url) else None


def _visible_words(head: bytes) -> list[str]:
    """Return the words a reader sees in an HTML head of a body (scripts and tags dropped).

    Only a short page's words matter: counting stops at `_SHORT_WORDS`.
    """
    text = _TAG.sub(b" ", _INVISIBLE.sub(b" ", head)).decode("utf-8", "replace")
    return [match[0] for match in itertools.islice(_WORD.finditer(text), _SHORT_WORDS)]


def _consent_wall(words: list[str], url: str) -> bool:
    host = (urlsplit(url).hostname or "") if url else ""
    if host.startswith(_CONSENT_HOSTS):
        return True
    if not words:
        return False
    marks = len(_CONSENT_WORDS.findall(" ".join(words)))
    # Every sentence of a wall is about the choice: about one word in twelve is a marker.
    return marks >= 6 and marks * 12 >= len(words)
