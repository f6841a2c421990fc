"""The upstream search sources, one module per provider, in the fixed source order."""

from __future__ import annotations

from siftlib.sources.base import Answer, BadResponse, QueryNotes, Source, Unresponsive
from siftlib.sources.brave_llm import BraveLLM
from siftlib.sources.searxng import SearXNG
from siftlib.sources.tavily import Tavily

SOURCES: dict[str, type[Source]] = {cls.name: cls for cls in (SearXNG, BraveLLM, Tavily)}

__all__ = ["SOURCES", "Answer", "BadResponse", "QueryNotes", "Source", "Unresponsive"]
