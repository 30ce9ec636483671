"""tools/check_imports.py's layering rules: an import across a forbidden arrow, and a migration importing live code,
are refused; the arrows the package has pass."""

from __future__ import annotations

from pathlib import Path

from tools import check_imports


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "judge_mcp"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    return root


def test_a_forbidden_arrow_is_refused_and_an_allowed_one_passes(tmp_path):
    root = _package(tmp_path, {
        "config/bundled.py": "from judge_mcp.backends import local_models\n",
        "backends/local_models.py": "from judge_mcp.config import values\n",
        "config/values.py": "",
        "stats/labels.py": "def learn():\n    from judge_mcp.methods.lwe import label_feedback  # lazy: test\n",
        "methods/lwe/label_feedback.py": "",
    })
    edges, _ = check_imports.graph(root)
    found = check_imports.layering(edges)
    assert found == [
        "forbidden arrow: judge_mcp.config.bundled -> judge_mcp.backends.local_models (settings know no backend)",
        "forbidden arrow: judge_mcp.stats.labels -> judge_mcp.methods.lwe.label_feedback"
        " (the stats report knows no method (label learning is a hook the server wires))",
    ]
    assert check_imports.main([str(root)]) == 1


def test_frozen_migration_code_may_import_only_the_engine_seam(tmp_path):
    root = _package(tmp_path, {
        "storage/engine.py": "",
        "storage/verdict_facts.py": "",
        "storage/migration_helpers.py": "from judge_mcp.storage.engine import Tx\n",
        "storage/migrations.py": "from judge_mcp.storage import migration_helpers\nfrom judge_mcp.storage.verdict_facts import PAIR_TOOLS\n",
    })
    edges, _ = check_imports.graph(root)
    assert check_imports.layering(edges) == [
        "frozen migration code imports a live module: judge_mcp.storage.migrations -> judge_mcp.storage.verdict_facts"]


def test_the_package_as_it_is_passes(capsys):
    assert check_imports.main([str(Path(check_imports.__file__).resolve().parent.parent / "judge_mcp")]) == 0, capsys.readouterr().out


def test_the_contract_imports_no_private_name_of_another_module(tmp_path):
    root = _package(tmp_path, {
        "contract/fields.py": "def _fail():\n    pass\n",
        "contract/rubric.py": "from judge_mcp.contract.fields import _fail\n",
        "methods/parsing.py": "def _sep():\n    pass\n",
        "methods/transcript.py": "from judge_mcp.methods.parsing import _sep\n",  # outside the rule's folders
    })
    _, breaches = check_imports.graph(root)
    assert [b.split(": ", 1)[1] for b in breaches] == ["imports private names of another module: _fail"]
