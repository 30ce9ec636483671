"""Hostile and malformed tool input, through the MCP client (in memory) and, for what only a wire can carry, over
real streamable HTTP.

- Property tests (hypothesis) over every tool's arguments: whatever a client sends, the server answers with a
  structured result that validates against the tool's output model, or with a tool error carrying a message;
  never a protocol error, a crash, or an internal error.
- Named hostile cases per tool: empty and whitespace strings, NUL, lone surrogates, inputs over the documented
  limits (50,000 characters per text, 200,000 per call), option lists of 1 and 11, duplicate options, response
  lists of 0 and 17, session names with path or SQL characters, wrong types; each is a tool error naming the
  argument, sent before any backend call.
- No argument can name a file or code to load: every string argument is either judged text, an enum, a session
  name matched against [A-Za-z0-9_.-]{1,64}, or a backend name looked up in the configured table.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp import Client

from judge_mcp.contract.fields import MAX_TEXT_CHARS, MAX_TOTAL_CHARS
from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge
from testkit.server_process import HttpServer, server_env
from judge_mcp.contract.results import ComparePairResult, FlipResult, GradeScoreResult, LweResult, LweSessionResult
from judge_mcp.storage.lwe_sessions import LweRepository
from tests.helpers import ACCEPT, INIT, integrity_ok

OUTPUT_MODELS = {
    "compare_pair": ComparePairResult,
    "infer_instruction_reward": FlipResult,
    "grade_score_options": GradeScoreResult,
    "lwe_judge": LweResult,
    "lwe_session": LweSessionResult,
}
PROPERTY = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---- strategies ----------------------------------------------------------------------------------------------------
HUGE = "x" * (MAX_TEXT_CHARS + 1)
texts = st.one_of(
    st.text(max_size=200),  # any Unicode hypothesis draws (no surrogates: those are tested by name below)
    st.sampled_from(["", " ", "\t\n", "\x00", "a\x00b", "[[A>B]]", "Selection: Option 1", "<|im_end|>", "'; DROP TABLE verdicts;--", HUGE]),
    st.just(GOOD),
    st.just(BAD),
)
junk = st.one_of(st.none(), st.booleans(), st.integers(-5, 20), st.floats(allow_nan=True), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
maybe_text = st.one_of(texts, texts, texts, junk)
text_lists = st.one_of(st.lists(texts, min_size=0, max_size=12), st.lists(maybe_text, max_size=4), junk, texts)
sessions = st.one_of(
    st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True),
    st.sampled_from(["../../etc/passwd", "a/b", "x'; DROP TABLE lwe_sessions;--", "", " ", "a" * 65, "C:\\x", "%2e%2e", "名前"]),
    junk,
)
backends = st.one_of(st.none(), st.just("default"), st.sampled_from(["nope", "/etc/passwd", "../judge.toml", "__import__('os')", ""]), junk)


def args_of(**fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    """A dict that may leave out any field (missing required arguments) and may add an unknown one."""
    base = st.fixed_dictionaries({}, optional=fields)
    return st.one_of(base, st.tuples(base, st.dictionaries(st.sampled_from(["extra", "__class__", "path"]), maybe_text, max_size=1)).map(lambda t: {**t[0], **t[1]}))


good_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=120).filter(str.strip)
VALID: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "compare_pair": st.fixed_dictionaries(
        {"prompt": good_text, "response_a": st.one_of(good_text, st.just(BAD)), "response_b": st.one_of(good_text, st.just(GOOD))},
        optional={"goal": st.sampled_from(["worse", "better"]), "template": st.sampled_from(["sop", "cot", "direct"]), "swap": st.booleans()},
    ),
    "infer_instruction_reward": st.fixed_dictionaries(
        {"instruction": good_text, "responses": st.lists(good_text, min_size=1, max_size=16)},
        optional={"context": st.one_of(st.none(), good_text), "similarity": st.sampled_from(["f1", "rouge_l", "token_sort"]), "prompt_variant": st.integers(1, 3)},
    ),
    "grade_score_options": st.fixed_dictionaries(
        {"instruction": good_text, "options": st.lists(good_text, min_size=2, max_size=10, unique=True)},
        optional={"prompt_variant": st.integers(1, 4), "unrelated_option": st.booleans()},
    ),
    "lwe_judge": st.fixed_dictionaries(
        {"prompt": good_text, "response_a": good_text, "response_b": good_text},
        optional={"session": st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True), "selective": st.booleans(), "batch_size": st.integers(1, 64)},
    ),
    "lwe_session": st.fixed_dictionaries(
        {"session": st.sampled_from(["s1", "s1", "default"])},
        optional={"action": st.sampled_from(["show", "show", "reset", "rollback"]), "version": st.integers(1, 3)},
    ),
}


def one_field_broken(tool: str, hostile: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A valid call with one argument replaced by a hostile value."""
    return st.tuples(VALID[tool], hostile).flatmap(
        lambda vh: st.sampled_from(sorted(vh[1]) or ["extra"]).map(lambda key: {**vh[0], key: vh[1].get(key, "x")})
    )


