"""siftlib's packages import in one direction: no circles, no arrow from a lower layer up.

A node is a package of siftlib (`search`, `store`, …) or a top-level module (`config`, `hits`);
an arrow is any import of one node's code by another's, at module level, inside a function or
under `TYPE_CHECKING` alike: each is a dependency of the design, whenever it is paid for.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "siftlib"

# Bottom first. An arrow may point within its layer or down, never up (docs/development.md).
LAYERS = (
    ("siftlib", "errors", "lazylog", "logs", "metrics", "hits", "query"),
    ("net",),
    ("config",),
    ("store",),
    ("search",),
    ("fetch", "skills"),
    ("gateway", "render", "bakeoff", "starter"),
    ("backend",),
    ("mcp",),
    ("commands",),
    ("cli",),
)


def node(module: str) -> str:
    """Return the node a dotted module name belongs to: `siftlib.search.plan` is `search`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imported(tree: ast.AST) -> Iterator[str]:
    """Yield every siftlib module an AST imports (a name taken from a package counts as it)."""
    for statement in ast.walk(tree):
        if isinstance(statement, ast.Import):
            yield from (alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            if statement.module == "siftlib":
                for alias in statement.names:
                    is_module = (ROOT / f"{alias.name}.py").exists() or (ROOT / alias.name).is_dir()
                    yield f"siftlib.{alias.name}" if is_module else "siftlib"
            else:
                yield statement.module


@functools.cache
def arrows(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """Return each arrow between two nodes, with the modules that make it (parsed once: three
    tests read it, and parsing every module of siftlib costs ~0.3 CPU-s)."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        source = node(module)
        for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            if name == "siftlib" or name.startswith("siftlib."):
                target = node(name)
                if target != source:
                    found.setdefault((source, target), []).append(f"{module} -> {name}")
    return found


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Return the strongly connected groups of more than one node (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for source, target in edges:
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            groups.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [group for group in groups if len(group) > 1]


def test_the_packages_import_each_other_without_a_circle() -> None:
    found = arrows()
    groups = circles(set(found))
    detail = [
        m for group in groups for (s, t), ms in found.items() if {s, t} <= set(group) for m in ms
    ]
    assert groups == [], "\n".join(detail)


def test_no_arrow_runs_from_a_lower_layer_up() -> None:
    layer = {name: level for level, names in enumerate(LAYERS) for name in names}
    upward = [
        module
        for (source, target), modules in sorted(arrows().items())
        if source in layer and target in layer and layer[target] > layer[source]
        for module in modules
    ]
    assert upward == []


def test_the_check_sees_a_circle_and_the_wings() -> None:
    assert circles({("store", "search"), ("search", "store"), ("search", "config")}) == [
        ["search", "store"]
    ]
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    nodes = {name for edge in arrows() for name in edge}
    assert {"search", "store", "hits", "config", "net", "cli"} <= nodes  # the walk reaches them
