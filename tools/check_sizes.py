"""The size gate of `make lint`: no module over MAX_MODULE_LINES lines, no function over MAX_FUNCTION_LINES.

    python tools/check_sizes.py judge_mcp [more folders or files]

A function's lines run from its first decorator to its last line, nested functions included. Prints each breach
as `path:line: name has N lines (limit M)` and exits 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_MODULE_LINES = 600  # a smell check, not a reason to split
MAX_FUNCTION_LINES = 80
EXEMPT: set[tuple[str, str]] = set()  # (module, function) pairs allowed past the function cap: none


def breaches(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    name = path.as_posix()
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}:1: the module has {lines} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (name, node.name) not in EXEMPT:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            length = (node.end_lineno or node.lineno) - start + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno}: {node.name} has {length} lines (limit {MAX_FUNCTION_LINES})")
    return found


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    paths = [f for arg in argv for f in ([Path(arg)] if Path(arg).is_file() else sorted(Path(arg).rglob("*.py")))]
    found = [line for path in paths for line in breaches(path)]
    print("\n".join(found) if found else f"sizes: {len(paths)} modules within {MAX_MODULE_LINES} lines, functions within {MAX_FUNCTION_LINES}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