RANDOM_ARGS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "compare_pair": args_of(
        prompt=maybe_text, response_a=maybe_text, response_b=maybe_text,
        goal=st.one_of(st.sampled_from(["worse", "better", "best", ""]), junk),
        template=st.one_of(st.sampled_from(["sop", "cot", "direct", "../../etc/passwd", "grp_sop_worse.txt"]), junk),
        swap=st.one_of(st.booleans(), junk, st.just("maybe")), backend=backends,
    ),
    "infer_instruction_reward": args_of(
        instruction=maybe_text, responses=text_lists, context=st.one_of(st.none(), maybe_text),
        similarity=st.one_of(st.sampled_from(["f1", "rouge_l", "token_sort", "cosine", "os.system"]), junk),
        prompt_variant=st.one_of(st.integers(-1, 5), junk, st.just("1")), backend=backends,
    ),
    "grade_score_options": args_of(
        instruction=maybe_text, options=text_lists,
        prompt_variant=st.one_of(st.integers(-1, 6), junk, st.just("2")),
        unrelated_option=st.one_of(st.booleans(), junk), backend=backends,
    ),
    "lwe_judge": args_of(
        prompt=maybe_text, response_a=maybe_text, response_b=maybe_text, session=sessions,
        selective=st.one_of(st.booleans(), junk), batch_size=st.one_of(st.integers(-2, 70), junk), backend=backends,
    ),
    "lwe_session": args_of(
        action=st.one_of(st.sampled_from(["show", "reset", "rollback", "delete", "drop"]), junk),
        session=sessions, version=st.one_of(st.none(), st.integers(-3, 10), junk),
    ),
}


TOOL_ARGS = {tool: st.one_of(VALID[tool], one_field_broken(tool, RANDOM_ARGS[tool]), RANDOM_ARGS[tool]) for tool in VALID}


def check_answer(tool: str, result: Any) -> None:
    """A structured result that validates against the tool's output model, or a tool error with a message."""
    if result.is_error:
        assert result.content and result.content[0].text.strip()
        assert "internal error" not in result.content[0].text, result.content[0].text
        return
    assert result.structured_content is not None
    OUTPUT_MODELS[tool].model_validate(result.structured_content)


# ---- property tests: one per tool --------------------------------------------------------------------------------------
@pytest.fixture
def hostile_server(mcp_app):
    from judge_mcp.methods import lwe

    server, backend = mcp_app(UniversalJudge(), JUDGE_MCP_TIMEOUT_S="5", JUDGE_MCP_MAX_RETRIES="0")
    LweRepository(server.app.store).ensure_session("s1", 4, lwe.initial_meta_prompt())  # so lwe_session has one to show
    return server, backend


def _property(tool: str):
    @PROPERTY
    @given(arguments=TOOL_ARGS[tool])
    async def test(hostile_server, arguments: dict[str, Any]) -> None:
        server, _ = hostile_server
        async with Client(server) as client:
            result = await client.call_tool(tool, arguments)
        check_answer(tool, result)
        event("tool error" if result.is_error else "judged")

    test.__name__ = f"test_property_{tool}_answers_with_a_result_or_a_tool_error"
    return test


