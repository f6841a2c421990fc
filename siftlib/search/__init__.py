"""Web search: the pipeline, its sources, fusion of their hits, query rules and health."""
