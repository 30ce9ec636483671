"""The MCP server through the official client, the same body over every transport (the `connect` fixture: in memory,
over stdio, over streamable HTTP with a bearer token): tools listed with their schemas, a verdict with progress and
its verdict-log row, bad input named, backend failures and timeouts reported, no key in the database. Then what only
one transport has: a clean stdio shutdown, HTTP's bearer token, and no HTTP on a public address without one."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from testkit.scripted_servers import Reply
from testkit.scripted_judges import GOOD, PAIR, correct_judge, first_shown_judge
from testkit.server_process import HttpServer, server_env
from tests.helpers import ACCEPT, INIT, token_client

TOOLS = {"compare_pair", "infer_instruction_reward", "grade_score_options", "lwe_judge", "lwe_session"}


async def test_tools_are_listed_with_output_schemas_and_annotations(connect) -> None:
    async with connect(correct_judge) as judged:
        tools = {t.name: t for t in (await judged.client.list_tools()).tools}
    assert TOOLS <= set(tools)
    schema = tools["compare_pair"].output_schema
    assert {"winner", "consistent", "trials", "goal", "template", "model", "usage"} <= set(schema["properties"])
    assert tools["compare_pair"].annotations.open_world_hint is True
    assert tools["compare_pair"].input_schema["properties"]["goal"]["default"] == "worse"


async def test_compare_pair_with_progress_and_verdict_log(connect) -> None:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async with connect(correct_judge) as judged:
        result = await judged.client.call_tool("compare_pair", PAIR, progress_callback=on_progress)
    assert not result.is_error
    data = result.structured_content
    assert data["winner"] == "B" and data["consistent"] is True
    assert data["model"] == "openai/scripted-model"
    assert data["usage"]["calls"] == 2 and data["usage"]["cached_calls"] == 0
    assert sorted(progress) == [(1, 2), (2, 2)]
    rows = judged.verdicts("compare_pair")
    assert len(rows) == 1 and rows[0]["output"]["winner"] == "B" and rows[0]["inputs"]["response_b"] == GOOD
    assert len(rows[0]["calls"]) == 2 and rows[0]["calls"][0]["request"]["temperature"] == 0


async def test_position_biased_backend_gives_null_winner(connect) -> None:
    async with connect(first_shown_judge) as judged:
        data = (await judged.client.call_tool("compare_pair", PAIR)).structured_content
    assert data["winner"] is None and data["consistent"] is False


BAD_INPUT = [
    ({**PAIR, "prompt": ""}, "'prompt' is empty"),
    ({**PAIR, "response_a": "x" * 60_001}, "limit is 50,000"),
    ({**PAIR, "backend": "nope"}, "unknown backend 'nope'; known backends: default"),
    ({**PAIR, "goal": "best"}, "goal"),
    ({"prompt": "q", "response_a": "a"}, "response_b"),
    ({**PAIR, "swap": "maybe"}, "swap"),
]


async def test_bad_input_is_a_tool_error_naming_the_problem(connect) -> None:
    async with connect(correct_judge) as judged:
        results = [await judged.client.call_tool("compare_pair", arguments) for arguments, _ in BAD_INPUT]
    for result, (arguments, message) in zip(results, BAD_INPUT):
        assert result.is_error, arguments
        assert message in result.content[0].text, (message, result.content[0].text)
    assert judged.backend.requests == []


async def test_failing_backend_is_retried_then_reported(connect) -> None:
    async with connect(lambda p: Reply(status=500), JUDGE_MCP_MAX_RETRIES="1") as judged:
        result = await judged.client.call_tool("compare_pair", {**PAIR, "swap": False})
    assert result.is_error
    text = result.content[0].text
    assert "backend 'default' (openai at http://127.0.0.1:" in text and "/v1, model scripted-model) failed after 2 attempts" in text
    assert "HTTP 500" in text
    assert len(judged.backend.requests) == 2


async def test_hanging_backend_is_cut_at_timeout(connect) -> None:
    async with connect(lambda p: Reply(content="late", delay_s=5), JUDGE_MCP_TIMEOUT_S="0.3", JUDGE_MCP_MAX_RETRIES="0") as judged:
        result = await judged.client.call_tool("compare_pair", {**PAIR, "swap": False})
    assert result.is_error and "timed out after 0.3s" in result.content[0].text  # not the backend's late answer


async def test_api_key_never_reaches_the_database(connect, tmp_path: Path) -> None:
    secret = "sk-test-SECRET-7c1f9a"
    async with connect(correct_judge, JUDGE_MCP_API_KEY=secret) as judged:
        assert not (await judged.client.call_tool("compare_pair", PAIR)).is_error
    assert judged.backend.headers[0]["authorization"] == f"Bearer {secret}"
    files = list(tmp_path.glob("judge.db*"))
    assert files and any(b"compare_pair" in path.read_bytes() for path in files)  # the verdict did reach the files...
    for path in files:
        assert secret.encode() not in path.read_bytes(), path  # ...the key did not


# ---- what one transport alone has ---------------------------------------------------------------------------------
async def test_stdio_server_shuts_down_cleanly_when_its_client_leaves(scripted, tmp_path: Path) -> None:
    backend = scripted(correct_judge)
    env = server_env(backend.base_url, tmp_path / "judge.db")
    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=env)
    with open(tmp_path / "stderr.txt", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            result = await client.call_tool("compare_pair", PAIR)
    assert not result.is_error and result.structured_content["winner"] == "B"
    # The server shut down cleanly when the client closed its stdin: its HTTP sessions and store closed, nothing
    # left for the collector to complain about on the client's log.
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Unclosed" not in stderr and "Traceback" not in stderr, stderr


async def test_http_transport_requires_the_bearer_token(scripted, tmp_path: Path) -> None:
    token = "test-token-0123456789"
    backend = scripted(correct_judge)
    with HttpServer(server_env(backend.base_url, tmp_path / "judge.db", JUDGE_MCP_HTTP_TOKEN=token)) as server:
        assert "serving MCP at" in server.first_line()
        async with httpx.AsyncClient() as http:
            missing = await http.post(server.url, json=INIT, headers=ACCEPT)
            wrong = await http.post(server.url, json=INIT, headers={**ACCEPT, "authorization": "Bearer nope"})
        assert missing.status_code == 401 and wrong.status_code == 401
        assert "Bearer" in missing.headers["www-authenticate"]
        # The official client with the token gets through.
        http2, client = token_client(server.url, token)
        async with http2, client:
            result = await client.call_tool("compare_pair", PAIR)
    assert not result.is_error and result.structured_content["winner"] == "B"


def test_http_refuses_non_loopback_bind_without_token(tmp_path: Path) -> None:
    with HttpServer(server_env("http://127.0.0.1:9/v1", tmp_path / "judge.db"), host="0.0.0.0") as server:
        assert server.proc.wait(timeout=30) != 0
        stderr = server.proc.stderr.read()
    assert "refusing to serve HTTP on non-loopback address '0.0.0.0' without JUDGE_MCP_HTTP_TOKEN" in stderr