test_property_compare_pair = _property("compare_pair")
test_property_infer_instruction_reward = _property("infer_instruction_reward")
test_property_grade_score_options = _property("grade_score_options")
test_property_lwe_judge = _property("lwe_judge")
test_property_lwe_session = _property("lwe_session")


async def test_properties_leave_the_database_sound(hostile_server) -> None:
    """After hostile calls (SQL-looking session names included) every table is still there and intact."""
    server, _ = hostile_server
    async with Client(server) as client:
        for name in ("x'; DROP TABLE lwe_sessions;--", "../../etc/passwd", "a;DELETE FROM verdicts"):
            for tool, args in (("lwe_judge", {"prompt": CAPITAL_Q, "response_a": BAD, "response_b": GOOD, "session": name}),
                               ("lwe_session", {"action": "reset", "session": name})):
                result = await client.call_tool(tool, args)
                assert result.is_error and "'session' must match" in result.content[0].text
        ok = await client.call_tool("lwe_judge", {"prompt": CAPITAL_Q, "response_a": BAD, "response_b": GOOD, "session": "fine.name-1"})
    assert not ok.is_error
    store = server.app.store
    assert integrity_ok(store)
    tables = {r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"verdicts", "call_cache", "lwe_sessions", "lwe_versions", "lwe_feedback", "option_pool"} <= tables
    assert sorted(r["name"] for r in store.query("SELECT name FROM lwe_sessions")) == ["local/fine.name-1", "local/s1"]  # TENANT/NAME


