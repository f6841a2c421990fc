"""Skill search: the local catalog, local ranking, the keyword baseline and opt-in reranking.

catalog     discover skill folders (bodies are never read); discovery only
frontmatter read and parse a SKILL.md's frontmatter, the YAML subset skills use
memo        an index built once per catalog snapshot (each scorer caches its own)
text        words, stop words and stems: the text rules the local scorers share
keyword     the keyword baseline, the result every search falls back to
vocabulary  reviewed synonym concepts (concepts.txt) for the relevance scorer
meaning     static word-piece embeddings (wordpieces.bin): cosines by meaning, no model
relevance   the local scorer: BM25F over stems and synonyms, fused with the embeddings
local       local ranking mode (§10): the relevance ranking, or "no skill fits"
mode        which mode a search ranks in: its own, the project's or global config's, else local
consent     the `[skill_search.reranking]` opt-in, validated strictly
shortlist   the bounded outbound request (or the reason none may be sent)
provider    the TypeSafe System One wire format
decide      validation of the provider's answer and the accept/no-match/uncertain gates
cache       the session cache of gated outcomes
rerank      the opted-in System One reranker: deadline, cancellation, cache
observe     what a reranked search tells its observers: call events, one observation
answer      the tool-result shape: the agent's text and its JSON twin
session     a search session over one snapshot, and the `--stdio` loop
fixtures    labelled queries, their sets and catalogs, as eval reads them
eval        accuracy per mode on labelled queries
report      eval's tables and JSON: per set, per catalog, per writer, all

The commands are `siftlib.commands.rerank_skills` and `siftlib.commands.rerank_skills_eval`.
"""
