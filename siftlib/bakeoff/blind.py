"""Blind judging material for a finished run: packs, the key, a blank judgments sheet.

Each configuration that ran gets a pack letter (A, B, …) from a shuffle drawn from OS
randomness (`secrets.SystemRandom`). A pack holds, per query, only each hit's rank, URL,
title and snippet — no scores, sources, warnings, latencies or credits — so nothing in it
names the configuration. The key mapping letters back is `key/key.json`; like every file
of the run directory it is 0600 inside 0700 directories, whatever the umask. A line skipped
at the credit ceiling appears as an empty list. Packs and the sheet number queries from 1, as
the lines of the queries file are numbered in an editor; `results.jsonl` keeps the 0-based
`query_index`, so `number = query_index + 1`.

Safe from cron: every run holds an exclusive `flock` on `RUN_DIR/.blind.lock`, so a second run
waits for the first, then finds the material and writes nothing. No existing file is ever
overwritten (each is written to a temporary name, then hard-linked into place). With the key
present, a missing pack or sheet is rebuilt from it — the same bytes as before; packs without
a key are refused, because the mapping would be lost.

    >>> write_blind(Path("runs/2026-11-30"))
    [PosixPath('runs/2026-11-30/key/key.json'), PosixPath('runs/2026-11-30/packs/A.json'), …]
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import secrets
import string
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from siftlib.bakeoff.rundir import Run, dump_json, make_private_dir, open_private, read_run
from siftlib.errors import BakeoffError

PACKS = "packs"
KEY_DIR = "key"
KEY = "key.json"
JUDGMENTS = "judgments.csv"
LOCK = ".blind.lock"
JUDGMENTS_HEADER = "query,pack,found"


def write_blind(run_dir: Path, *, rng: random.Random | None = None) -> list[Path]:
    """Write whichever packs, key and judgments sheet are missing; return the files written."""
    run = read_run(run_dir)
    if not run.ran:
        raise BakeoffError(f"{run_dir}: no configuration ran, so there is nothing to judge")
    with _locked(run_dir / LOCK):
        return write_missing(run, rng=rng or secrets.SystemRandom())


def write_missing(run: Run, *, rng: random.Random) -> list[Path]:
    """Write the missing material of `run`; the caller holds the lock."""
    written: list[Path] = []
    key_path = run.path / KEY_DIR / KEY
    packs_dir = run.path / PACKS
    if key_path.exists():
        key = read_key(run.path, run.ran)
    else:
        if packs_dir.is_dir() and any(packs_dir.glob("*.json")):
            raise BakeoffError(
                f"{packs_dir} holds packs but {key_path} is missing: the mapping is lost; "
                "move the packs away to draw a new key"
            )
        configs = list(run.ran)
        rng.shuffle(configs)
        key = dict(zip(string.ascii_uppercase, configs, strict=False))
        make_private_dir(run.path / KEY_DIR)
        _create(key_path, dump_json(key))
        written.append(key_path)

    make_private_dir(packs_dir)
    for letter, config in key.items():
        pack_path = packs_dir / f"{letter}.json"
        if not pack_path.exists():
            _create(pack_path, dump_json(pack(run, config)))
            written.append(pack_path)

    sheet = run.path / JUDGMENTS
    if not sheet.exists():
        rows = [
            f"{number},{letter}," for number in range(1, len(run.queries) + 1) for letter in key
        ]
        _create(sheet, "\n".join([JUDGMENTS_HEADER, *rows]) + "\n")
        written.append(sheet)
    return written


def pack(run: Run, config: str) -> dict[str, Any]:
    """Return the judge's view of one configuration: queries and bare hits, nothing else."""
    queries = []
    for index, query in enumerate(run.queries):
        hits = [
            {
                "rank": rank,
                "url": str(hit.get("url", "")),
                "title": str(hit.get("title", "")),
                "snippet": str(hit.get("snippet", "")),
            }
            for rank, hit in enumerate(run.line(config, index).hits, 1)
        ]
        queries.append({"number": index + 1, "query": query, "hits": hits})
    return {"queries": queries}


def read_key(run_dir: Path, ran: list[str]) -> dict[str, str]:
    """Read `key/key.json` and check it maps one letter to each configuration that ran."""
    path = run_dir / KEY_DIR / KEY
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BakeoffError(f"{path} is missing: run `sift blind {run_dir}` first") from None
    except (OSError, ValueError) as exc:
        raise BakeoffError(f"{path} cannot be read ({type(exc).__name__})") from None
    letters = list(string.ascii_uppercase[: len(ran)])
    if (
        not isinstance(key, dict)
        or sorted(key) != letters
        or sorted(map(str, key.values())) != sorted(ran)
    ):
        raise BakeoffError(f"{path} does not map one pack letter to each configuration that ran")
    return {letter: str(key[letter]) for letter in letters}


def _create(path: Path, text: str) -> None:
    """Write a new file whole, never replacing one: temporary name, then a hard link."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open_private(temporary, newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if needed), waiting for another holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
