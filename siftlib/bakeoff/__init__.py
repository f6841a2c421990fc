"""The bake-off: run source configurations on real queries, judge them blind, score them.

rundir.py   the run directory's files: results.jsonl, meta.json, the saved inputs
run.py      `sift bakeoff run`   → RUN_DIR/results.jsonl, meta.json
blind.py    `sift blind`         → packs/A.json…, key/key.json (0600), judgments.csv
score.py    `sift bakeoff score` → figures per configuration and the winner
report.py   report.md and report.html (inline SVG chart) from those figures

Their refusals raise `siftlib.errors.BakeoffError`.
"""

from __future__ import annotations

# Configuration name → the sift sources it uses, in the order the bake-off runs them.
# `tavily-direct` is not a pipeline configuration: it calls Tavily the way an agent's own
# Tavily tool does (run.py), but it needs the same source available.
CONFIGS: dict[str, tuple[str, ...]] = {
    "searxng": ("searxng",),
    "searxng+brave": ("searxng", "brave_llm"),
    "searxng+brave+tavily": ("searxng", "brave_llm", "tavily"),
    "tavily-direct": ("tavily",),
}
