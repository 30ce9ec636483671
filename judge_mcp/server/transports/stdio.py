"""stdio serving that answers every line: the SDK's stdio transport hands a line it cannot read (not JSON, a lone
surrogate escape, nesting past the parser's limit) to the session as an exception, and the client gets no reply
and waits forever. Here such a line gets a JSON-RPC error: invalid params (-32602) for the request when its id
can be read, else a parse error (-32700) with a null id, as the HTTP transport answers.

JSON that is not a request gets JSON-RPC 2.0's Invalid Request (-32600) with a null id before the SDK sees it:
`{}`, `[]`, `42`, a batch (MCP has none), and a request whose id is not a string or an integer (an object, `1.5`,
`true`, `null`), which the SDK would otherwise read as a notification and never answer. A line with a method and
no id is a notification: never answered, whatever else is wrong with it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from io import TextIOWrapper
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("judge_mcp.transports.stdio")
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
TERMINAL_NOTE = ("judge-mcp: serving MCP over stdio: waiting for an MCP client's JSON-RPC lines on stdin (clients start this "
                 "command themselves; to try the tools by hand, run the demo command instead). Ctrl-C stops it.")
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


def invalid_request(line: str) -> types.JSONRPCError | None:
    """The Invalid Request reply to a line that is JSON but not a JSON-RPC request, notification or response, or
    None (a good line, or one the SDK's reader answers through error_for)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None  # not JSON: a parse error, answered through error_for
    if isinstance(data, list):
        why = "a batch (MCP has no batches)" if data else "an empty array"
    elif not isinstance(data, dict):
        why = f"a JSON {type(data).__name__ if data is not None else 'null'}, not a request object"
    elif "method" in data and "id" not in data:
        return None  # a notification: JSON-RPC never answers one
    elif "id" in data and _valid_id(data["id"]) is None:
        why = f"the id must be a string or an integer, got {json.dumps(data['id'])[:40]}"
    elif "id" not in data:
        why = "an object with neither a method nor an id"
    else:
        return None
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: {why}"))


class _ScreenedLines:
    """stdin's lines for the SDK's reader, less those `invalid_request` answers (their replies go to `replies`)."""

    def __init__(self, source: Any, replies: Any) -> None:
        self.source, self.replies = source, replies

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self.source:
            reply = invalid_request(line) if line.strip() else None
            if reply is None:
                yield line
            else:
                await self.replies.send(reply)


@asynccontextmanager
async def _stdin_lines() -> AsyncIterator[Any]:
    """The process's stdin as the SDK's stdio_server reads it: fd 0 claimed (pointed at the null device while
    serving, so nothing else reads the wire) through the SDK's own helper when it has one."""
    try:
        # lazy: the SDK's stdio internals load only for a stdio server
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _UnownedTextWrapper
    except ImportError:  # another SDK layout: read stdin in place
        yield anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        return
    buffer, restore = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    try:
        piped = await _PipeLines.open(buffer)
        if piped is None:
            yield anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8", errors="replace"))
        else:
            try:
                yield piped
            finally:
                piped.close()
    finally:
        if restore is not None:
            restore()


class _PipeLines:
    """stdin's lines read by the event loop itself where stdin is a pipe or a socket (what an MCP client gives its
    server) or a terminal: no worker-thread trip per line (~0.05 ms of CPU each; perf/call_cpu.py). UTF-8 with bad
    bytes replaced and a line's CRLF read as LF, as the SDK's text reader does; a line ends at LF only (inside a
    JSON-RPC message a raw CR can only be whitespace). The last line needs no LF. Anything else (a file, the null
    device) is read by the SDK's reader in a thread."""

    LIMIT = 1 << 30  # bytes of one line held before its LF (a line is the client's one message: no cap of our own)

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport, fd: int, blocking: bool) -> None:
        self._reader, self._transport, self._fd, self._blocking = reader, transport, fd, blocking

    @classmethod
    async def open(cls, buffer: Any) -> _PipeLines | None:
        if sys.platform == "win32":  # pragma: no cover - the proactor loop reads overlapped handles only
            return None
        try:
            fd = buffer.fileno()
            mode = os.fstat(fd).st_mode
            # a terminal too (a person who started `serve` by hand): read by the loop, Ctrl-C stops the server at
            # once, where a worker thread blocked in read() held the first Ctrl-C until Enter
            if not stat.S_ISFIFO(mode) and not stat.S_ISSOCK(mode) and not (stat.S_ISCHR(mode) and os.isatty(fd)):
                return None
            blocking = os.get_blocking(fd)
            own = os.dup(fd)  # the transport closes its own descriptor, never the claimed one
        except (AttributeError, OSError, ValueError):
            return None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=cls.LIMIT, loop=loop)
        try:
            transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(own, "rb", buffering=0))
        except (OSError, ValueError):
            os.close(own)
            return None
        return cls(reader, transport, fd, blocking)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            try:
                raw = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # end of input: the last line may lack its LF
                if exc.partial:
                    yield exc.partial.decode("utf-8", errors="replace")
                return
            if raw.endswith(b"\r\n"):
                raw = raw[:-2] + b"\n"
            yield raw.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._transport.close()
        with suppress(OSError):
            os.set_blocking(self._fd, self._blocking)  # the loop made the pipe non-blocking; fd 0 gets it back as it was


