"""The upstream search sources, one module per provider, in the fixed source order."""

from __future__ import annotations

from siftlib.search.sources.base import Answer, BadResponse, QueryNotes, Source, Unresponsive
from siftlib.search.sources.brave_llm import BraveLLM
from siftlib.search.sources.searxng import SearXNG
from siftlib.search.sources.tavily import Tavily

SOURCES: dict[str, type[Source]] = {cls.name: cls for cls in (SearXNG, BraveLLM, Tavily)}

__all__ = ["SOURCES", "Answer", "BadResponse", "QueryNotes", "Source", "Unresponsive"]
