"""The names gate of `make lint`: a comment or docstring that names a file (`storage/texts.py`, `texts.py`) or a
method of one of the package's classes (`App.backend`) names one that exists, so a reader who follows the prose
finds what it cites.

    python tools/check_names.py judge_mcp [Makefile CONTRIBUTING.md ...]

Reads the comments (tokenize) and docstrings (ast) of every module under the package folder, and the whole text of
the other files named. A file name is found when some Python file of the checkout (the package, tests/, testkit/,
perf/, tools/) ends with it, path part by path part; `Class.name` is checked only where the package defines a class
of that name: the class (or a class of the package it derives from) must define `name` in its body or assign
`self.name`; a class deriving from one outside the package may inherit anything and is not checked. Every scan is
linear in the text (maximal runs of name characters, no backtracking). Prints each stale name and exits 1 when there
is one.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

RUN = re.compile(r"[A-Za-z0-9_./-]+")  # a maximal run of the characters of a path or a dotted name
TRIM = "./-"  # a run's leading and trailing punctuation is the sentence's, not the name's
FOLDERS = ("judge_mcp", "tests", "testkit", "perf", "tools")
# classes the package may derive from without losing the check (they add no attribute a docstring would cite)
# files of the projects whose published judges the bench reproduces (JudgeBench, Arena-Hard, LLMBar), named where they are cited
UPSTREAM = {"utils/judges.py", "utils/models.py", "utils/metrics.py", "gen_judgment.py", "show_result.py", "utils_math.py", "LLMEvaluator/evaluate.py", "evaluate.py"}
PLAIN_BASES = {"object", "Protocol", "Generic", "ABC", "Exception", "RuntimeError", "ValueError"}


def files_known(root: Path) -> set[str]:
    """Every suffix (by path parts) of every Python file of the checkout: `judge_mcp/storage/texts.py`,
    `storage/texts.py`, `texts.py`; and the UPSTREAM files."""
    known: set[str] = set(UPSTREAM)
    for folder in FOLDERS:
        for path in (root / folder).rglob("*.py"):
            parts = path.relative_to(root).parts
            known.update("/".join(parts[i:]) for i in range(len(parts)))
    return known


def class_attributes(package: Path) -> dict[str, set[str] | None]:
    """Each class name the package defines -> the names its body defines or its methods assign on self, with those of
    its bases in the package; None where a base lies outside the package (anything may be inherited)."""
    own: dict[str, set[str]] = {}
    bases: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = own.setdefault(node.name, set())
            bases.setdefault(node.name, set()).update(ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
                    names.add(sub.attr)
    resolved: dict[str, set[str] | None] = {}

    def resolve(name: str, seen: frozenset[str]) -> set[str] | None:
        if name in resolved:
            return resolved[name]
        out: set[str] | None = set(own[name])
        for base in bases[name] - PLAIN_BASES:
            inherited = resolve(base, seen | {name}) if base in own and base not in seen else None
            if inherited is None or out is None:
                out = None
            else:
                out |= inherited
        resolved[name] = out
        return out

    for name in own:
        resolve(name, frozenset())
    return resolved


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python file; the whole text, line by line, of any other."""
    source = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        yield from enumerate(source.splitlines(), 1)
        return
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                for offset, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + offset, line


def stale(text: str, files: set[str], classes: dict[str, set[str] | None]) -> Iterator[str]:
    """The names in `text` that do not exist: file paths, and `Class.name` of the package's classes."""
    for match in RUN.finditer(text):
        run = match.group().strip(TRIM)
        if run.endswith(".py") or ".py/" in run:
            name = run.split("::")[0]
            if name.endswith(".py") and "*" not in name and name.removeprefix("./") not in files:
                yield name
            continue
        if "/" in run:
            continue
        parts = run.split(".")
        if len(parts) >= 2 and parts[0][:1].isupper() and parts[0] in classes and parts[1][:1].islower() | parts[1].startswith("_"):
            attrs = classes[parts[0]]
            if attrs is not None and parts[1] not in attrs:
                yield f"{parts[0]}.{parts[1]}"


def check(root: Path, package: Path, others: list[Path]) -> list[str]:
    files, classes = files_known(root), class_attributes(package)
    found = []
    for path in [*sorted(package.rglob("*.py")), *others]:
        for line, text in prose(path):
            for name in stale(text, files, classes):
                found.append(f"{path.relative_to(root) if path.is_relative_to(root) else path}:{line}: names {name}, which does not exist")
    return found


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    package = Path(argv[0]).resolve()
    found = check(package.parent, package, [Path(p).resolve() for p in argv[1:]])
    for line in found:
        print(line)
    if found:
        return 1
    print(f"names: every file and Class.method the prose of {package.name}/ and {len(argv) - 1} other files names exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