class _OneTripWriter:
    """stdout as the SDK's stdio_server writes it (`await write(line)`, then `await flush()`), in one worker-thread
    trip per message instead of two: `write` writes and flushes the line in the thread (so a client that stops
    reading blocks that thread, never the event loop), and `flush` has nothing left to do. A thread trip costs
    ~0.05 ms of CPU (perf/call_cpu.py); every answer over stdio made two."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def _write_line(self, text: str) -> None:
        self._file.write(text)
        self._file.flush()

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._write_line, text)

    async def flush(self) -> None:
        """Written and flushed by `write` already."""


@asynccontextmanager
async def _stdout_writer() -> AsyncIterator[Any]:
    """The process's stdout as the SDK's stdio_server writes it: fd 1 claimed (pointed at stderr while serving, so
    stray output misses the wire) through the SDK's own helper when it has one, written in one trip per message."""
    try:
        # lazy: the SDK's stdio internals load only for a stdio server
        from mcp.server.stdio import _claim_fd, _open_stdout_diversion, _UnownedTextWrapper
    except ImportError:  # another SDK layout: write stdout in place
        yield _OneTripWriter(sys.stdout)
        return
    buffer, restore = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
    try:
        yield _OneTripWriter(_UnownedTextWrapper(buffer, encoding="utf-8"))
    finally:
        if restore is not None:
            restore()


def _warm_up(on_initialized: Callable[[], object]) -> None:
    try:
        on_initialized()
    except Exception:  # a warm-up that fails leaves the work to the first call, which reports what is wrong
        log.warning("the warm-up after the handshake failed", exc_info=True)


def _is_initialized(item: SessionMessage) -> bool:
    message = item.message
    return isinstance(message, types.JSONRPCNotification) and message.method == "notifications/initialized"


async def serve_stdio(server: MCPServer, on_initialized: Callable[[], object] | None = None) -> None:
    """`server.run_stdio_async()`, with every unreadable line answered (see the module docstring). `on_initialized`
    runs once the client has finished the handshake (its `notifications/initialized`), as the server's warm-up."""
    lowlevel = server._lowlevel_server  # as MCPServer.run_stdio_async does
    if sys.stdin is not None and sys.stdin.isatty():  # started by hand: say what it waits for, or it looks hung
        print(TERMINAL_NOTE, file=sys.stderr, flush=True)
    screened_send, screened_receive = anyio.create_memory_object_stream[types.JSONRPCError](16)
    async with (
        _stdin_lines() as stdin,
        _stdout_writer() as stdout,
        stdio_server(stdin=cast(Any, _ScreenedLines(stdin, screened_send)), stdout=stdout) as (read_stream, write_stream),
    ):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with send:
                async for item in read_stream:
                    reply = error_for(item) if isinstance(item, Exception) else None
                    if reply is None:
                        await send.send(item)
                        if on_initialized is not None and not isinstance(item, Exception) and _is_initialized(item):
                            _warm_up(on_initialized)
                        continue
                    log.warning("answered an unreadable stdin line with JSON-RPC error %s", reply.error.code)
                    await write_stream.send(SessionMessage(reply))

        async def answer_screened() -> None:
            async for reply in screened_receive:
                log.warning("answered a stdin line that is not a JSON-RPC request with error %s", reply.error.code)
                await write_stream.send(SessionMessage(reply))

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            tg.start_soon(answer_screened)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()
