"""The tools' schemas come from the file shipped beside judge_mcp/server/schemas.py when it is current, and are
generated from the models otherwise; either way the server publishes exactly what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_mcp.server import schemas as tool_schemas
from testkit.scripted_judges import UniversalJudge
from judge_mcp.server import tools
from judge_mcp.server.tools import TOOLS

REWRITE = "the shipped tool schemas are out of date with the models: run `make schemas` (.venv/bin/python tools/write_schemas.py)"


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


# ---- what a client pays for: tools/list within a budget, every argument still offered --------------------------------
EIGHT = ("compare_pair", "infer_instruction_reward", "grade_score_options", "lwe_judge", "lwe_session_show", "lwe_session",
         "judge_stats", "record_label")
EIGHT_BUDGET = 30_000  # bytes of tools/list for these eight (61,507 before the schemas were compacted, 28,685 after)
NEW_SHAPES = 6_000  # what this round's new tools and shapes (score_response, conversations, trajectories) may add
NUMBERS = 1_000  # issue 48: intervals (`ci`), `candidates`, judge_stats' `ranking` (35,976 bytes before them)


def wire_bytes(value: object) -> int:
    """Compact JSON, UTF-8, as the SDK writes a result (mcp/server/runner.py, then the transport)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def test_tools_list_stays_within_its_budget(mcp_app) -> None:
    """What every connecting session pays before its first call: tools/list as the SDK sends it, the eight tools of
    before this round and score_response, with conversations and trajectories on every judging tool, within
    EIGHT_BUDGET + NEW_SHAPES + NUMBERS (perf/surface.py prints each part)."""
    from mcp import Client
    from mcp_types import ListToolsResult

    server, _backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        listed = await client.list_tools()
    sent = ListToolsResult(tools=listed.tools).model_dump(by_alias=True, mode="json", exclude_none=True)
    assert [t["name"] for t in sent["tools"] if t["name"] in EIGHT] == list(EIGHT) and len(sent["tools"]) == len(EIGHT) + 1
    assert wire_bytes(sent) <= EIGHT_BUDGET + NEW_SHAPES + NUMBERS, "perf/surface.py shows each tool's share"


_LIMITS = ("maxLength", "minLength", "maximum", "minimum", "maxItems", "minItems", "pattern", "enum", "const", "uniqueItems", "additionalProperties")


def _limits(schema: object) -> list[str]:
    """Every limit and choice stated anywhere in a schema (a null choice aside), as sorted JSON texts."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in _LIMITS and not isinstance(value, dict):
                found.append(json.dumps([key, [v for v in value if v is not None] if key == "enum" else value]))
            found += _limits(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _limits(value)
    return sorted(found)


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
def test_every_argument_is_offered_with_its_default_and_limits(spec) -> None:
    """The published input schema lists every field of the argument model, the required ones as required, every
    default that is not null, and every limit and choice the model's own schema states."""
    args_model, _result = spec.models()
    published = tool_schemas.schemas(TOOLS)[spec.name]["input"]
    props = published["properties"]
    assert list(props) == list(args_model.input_schema()["properties"])
    assert set(props) == set(args_model.model_fields)
    assert published["additionalProperties"] is False
    assert set(published.get("required", [])) == {n for n, f in args_model.model_fields.items() if f.is_required()}
    for name, field in args_model.model_fields.items():
        if not field.is_required() and field.default is not None:
            assert props[name]["default"] == field.default, name
        if not field.is_required() and field.default is None:  # optional: published as its type, no null pair, no default
            assert {"type": "null"} not in props[name].get("anyOf", []) and "default" not in props[name], name
        assert "title" not in props[name], name
        assert _limits(props[name]) == _limits(args_model.input_schema()["properties"][name]), name


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
def test_the_published_schemas_are_valid_json_schemas(spec) -> None:
    """What the client's validator checks before it validates a result against the output schema (mcp/client/session.py)."""
    from jsonschema.validators import validator_for

    for schema in tool_schemas.schemas(TOOLS)[spec.name].values():
        validator_for(schema).check_schema(schema)


