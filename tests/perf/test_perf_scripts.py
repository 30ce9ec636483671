"""The perf/ scripts run as `python -m perf.NAME` from the checkout: they import judge_mcp (and each other),
never the tests, and they touch no sys.path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

SCRIPTS = sorted((ROOT / "perf").glob("*.py"))


def offences(path: Path) -> list[str]:
    """Imports of the tests package and uses of `sys.path` in the file at `path`, each as `line: what`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "tests":
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
            found.append(f"{node.lineno}: sys.path")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def test_there_are_perf_scripts():
    assert len(SCRIPTS) > 3, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_perf_script_imports_no_tests_and_no_sys_path(script: Path):
    assert offences(script) == []


def test_the_check_sees_both(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nsys.path.insert(0, '.')\nfrom tests.helpers import ROOT\nimport tests.replicas\n")
    assert offences(bad) == ["2: sys.path", "3: from tests.helpers import ...", "4: import tests.replicas"]
