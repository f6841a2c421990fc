"""Benchmark page reading per page type on WCXB's development pages, beside trafilatura alone.

Scored as `../shared/realdata/wcxb-dev/README.md` says: per page, the bag-of-words F1 (lower
case `\\w+` tokens, multiset overlap) between the answer reduced to its text and the ground
truth's `main_content`, the mean over pages per type and overall; and the share of the
ground truth's `with[]` snippets found in the answer (their words in order; the last may be
cut short, as WCXB cuts snippets at 80 characters mid-word and checks them as substrings),
and beside it the share found with every word whole, as this bench counted before. sift
answers as `/v2/scrape` does (markdown, main content); trafilatura alone is
`trafilatura.extract(html, url=url)` with its own defaults. The pages are split by a fixed
hash of their id into a tuning half (the one to choose by) and a check half (to see that a
choice carries); both are printed, with the conversion time per page (median, p90) of each
system, all in one run.

    .venv/bin/python tests/bench/bench_reading.py
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

WCXB = ROOT.parent / "shared" / "realdata" / "wcxb-dev"
TYPES = ("article", "forum", "product", "collection", "listing", "documentation", "service")
_WORD = re.compile(r"\w+")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()\s]|\([^)]*\))*\)")
_FENCE = re.compile(r"^(```|~~~)[^\n]*$", re.M)


def as_text(markdown: str) -> str:
    """Reduce markdown to its text: no image references, link targets or fence lines."""
    return _FENCE.sub("", _LINK.sub(r"\1", _IMAGE.sub("", markdown)))


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def f1(answer: str, truth: str) -> float:
    """The benchmark's bag-of-words F1 (1 for an empty answer to an empty truth)."""
    got, want = Counter(tokens(answer)), Counter(tokens(truth))
    if not want or not got:
        return float(not want and not got)
    overlap = sum((got & want).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(got.values()), overlap / sum(want.values())
    return 2 * precision * recall / (precision + recall)


def kept(snippet: str, answer_words: str, *, whole: bool = False) -> bool:
    """Tell whether a snippet's words appear, in order and together, in the answer.

    The last word may be the start of the answer's ("a dovetai" in "a dovetail joint"): WCXB
    cuts long snippets at 80 characters, mid-word, and its own check is a substring test.
    With `whole`, every word must be whole.
    """
    return f" {' '.join(tokens(snippet))}{' ' if whole else ''}" in answer_words


def tuning_half(file_id: str) -> bool:
    return hashlib.sha256(file_id.encode()).digest()[0] % 2 == 0


def pages() -> list[dict[str, object]]:
    found = []
    for truth_path in sorted((WCXB / "ground-truth").glob("*.json")):
        record = json.loads(truth_path.read_text(encoding="utf-8"))
        html_path = WCXB / "html" / f"{truth_path.stem}.html.gz"
        found.append(
            {
                "id": truth_path.stem,
                "url": record.get("url") or "https://example.org/",
                "type": record["_internal"]["page_type"]["primary"],
                "truth": record["ground_truth"]["main_content"] or "",
                "with": record["ground_truth"].get("with") or [],
                "body": gzip.decompress(html_path.read_bytes()),
            }
        )
    return found


def sift(body: bytes, url: str) -> str:
    from siftlib.fetch.convert import convert

    return convert(body, content_type="text/html", media_type="text/html", url=url).content


def trafilatura_alone(body: bytes, url: str) -> str:
    import trafilatura

    from siftlib.fetch.convert import decode

    return trafilatura.extract(decode(body, "text/html", html_page=True), url=url) or ""


def run(systems: dict[str, Callable[[bytes, str], str]]) -> None:
    corpus = pages()
    for system in systems.values():  # imports and caches warm before anything is timed
        system(corpus[0]["body"], str(corpus[0]["url"]))  # type: ignore[arg-type]
    scores: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    snippets: dict[tuple[str, str, bool], list[bool]] = defaultdict(list)
    times: dict[str, list[float]] = defaultdict(list)
    for record in corpus:
        half = "tune" if tuning_half(str(record["id"])) else "check"
        for name, system in systems.items():
            started = time.process_time()
            answer = as_text(system(record["body"], str(record["url"])))  # type: ignore[arg-type]
            times[name].append(time.process_time() - started)
            value = f1(answer, str(record["truth"]))
            for group in (str(record["type"]), "all"):
                scores[(name, half, group)].append(value)
                scores[(name, "both", group)].append(value)
            words = f" {' '.join(tokens(answer))} "
            for snippet in record["with"]:  # type: ignore[attr-defined]
                for whole in (False, True):
                    found = kept(snippet, words, whole=whole)
                    snippets[(name, half, whole)].append(found)
                    snippets[(name, "both", whole)].append(found)
    for half in ("tune", "check", "both"):
        count = len(scores[(next(iter(systems)), half, "all")])
        print(f"\nWCXB dev, {half} half ({count} pages): bag-of-words F1, mean per page")
        print(f"  {'page type':15}{'pages':>6}" + "".join(f"{name:>14}" for name in systems))
        for group in (*TYPES, "all"):
            n = len(scores[(next(iter(systems)), half, group)])
            row = [statistics.mean(scores[(name, half, group)] or [0.0]) for name in systems]
            print(f"  {group:15}{n:6}" + "".join(f"{value:14.3f}" for value in row))
        for whole, label in ((False, "snippets kept"), (True, "  words whole")):
            row = [statistics.mean(snippets[(name, half, whole)] or [0.0]) for name in systems]
            print(f"  {label:21}" + "".join(f"{value:14.1%}" for value in row))
    print("\nconversion time per page, CPU ms:")
    for name, values in times.items():
        ms = sorted(v * 1000 for v in values)
        print(
            f"  {name:14} median {statistics.median(ms):6.1f}   "
            f"p90 {ms[int(0.9 * (len(ms) - 1))]:6.1f}   total {sum(ms) / 1000:6.1f} s"
        )


if __name__ == "__main__":
    if not WCXB.is_dir():
        print(f"skipped: no WCXB pages at {WCXB} (../shared/realdata beside the clone)")
        sys.exit(0)
    run({"sift": sift, "trafilatura": trafilatura_alone})