def test_compacting_knows_a_property_named_title_from_a_generated_title() -> None:
    schema = {"title": "M", "type": "object", "properties": {"title": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                                                                     "title": "Title", "description": "d"}},
              "required": ["title"]}
    assert tool_schemas.compact(schema, output=False) == {"type": "object", "properties": {"title": {"type": "string", "description": "d"}},
                                                         "required": ["title"]}
    assert tool_schemas.compact(schema, output=True) == {"type": "object", "properties": {"title": {"type": ["string", "null"], "description": "d"}}}


@pytest.mark.parametrize(
    ("member", "published"),
    [
        ({"$ref": "#/$defs/X"}, {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}),  # a reference stays a union
        ({"enum": ["A", "B"], "type": "string"}, {"enum": ["A", "B", None]}),
        ({"type": "integer", "minimum": 1}, {"type": ["integer", "null"], "minimum": 1}),
        ({"const": "auto", "type": "string"}, {"anyOf": [{"const": "auto", "type": "string"}, {"type": "null"}]}),
    ],
)
def test_an_output_field_that_may_be_null_still_accepts_null(member: dict, published: dict) -> None:
    from jsonschema import Draft202012Validator

    schema = {"anyOf": [member, {"type": "null"}]}
    out = tool_schemas.compact(schema, output=True)
    assert out == published
    defs = {"$defs": {"X": {"type": "object"}}}
    for value in (None, "A", "C", 0, 1, 2, "auto", {}, [], 1.5):
        assert Draft202012Validator({**schema, **defs}).is_valid(value) == Draft202012Validator({**out, **defs}).is_valid(value), value


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_the_arguments_decoded_from_json_text_are_read_alike_from_the_published_schema(spec) -> None:
    """A call decodes JSON text sent in a string for the arguments that take no free text, read from the published
    input schema (no schema generated at a first call): the same arguments the model's own schema names."""
    args_model, _ = spec.models()
    published = tool_schemas.schemas(TOOLS)[spec.name]["input"]
    assert tools.non_text(published) == tools._non_text(args_model)
    assert any(tools._non_text(s.models()[0]) for s in TOOLS)  # (a real check: not only empty == empty)


def test_every_module_a_tools_models_come_from_is_a_source_of_the_fingerprint() -> None:
    """A change to any argument or result model (or a base it inherits) makes the shipped file stale, so a start
    never publishes a schema older than the model that validates the call (score_response's are in rubric.py)."""
    import inspect

    modules = set()
    for spec in TOOLS:
        for model in spec.models():
            for cls in model.__mro__:
                if cls.__module__.startswith("judge_mcp."):
                    modules.add(Path(inspect.getfile(cls)).resolve().relative_to(tool_schemas.PACKAGE).as_posix())
    assert modules - set(tool_schemas.SOURCES) == set()


def test_the_published_message_states_the_limits_its_checks_enforce() -> None:
    """Message's own limits are left out of the compacted $defs (maxLength): its description states them instead,
    so a client sees each text's 50,000 and the list's 200 messages and 200,000 characters before it is refused."""
    from judge_mcp.contract.fields import MAX_TEXT_CHARS
    from judge_mcp.contract.messages import MAX_CONVERSATION_CHARS, MAX_MESSAGES

    published = tool_schemas.schemas(TOOLS)
    judging = [name for name, schema in published.items() if "Message" in schema["input"].get("$defs", {})]
    assert len(judging) == 5
    for name in judging:
        said = published[name]["input"]["$defs"]["Message"]["description"]
        assert all(f"{n:,}" in said for n in (MAX_TEXT_CHARS, MAX_CONVERSATION_CHARS)) and f"1-{MAX_MESSAGES} messages" in said, name
