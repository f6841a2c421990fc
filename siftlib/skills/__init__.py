"""Skill search: the local catalog, the keyword baseline and the opt-in reranking request.

catalog     discover skill folders and parse their frontmatter (bodies are never read)
keyword     the keyword baseline, the result every search falls back to
vocabulary  curated synonym concepts for the shortlist's concept stream
consent     the `[skill_search.reranking]` opt-in, validated strictly
shortlist   the bounded outbound request (or the reason none may be sent)
command     `sift rerank-skills` and its `--stdio` session
"""