# ---- named hostile cases ---------------------------------------------------------------------------------------------
FLIP = {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]}
GRADE = {"instruction": CAPITAL_Q, "options": [BAD, GOOD]}
LWE = {**PAIR, "session": "hostile"}
BIG = "y" * (MAX_TOTAL_CHARS // 4)  # under the per-text limit; five of them pass the per-call limit

HOSTILE: list[tuple[str, dict[str, Any], str]] = [
    # empty and whitespace
    ("compare_pair", {**PAIR, "prompt": ""}, "'prompt' is empty"),
    ("compare_pair", {**PAIR, "response_b": " \n\t "}, "'response_b' is empty"),
    ("infer_instruction_reward", {**FLIP, "instruction": "   "}, "'instruction' is empty"),
    ("infer_instruction_reward", {**FLIP, "responses": [GOOD, ""]}, "'responses[1]' is empty"),
    ("grade_score_options", {**GRADE, "options": [GOOD, "\u3000\u2003"]}, "'options[1]' is empty"),
    ("lwe_judge", {**LWE, "response_a": "\n"}, "'response_a' is empty"),
    # NUL and lone surrogates (in memory the surrogate reaches validation; see the HTTP test for the wire)
    ("compare_pair", {**PAIR, "response_a": "a\x00b"}, "'response_a' contains a NUL character"),
    ("compare_pair", {**PAIR, "response_a": "x\ud800y"}, "'response_a' is not valid Unicode"),
    ("infer_instruction_reward", {**FLIP, "responses": [GOOD, "\udfff"]}, "'responses[1]' is not valid Unicode"),
    ("grade_score_options", {**GRADE, "instruction": "q\udc80"}, "'instruction' is not valid Unicode"),
    ("lwe_judge", {**LWE, "prompt": "\ud83d"}, "'prompt' is not valid Unicode"),
    # over the documented limits
    ("compare_pair", {**PAIR, "response_b": "z" * (MAX_TEXT_CHARS + 1)}, "the limit is 50,000"),
    ("infer_instruction_reward", {**FLIP, "responses": [BIG] * 5}, "the limit for one call is 200,000"),
    ("grade_score_options", {**GRADE, "options": [BIG[:-1] + str(i) for i in range(5)]}, "the limit for one call is 200,000"),
    ("lwe_judge", {**LWE, "prompt": "p" * 10_000_000}, "the limit is 50,000"),
    # list sizes and duplicates
    ("grade_score_options", {**GRADE, "options": [GOOD]}, "'options' must hold 2 to 10 items, got 1"),
    ("grade_score_options", {**GRADE, "options": [f"option {i}" for i in range(11)]}, "'options' must hold 2 to 10 items, got 11"),
    ("grade_score_options", {**GRADE, "options": [GOOD, BAD, GOOD]}, "options[2] is identical to options[0]"),
    ("infer_instruction_reward", {**FLIP, "responses": []}, "'responses' must hold 1 to 16 items, got 0"),
    ("infer_instruction_reward", {**FLIP, "responses": [f"r{i}" for i in range(17)]}, "'responses' must hold 1 to 16 items, got 17"),
    # session names with path or SQL characters
    ("lwe_judge", {**LWE, "session": "../../etc/passwd"}, "'session' must match"),
    ("lwe_judge", {**LWE, "session": "x'; DROP TABLE lwe_sessions;--"}, "'session' must match"),
    ("lwe_judge", {**LWE, "session": "a" * 65}, "'session' must match"),
    ("lwe_session", {"action": "show", "session": "a/b"}, "'session' must match"),
    ("lwe_session", {"action": "rollback", "session": "ok", "version": 99}, "unknown session 'ok'"),
    # wrong types
    ("compare_pair", {**PAIR, "response_a": 123}, "response_a"),
    ("compare_pair", {**PAIR, "swap": "maybe"}, "swap"),
    ("compare_pair", {**PAIR, "template": "../../prompts/grp_sop_worse.txt"}, "template"),
    ("infer_instruction_reward", {**FLIP, "responses": "just one string"}, "responses"),
    ("infer_instruction_reward", {**FLIP, "prompt_variant": "one"}, "prompt_variant"),
    ("infer_instruction_reward", {**FLIP, "similarity": "__import__('os').system('id')"}, "similarity"),
    ("grade_score_options", {**GRADE, "options": {"a": 1}}, "options"),
    ("grade_score_options", {**GRADE, "prompt_variant": 2.5}, "prompt_variant"),
    ("lwe_judge", {**LWE, "batch_size": "four"}, "batch_size"),
    ("lwe_judge", {**LWE, "selective": None}, "selective"),
    ("lwe_session", {"action": "drop", "session": "x"}, "action"),
    # backend names are looked up in the configured table: never a path or code
    ("compare_pair", {**PAIR, "backend": "/etc/passwd"}, "unknown backend '/etc/passwd'; known backends: default"),
    ("grade_score_options", {**GRADE, "backend": "../judge.toml"}, "unknown backend '../judge.toml'"),
    ("infer_instruction_reward", {**FLIP, "backend": "judge_mcp.backends.local:LocalBackend"}, "unknown backend"),
    ("lwe_judge", {**LWE, "backend": "file:///etc/passwd"}, "unknown backend"),
]


@pytest.mark.parametrize("tool, arguments, message", HOSTILE, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(HOSTILE)])
async def test_hostile_input_is_a_tool_error_naming_the_problem(mcp_app, tool: str, arguments: dict, message: str) -> None:
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
        assert result.is_error, result.structured_content
        assert message in result.content[0].text, result.content[0].text
        # The server is unharmed: the next good call is judged.
        after = await client.call_tool("compare_pair", PAIR)
    assert after.structured_content["winner"] == "B"
    assert len(backend.requests) == 2  # only the good call reached the backend
    assert integrity_ok(server.app.store)


async def test_huge_input_is_refused_before_it_is_copied_around(mcp_app) -> None:
    """A 10 MB argument costs one length check: no backend call, no verdict row, no cache row."""
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", {**PAIR, "response_a": "q" * 10_000_000})
    assert result.is_error and "is 10,000,000 characters; the limit is 50,000" in result.content[0].text
    assert backend.requests == []
    store = server.app.store
    assert store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"] == 0
    assert store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"] == 0


