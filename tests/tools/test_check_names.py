"""tools/check_names.py: a comment or docstring naming a file or a `Class.method` that does not exist is refused;
real ones pass; the package's prose passes as it is; the scan grows linearly with the text."""

from __future__ import annotations

from pathlib import Path

from testkit.hostile_texts import growth
from tools import check_names

ROOT = Path(check_names.__file__).resolve().parent.parent


def _checkout(tmp_path: Path, module: str) -> Path:
    package = tmp_path / "judge_mcp"
    (package / "runtime").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "runtime" / "app.py").write_text(
        "class App:\n    limit = 3\n\n    def __init__(self):\n        self.store = None\n\n    def backend(self):\n        pass\n\n\n"
        "class Child(App):\n    def own(self):\n        pass\n\n\nclass Model(BaseModel):\n    pass\n",
        encoding="utf-8")
    (package / "runtime" / "mod.py").write_text(module, encoding="utf-8")
    return package


def test_a_stale_file_or_method_is_refused(tmp_path):
    package = _checkout(tmp_path, '"""Built by `App.run_panel` (calls/judge.py), checked in arg_errors.py."""\n\n'
                                  "# written by App._logged, read by Child.gone\nX = 1\n")
    found = check_names.check(tmp_path, package, [])
    assert found == [
        "judge_mcp/runtime/mod.py:3: names App._logged, which does not exist",
        "judge_mcp/runtime/mod.py:3: names Child.gone, which does not exist",
        "judge_mcp/runtime/mod.py:1: names App.run_panel, which does not exist",
        "judge_mcp/runtime/mod.py:1: names calls/judge.py, which does not exist",
        "judge_mcp/runtime/mod.py:1: names arg_errors.py, which does not exist",
    ]
    assert check_names.main([str(package)]) == 1


def test_real_names_pass(tmp_path):
    package = _checkout(tmp_path, '"""See runtime/app.py, app.py and judge_mcp/runtime/mod.py: `App.backend`, App.store,\n'
                                  'App.limit, Child.backend (inherited), Model.anything (an outside base), Path.is_dir (not ours)."""\n'
                                  "def f():\n    # App.__init__ sets App.store; upstream utils/judges.py is not ours to check\n    pass\n")
    assert check_names.check(tmp_path, package, []) == []


def test_the_package_prose_names_only_what_exists():
    assert check_names.check(ROOT, ROOT / "judge_mcp", [ROOT / "Makefile", ROOT / "CONTRIBUTING.md"]) == []


def test_the_scan_is_linear_in_the_text():
    """A run of name characters with no name in it, and names packed back to back: four times the text, about four
    times the time (quadratic would be ~16)."""
    files, classes = {"app.py"}, {"App": {"run"}}
    for unit in ("a.", "x/y", "App.run ", "a.py/", "App.gone.py "):
        assert growth(lambda text: list(check_names.stale(text, files, classes)), lambda n, u=unit: u * (n // len(u)), 50_000, 4) < 8.0, unit
