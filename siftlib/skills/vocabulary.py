"""A reviewed vocabulary of synonym concepts for the words people use when they ask for a skill.

The concepts live in `concepts.txt` beside this module, one per line (`name: term term …`),
shipped inside the package. The relevance scorer stems every term and relates the terms of
one concept to each other, so that a skill described with other words than the query's still
scores: "workbook" finds an `xlsx` skill, "crash" finds "debugging", "concurrently" finds
"parallel agents". A concept groups the words a person uses for one job or thing, from the
user's side as well as the tool's. The terms only pick and rank candidates locally: the
outbound query and skill metadata are never expanded with them.

Written for agent skills in general (documents, software work, security, data, writing), not
for one catalog. The first 264 concepts grew from the development halves of `testdata/skills/`;
the other 520 were written in three domains (security, development process, documents and
operations) by writers who read the catalogs' names and descriptions and never a query, so
the `dev_mixed` sets measured them blind. A word that occurs only in a held-out query (not in
a development query, a catalog description or the issue that asked for this) is kept out, so
the held-out figures stay honest: 72 such words the blind writers had chosen were struck;
`tests/skills/test_vocabulary.py` checks it.

    for name, terms in concepts().items(): ...
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files


@lru_cache(maxsize=1)
def concepts() -> dict[str, tuple[str, ...]]:
    """Return every concept's name and terms, read once from `concepts.txt`."""
    text = files(__package__ or "siftlib.skills").joinpath("concepts.txt").read_text("utf-8")
    table: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, terms = line.partition(":")
            table[name.strip()] = tuple(terms.split())
    return table
