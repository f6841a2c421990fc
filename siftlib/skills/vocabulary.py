"""A small curated vocabulary of synonym concepts common in agent skills.

The shortlist's concept stream (spec §5.2) uses it so that a skill described with other words
than the query's still gets a slot: "spreadsheet" finds an `xlsx` skill, "bug" finds
"debugging". A query touches a concept when one of its terms is one of the concept's terms;
the concept then contributes its *alternate* terms, the ones the query did not use (the
query's own terms already count in the lexical stream). The terms only pick candidates
locally: the outbound query and skill metadata are never expanded with them.

Every term is one lowercase letter/digit run, as the keyword tokeniser splits text, and is
matched as a whole word. Inflections are listed where skills use them. Reviewed for: no
generic words that would touch most skills ("use", "file", "code", "skill"), no term that
means something else in another common sense.
"""

from __future__ import annotations

from collections.abc import Iterable

CONCEPTS: dict[str, tuple[str, ...]] = {
    "testing": (
        "test", "tests", "testing", "unittest", "pytest", "jest", "vitest", "e2e", "tdd",
        "qa", "playwright", "selenium", "coverage",
    ),
    "deployment": (
        "deploy", "deploys", "deploying", "deployment", "release", "releases", "releasing",
        "ship", "shipping", "publish", "publishing", "rollout", "hosting",
    ),
    "ci": ("ci", "pipeline", "pipelines", "jenkins", "buildkite", "circleci"),
    "containers": (
        "docker", "dockerfile", "container", "containers", "devcontainer", "kubernetes", "k8s",
        "helm",
    ),
    "documents": (
        "document", "documents", "doc", "docs", "docx", "pdf", "pdfs", "acrobat", "form",
        "forms",
    ),
    "spreadsheets": (
        "spreadsheet", "spreadsheets", "excel", "xlsx", "xls", "csv", "tsv", "sheet", "sheets",
        "workbook", "pivot", "formulas",
    ),
    "presentations": (
        "presentation", "presentations", "slides", "slide", "deck", "pptx", "powerpoint",
        "keynote",
    ),
    "images": (
        "image", "images", "picture", "pictures", "photo", "photos", "png", "jpeg", "jpg",
        "svg", "gif", "icon", "icons", "illustration", "artwork", "art", "canvas",
    ),
    "diagrams": (
        "diagram", "diagrams", "chart", "charts", "graph", "flowchart", "mermaid", "uml",
        "visualize", "visualise",
    ),
    "git": (
        "git", "commit", "commits", "branch", "branches", "merge", "rebase", "worktree",
        "worktrees", "github", "gh", "repository", "repo",
    ),
    "code-review": (
        "review", "reviews", "reviewing", "reviewer", "pr", "prs", "feedback", "critique",
        "audit", "diff",
    ),
    "debugging": (
        "debug", "debugging", "bug", "bugs", "error", "errors", "crash", "crashes", "failure",
        "failing", "broken", "troubleshoot", "troubleshooting", "traceback", "exception",
        "regression",
    ),
    "databases": (
        "database", "databases", "db", "sql", "sqlite", "postgres", "postgresql", "mysql",
        "schema", "migration", "migrations",
    ),
    "web-scraping": (
        "scrape", "scraping", "scraper", "crawl", "crawling", "crawler", "browser", "webpage",
        "website", "html", "extract", "extraction",
    ),
    "frontend": (
        "frontend", "ui", "ux", "css", "html", "react", "component", "components", "webapp",
        "design",
    ),
    "writing": (
        "write", "writing", "draft", "drafting", "prose", "essay", "article", "blog",
        "documentation", "readme", "announcement", "newsletter",
    ),
    "communication": ("email", "emails", "slack", "announcement", "comms", "memo", "newsletter"),
    "planning": (
        "plan", "plans", "planning", "roadmap", "brainstorm", "brainstorming", "strategy",
        "outline", "breakdown", "todo",
    ),
    "security": (
        "security", "secure", "vulnerability", "vulnerabilities", "vuln", "vulns", "exploit",
        "cve", "attack", "audit", "pentest", "threat", "sast", "malware", "hardening",
    ),
    "fuzzing": ("fuzz", "fuzzing", "fuzzer", "fuzzers", "libfuzzer", "afl", "harness", "corpus"),
    "static-analysis": (
        "static", "analyzer", "lint", "linter", "semgrep", "codeql", "sarif", "taint",
    ),
    "cryptography": (
        "crypto", "cryptography", "cryptographic", "encryption", "encrypt", "cipher", "tls",
    ),
    "smart-contracts": (
        "contract", "contracts", "solidity", "blockchain", "ethereum", "defi", "web3",
    ),
    "api": ("api", "apis", "sdk", "endpoint", "endpoints", "rest", "http", "mcp"),
    "performance": (
        "performance", "slow", "speed", "latency", "optimize", "optimise", "profiling",
        "benchmark",
    ),
    "refactoring": (
        "refactor", "refactoring", "cleanup", "restructure", "simplify", "rewrite", "modernize",
    ),
    "data-analysis": (
        "dataset", "datasets", "analyze", "analyse", "statistics", "pandas", "notebook",
    ),
    "notes": ("notes", "wiki", "notion", "knowledge", "meeting", "meetings", "minutes"),
}  # fmt: skip


def alternate_terms(terms: Iterable[str]) -> frozenset[str]:
    """Return the other terms of every concept the query terms touch."""
    query = set(terms)
    alternates: set[str] = set()
    for concept_terms in CONCEPTS.values():
        if query.intersection(concept_terms):
            alternates.update(concept_terms)
    return frozenset(alternates - query)