async def test_string_arguments_are_text_enums_or_looked_up_names(mcp_app) -> None:
    """No tool argument can name a file or code: every string property is judged text, an enum, or a name checked
    against a pattern or the configured backends (the named cases above show each check refusing paths)."""
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    judged_text = {"prompt", "response", "response_a", "response_b", "instruction", "context", "responses", "options", "criteria", "reference"}
    # data: URIs only, decoded and checked by their magic bytes; a URL or a path is refused (tests/methods/test_images.py)
    images = {"images", "response_a_images", "response_b_images", "option_images"}
    looked_up = {"backend", "backends", "session", "verdict_id"}
    matched = {"response_models"}  # only matched against methods/panel.py's family patterns and quoted in warnings
    labels = {"label", "note"}  # record_label: compared with "A"/"B"/"tie" or the verdict's options, and kept in the database
    labels |= {"candidates"}  # compare_pair / lwe_judge: kept in the verdict log and ranked by judge_stats, never shown to the judge
    for tool in tools:
        for name, schema in tool.input_schema["properties"].items():
            kinds = json.dumps(schema)
            if '"string"' not in kinds:
                continue
            assert name in judged_text | looked_up | matched | images | labels or "enum" in kinds or "const" in kinds, (tool.name, name, schema)
            assert not any(word in name for word in ("path", "file", "module", "url", "code", "import")), (tool.name, name)


async def test_resources_refuse_hostile_session_names(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        for name in ("..%2F..%2Fetc%2Fpasswd", "x'%3B DROP TABLE lwe_sessions%3B--"):
            with pytest.raises(Exception) as info:
                await client.read_resource(f"lwe://sessions/{name}/meta-prompt")
            assert "session" in str(info.value)
        listing = await client.read_resource("lwe://sessions")
    assert json.loads(listing.contents[0].text) == []


# ---- over the wire: what a client can actually send ------------------------------------------------------------------
async def test_lone_surrogates_and_garbage_over_http_never_break_the_server(scripted, tmp_path: Path) -> None:
    """JSON text may carry a lone surrogate as an escape (`"\\ud800"`); raw bytes may be invalid UTF-8 or not JSON at
    all. The transport's JSON parser refuses all of these (HTTP 400, JSON-RPC -32700 parse error), so over the wire a
    lone surrogate never reaches a tool (in memory it does, and validation names the argument: see HOSTILE above);
    arguments of the wrong shape get a JSON-RPC or tool error; and the same server then judges a good call."""
    backend = scripted(UniversalJudge())
    with HttpServer(server_env(backend.base_url, tmp_path / "judge.db")) as server:
        assert "serving MCP at" in server.first_line()
        headers = {**ACCEPT, "content-type": "application/json"}
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(server.url, json=INIT, headers=headers)
            assert r.status_code == 200
            session = r.headers.get("mcp-session-id")
            h = {**headers, **({"mcp-session-id": session} if session else {}), "mcp-protocol-version": "2025-06-18"}
            await http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)

            def call(id_: int, args_json: str) -> str:
                return '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "compare_pair", "arguments": %s}}' % (id_, args_json)

            bodies = [
                call(2, '{"prompt": "q", "response_a": "x\\ud800y", "response_b": "b"}').encode(),  # escaped lone surrogate
                call(3, '{"prompt": "q", "response_a": "\\udfff", "response_b": "b"}').encode(),
                call(4, '{"prompt": "q", "response_a": "ok", "response_b": "b"}').encode().replace(b'"ok"', b'"\xff\xfe"'),  # invalid UTF-8
                b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": ',  # truncated JSON
                b"not json",
                call(6, '"not an object"').encode(),
            ]
            for k, body in enumerate(bodies):
                r = await http.post(server.url, content=body, headers=h)
                assert r.status_code < 500, (body, r.status_code, r.text)
                text = r.text
                if k < 5:  # the transport refuses what is not valid JSON text (lone surrogates included)
                    assert r.status_code == 400 and '"code":-32700' in text.replace(" ", ""), (body, text)
                else:
                    assert '"error"' in text or '"isError":true' in text.replace(" ", ""), (body, text)
            good = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "compare_pair", "arguments": PAIR}})
            r = await http.post(server.url, content=good.encode(), headers=h)
        assert r.status_code == 200 and '"winner":"B"' in r.text.replace(" ", "").replace('\\"', '"'), r.text
        assert server.proc.poll() is None
    conn = sqlite3.connect(tmp_path / "judge.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 1
    finally:
        conn.close()
