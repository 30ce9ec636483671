"""The import gate of `make lint`: the package's modules import one another without a circle, counting the imports
inside functions and under TYPE_CHECKING, every import inside a function says why it is there, no module imports
across an arrow the one-way flow forbids (FORBIDDEN, ARCHITECTURE.md), and the frozen migrations import nothing live
(FROZEN: each carries its own SQL and helpers, so editing a repository never changes how an old database upgrades).

    python tools/check_imports.py judge_mcp

An import inside a function (kept so that a start does not pay for a module it may never use) carries a comment that
starts with `# lazy:` and gives the reason, on its line or on the line above the block of imports it heads. Prints each breach and each circle
(as `a -> b -> a`) and exits 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


# (importer, imported, why): a module at or below the first may not import one at or below the second
FORBIDDEN = [
    ("judge_mcp.runtime.app", "judge_mcp.methods", "the services know no method table (preloading lives in the start-up module)"),
    ("judge_mcp.calls", "judge_mcp.contract", "the call layer knows no tool result model (usage is converted at the edge)"),
    ("judge_mcp.config", "judge_mcp.backends", "settings know no backend"),
    ("judge_mcp.stats", "judge_mcp.methods", "the stats report knows no method (label learning is a hook the server wires)"),
    ("judge_mcp.storage", "judge_mcp.methods", "storage never imports a method"),
    ("judge_mcp.backends", "judge_mcp.calls", "a backend knows nothing of the call layer above it"),
    ("judge_mcp.backends", "judge_mcp.methods", "a backend knows no method"),
    ("judge_mcp.calls", "judge_mcp.methods", "the call layer knows no method"),
    ("judge_mcp.methods", "judge_mcp.runtime", "a method knows nothing of the run above it"),
    ("judge_mcp.methods", "judge_mcp.server", "a method never knows which transport it runs behind"),
]
# arrows still in the code while another branch removes them (issue 47): (importer, imported); the lead empties this
PENDING: set[tuple[str, str]] = set()
# folders whose modules import no private name (`_x`) of another module: each exposes what others use
NO_PRIVATE_IMPORTS = ("judge_mcp.contract",)
# the frozen migration code: it imports only these modules of the package
FROZEN = {
    "judge_mcp.storage.migrations": {"judge_mcp.storage.engine", "judge_mcp.storage.migration_helpers"},
    "judge_mcp.storage.migration_helpers": {"judge_mcp.storage.engine"},
    "judge_mcp.bench.schema": {"judge_mcp.storage.engine", "judge_mcp.storage.migrations"},
}


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layering(edges: dict[str, set[str]]) -> list[str]:
    """Each import across a FORBIDDEN arrow (but PENDING ones) and each import of live code by FROZEN code."""
    out = []
    for mod, targets in sorted(edges.items()):
        for target in sorted(targets):
            for high, low, why in FORBIDDEN:
                if under(mod, high) and under(target, low) and (mod, target) not in PENDING:
                    out.append(f"forbidden arrow: {mod} -> {target} ({why})")
            if mod in FROZEN and target not in FROZEN[mod]:
                out.append(f"frozen migration code imports a live module: {mod} -> {target}")
    return out


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(node: ast.Import | ast.ImportFrom, here: str, is_package: bool, known: set[str]) -> list[str]:
    """The package modules an import statement loads (a `from pkg import name` names a module when pkg.name is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    base = node.module or ""
    if node.level:
        anchor = here.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
        base = ".".join([*anchor, *([base] if base else [])])
    out = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    if base in known and len(out) < len(node.names):
        out.append(base)
    return out


def says_why(lines: list[str], lineno: int) -> bool:
    """A `# lazy:` comment on the import's line, or on the line just above the block of imports it belongs to."""
    if "# lazy:" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith(("from ", "import ", ")")) and "# lazy:" not in lines[i]:
        i -= 1
    return i >= 0 and "# lazy:" in lines[i]


def graph(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    files = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    known = set(files)
    edges: dict[str, set[str]] = {m: set() for m in files}
    breaches = []
    for mod, path in files.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source, filename=str(path))
        local: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = imported(node, mod, path.name == "__init__.py", known)
            if isinstance(node, ast.ImportFrom) and any(under(mod, f) for f in NO_PRIVATE_IMPORTS):
                hidden = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if hidden and targets:
                    breaches.append(f"{path}:{node.lineno}: imports private names of another module: {', '.join(hidden)}")
            edges[mod].update(t for t in targets if t != mod)
            if id(node) in local and not says_why(lines, node.lineno):
                breaches.append(f"{path}:{node.lineno}: an import inside a function without a `# lazy: reason` comment")
    return edges, breaches


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    edges, breaches = graph(Path(argv[0]).resolve())
    found = circles(edges)
    breaches += layering(edges)
    for line in breaches:
        print(line)
    for comp in found:
        print("import circle: " + " <-> ".join(comp))
    if breaches or found:
        return 1
    print(f"imports: {len(edges)} modules, no circle, every import inside a function says why, no forbidden arrow")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
