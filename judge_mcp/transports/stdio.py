"""stdio serving that answers every line: the SDK's stdio transport hands a line it cannot read (not JSON, a lone
surrogate escape, nesting past the parser's limit) to the session as an exception, and the client gets no reply
and waits forever. Here such a line gets a JSON-RPC error: invalid params (-32602) for the request when its id
can be read, else a parse error (-32700) with a null id, as the HTTP transport answers."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("judge_mcp.transports.stdio")
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
# The id of a request whose JSON is too deep to parse: read only from the part before the first nested value, so
# an "id" inside the params is never taken for the request's.
_TOP_ID = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def _offending(exc: Exception) -> str | dict | None:
    """What the SDK could not read: the raw line (invalid JSON) or the decoded message (not JSON-RPC)."""
    if not isinstance(exc, ValidationError):
        return None
    for error in exc.errors():
        value = error.get("input")
        if isinstance(value, str) and error.get("type") == "json_invalid":
            return value
        if isinstance(value, dict) and "jsonrpc" in value:
            return value
    return None


def _request_id(line: str) -> tuple[Any, str | None]:
    """(the request's id or None, why the line is not a message we can serve)."""
    try:
        data = json.loads(line)
    except RecursionError:
        head = re.split(r"[\[{]", line.lstrip()[1:], maxsplit=1)[0] if line.lstrip().startswith("{") else ""
        match = _TOP_ID.search(head)
        return (json.loads(match.group(1)) if match else None), "nested too deeply"
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, "not a JSON-RPC object"
    request_id = _valid_id(data.get("id"))
    if re.search(r"[\ud800-\udfff]", json.dumps(data, ensure_ascii=False)):
        return request_id, "a string holds a lone surrogate escape, which is not valid Unicode"
    return request_id, "not a valid JSON-RPC message"


def _valid_id(value: Any) -> Any:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def error_for(exc: Exception) -> types.JSONRPCError | None:
    """The reply to an unreadable line, or None when there is none to give (a malformed notification, which
    JSON-RPC never answers, or an exception that is not about a line: the SDK handles those)."""
    offending = _offending(exc)
    if offending is None:
        return None
    if isinstance(offending, dict):  # JSON, but not a JSON-RPC message the SDK knows
        request_id = _valid_id(offending.get("id"))
        if request_id is None:
            return None
        code, message = INVALID_REQUEST, "Invalid Request: not a valid JSON-RPC request"
    else:
        request_id, why = _request_id(offending)
        if request_id is None:
            code, message = PARSE_ERROR, f"Parse error: {why or 'the line is not JSON'}"
        else:
            code, message = INVALID_PARAMS, f"Invalid params: {why}"
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


async def serve_stdio(server: MCPServer) -> None:
    """`server.run_stdio_async()`, with every unreadable line answered (see the module docstring)."""
    lowlevel = server._lowlevel_server  # as MCPServer.run_stdio_async does
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with send:
                async for item in read_stream:
                    reply = error_for(item) if isinstance(item, Exception) else None
                    if reply is None:
                        await send.send(item)
                        continue
                    log.warning("answered an unreadable stdin line with JSON-RPC error %s", reply.error.code)
                    await write_stream.send(SessionMessage(reply))

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()
