"""A bake-off run directory: what `sift bakeoff run` leaves for `sift blind` and scoring.

RUN_DIR/results.jsonl   one line per query × configuration (written as the run goes)
RUN_DIR/meta.json       date, k, sift version, which configurations ran (written last,
                        so a run cut short has no meta.json and is refused downstream)
RUN_DIR/queries.txt     the query set and targets as run, so scoring needs no other input
RUN_DIR/targets.txt

A run directory is private to its operator whatever the umask: directories 0700, files 0600.
`results.jsonl` maps configurations to hits, so whoever can read it can recover the blind
key; and a writable run directory would let anyone swap packs or judgments. The judge works
from a copy of `packs/` and `judgments.csv` (bakeoff/BAKEOFF.md).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from siftlib.errors import BakeoffError

RESULTS = "results.jsonl"
META = "meta.json"
QUERIES = "queries.txt"
TARGETS = "targets.txt"


def make_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) owner-only, or make an existing one of ours so.

    A directory that is another user's, or a symbolic link, is refused: its owner could
    plant links in it (`queries.txt -> a victim file`) or read what the run writes.
    """
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        found = path.lstat()
        if stat.S_ISLNK(found.st_mode) or not stat.S_ISDIR(found.st_mode):
            raise BakeoffError(f"{path} is not a directory (a symbolic link or a file)") from None
        if found.st_uid != os.getuid():
            raise BakeoffError(
                f"{path} belongs to another user: choose a directory of yours"
            ) from None
    os.chmod(path, 0o700)


def open_private(path: Path, *, exclusive: bool = False, newline: str | None = None) -> IO[str]:
    """Open `path` for writing as an owner-only (0600) UTF-8 file, whatever the umask.

    A symbolic link there is never followed (`O_NOFOLLOW`); an existing file is rewritten
    only when it is ours and has no other name (a hard link to another file is refused
    before it is truncated); `exclusive` refuses any existing file.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise BakeoffError(f"{path} exists: a run directory is written once") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BakeoffError(
                f"{path} is a symbolic link: sift never writes through one"
            ) from None
        raise
    try:
        found = os.fstat(fd)
        if found.st_uid != os.getuid() or found.st_nlink > 1:
            raise BakeoffError(f"{path} is another user's file or a link to one: not written")
        os.ftruncate(fd, 0)
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through the truncation
        return os.fdopen(fd, "w", encoding="utf-8", newline=newline)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write `path` whole as an owner-only (0600) UTF-8 file (a new one, when `exclusive`)."""
    with open_private(path, exclusive=exclusive) as f:
        f.write(text)


def dump_json(value: Any) -> str:
    """Return the project's on-disk JSON text: indented, UTF-8 as is, newline-terminated."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Line:
    """One query × configuration result of a run."""

    query_index: int
    query: str
    config: str
    hits: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: int | None = None
    credits: dict[str, int] = field(default_factory=lambda: {"tavily": 0, "brave_llm": 0})
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> str:
        """Return the line as written to results.jsonl (`skipped` only when set)."""
        record: dict[str, Any] = {
            "query_index": self.query_index,
            "query": self.query,
            "config": self.config,
            "hits": self.hits,
            "latency_ms": self.latency_ms,
            "credits": self.credits,
            "warnings": self.warnings,
        }
        if self.skipped:
            record["skipped"] = self.skipped
        return json.dumps(record, ensure_ascii=False)

    @classmethod
    def from_record(cls, record: Any) -> Line:
        """Build a line from a parsed results.jsonl record; raise ValueError when malformed."""
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        index, query, config = record.get("query_index"), record.get("query"), record.get("config")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError("query_index must be a non-negative integer")
        if not isinstance(query, str) or not isinstance(config, str):
            raise ValueError("query and config must be strings")
        hits = record.get("hits", [])
        if not isinstance(hits, list) or not all(isinstance(h, dict) for h in hits):
            raise ValueError("hits must be a list of objects")
        latency = record.get("latency_ms")
        if latency is not None and (not isinstance(latency, int | float) or latency < 0):
            raise ValueError("latency_ms must be a non-negative number")
        credits = record.get("credits") or {}
        if not isinstance(credits, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in credits.values()
        ):
            raise ValueError("credits must map source names to integers")
        skipped = record.get("skipped")
        return cls(
            query_index=index,
            query=query,
            config=config,
            hits=hits,
            latency_ms=None if latency is None else round(latency),
            credits={"tavily": credits.get("tavily", 0), "brave_llm": credits.get("brave_llm", 0)},
            warnings=[str(w) for w in record.get("warnings") or []],
            skipped=str(skipped) if skipped else None,
        )


@dataclass(frozen=True)
class Run:
    """A finished run, read back: its metadata and one line per query × configuration that ran."""

    path: Path
    meta: dict[str, Any]
    queries: list[str]
    ran: list[str]
    not_run: dict[str, str]
    lines: dict[tuple[str, int], Line]

    def line(self, config: str, index: int) -> Line:
        """Return the line of `config` for query `index`."""
        return self.lines[(config, index)]


def read_run(path: Path) -> Run:
    """Read and check a finished run directory."""
    if not path.is_dir():
        raise BakeoffError(f"{path} is not a bake-off run directory")
    meta = _read_meta(path / META)
    configs = meta.get("configs")
    if not isinstance(configs, dict) or not all(isinstance(v, dict) for v in configs.values()):
        raise BakeoffError(f'{path / META}: "configs" must map configuration names to objects')
    ran = [name for name, info in configs.items() if info.get("ran") is True]
    not_run = {
        name: str(info.get("reason") or "not run")
        for name, info in configs.items()
        if info.get("ran") is not True
    }

    lines: dict[tuple[str, int], Line] = {}
    texts: dict[int, set[str]] = {}
    try:
        text = (path / RESULTS).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BakeoffError(f"{path / RESULTS} is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BakeoffError(f"{path / RESULTS} cannot be read ({type(exc).__name__})") from None
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = Line.from_record(json.loads(raw))
        except ValueError as exc:
            raise BakeoffError(
                f"{path / RESULTS} line {number} is not a result line: {exc}"
            ) from None
        key = (line.config, line.query_index)
        if key in lines:
            raise BakeoffError(
                f"{path / RESULTS} line {number} repeats query {line.query_index} of {line.config}"
            )
        lines[key] = line
        texts.setdefault(line.query_index, set()).add(line.query)

    count = 1 + max((index for _, index in lines), default=-1)
    queries: list[str] = []
    for index in range(count):
        for config in ran:
            if (config, index) not in lines:
                raise BakeoffError(
                    f"{path / RESULTS} has no line for query {index} of {config}: "
                    "the run is incomplete"
                )
        if len(texts.get(index, ())) != 1:
            raise BakeoffError(f"{path / RESULTS}: query {index} has no single text")
        queries.append(next(iter(texts[index])))
    return Run(path=path, meta=meta, queries=queries, ran=ran, not_run=not_run, lines=lines)


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BakeoffError(
            f"{path} is missing: the run has not finished (or this is not a run directory)"
        ) from None
    except (OSError, ValueError) as exc:
        raise BakeoffError(f"{path} cannot be read ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise BakeoffError(f"{path} is not a JSON object")
    return meta
