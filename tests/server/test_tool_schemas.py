"""The tools' schemas come from the file shipped beside judge_mcp/server/schemas.py when it is current, and are
generated from the models otherwise; either way the server publishes exactly what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_mcp.server import schemas as tool_schemas
from testkit.scripted_judges import UniversalJudge
from judge_mcp.server.tools import TOOLS

REWRITE = "the shipped tool schemas are out of date with the models: run `make schemas` (.venv/bin/python -m judge_mcp.server.schemas --write)"


def same(a: object, b: object) -> bool:
    """Equal, key order included (a client shows the arguments in the schema's order)."""
    return json.dumps(a) == json.dumps(b)


def test_the_shipped_schemas_are_current_with_the_models() -> None:
    data = tool_schemas.shipped()
    assert data is not None, f"{tool_schemas.FILE} is missing or unreadable: {REWRITE}"
    now = tool_schemas.fingerprint()
    assert data["fingerprint"]["sources"] == now["sources"], REWRITE
    assert set(data["tools"]) == {spec.name for spec in TOOLS}, REWRITE
    if data["fingerprint"]["environment"] == now["environment"]:  # the pydantic and mcp it was generated with
        assert same(data["tools"], tool_schemas.generate(TOOLS)), REWRITE
        assert same(tool_schemas.schemas(TOOLS), data["tools"])  # and a start uses it


def _write(path: Path, content: object) -> None:
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")


def test_a_current_file_is_what_a_start_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marked = {spec.name: {"input": {"marker": spec.name}, "output": {"marker": "out"}} for spec in TOOLS}
    monkeypatch.setattr(tool_schemas, "FILE", tmp_path / "schemas.json")
    _write(tool_schemas.FILE, {"fingerprint": tool_schemas.fingerprint(), "tools": marked})
    assert tool_schemas.schemas(TOOLS) == marked  # read, not generated


@pytest.mark.parametrize(
    "content",
    ["stale sources", "other pydantic", "a tool missing", "not json", "no tools", "missing"],
)
def test_a_stale_broken_or_missing_file_is_not_used(content: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_schemas, "FILE", tmp_path / "schemas.json")
    now = tool_schemas.fingerprint()
    bogus = {spec.name: {"input": {"marker": 1}, "output": {"marker": 1}} for spec in TOOLS}
    files = {
        "stale sources": {"fingerprint": {**now, "sources": "0" * 64}, "tools": bogus},
        "other pydantic": {"fingerprint": {**now, "environment": "0" * 64}, "tools": bogus},
        "a tool missing": {"fingerprint": now, "tools": dict(list(bogus.items())[1:])},
        "not json": '{"fingerprint": ',
        "no tools": {"fingerprint": now},
    }
    if content in files:
        _write(tool_schemas.FILE, files[content])
    assert same(tool_schemas.schemas(TOOLS), tool_schemas.generate(TOOLS))


async def test_tools_list_is_the_same_with_and_without_the_file(connect, mcp_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a client lists from a server started with the shipped file (over this run's transport) is, key order
    included, what it lists from one that generated every schema (in memory, the file taken away)."""
    from mcp import Client

    async with connect(UniversalJudge()) as judged:
        shipped = (await judged.client.list_tools()).tools
    monkeypatch.setattr(tool_schemas, "FILE", tmp_path / "missing.json")
    server, _backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        generated = {t.name: t for t in (await client.list_tools()).tools}
    assert [t.name for t in shipped] == list(generated)
    for tool in shipped:
        assert same(tool.input_schema, generated[tool.name].input_schema), tool.name
        assert same(tool.output_schema, generated[tool.name].output_schema), tool.name
    assert {spec.name for spec in TOOLS} <= set(generated)
