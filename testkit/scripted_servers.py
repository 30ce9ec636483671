"""Scripted model servers on 127.0.0.1 for tests and benchmarks: the OpenAI-compatible chat-completions server
(`ScriptedServer`) and its Anthropic Messages twin (`ScriptedAnthropicServer`, `POST /v1/messages`).

They speak the real wire formats over real HTTP. A `responder(payload) -> Reply | str` decides each answer: a plain
string becomes the assistant message's content; a `Reply` can set status, headers, a raw body, a delay (to simulate
latency or a hang) or drop the connection. Who answers what is in testkit/scripted_judges.py.

Benchmarks run the server in a process of its own (`ExternalScripted`, which starts `python -m
testkit.scripted_servers`), so that it does not share the measured process's GIL.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _DeepBacklogServer(ThreadingHTTPServer):
    """A listen backlog deep enough for a benchmark's burst of connections (the default of 5 made clients wait
    for SYN retries, so the test server, not the code under test, set the pace)."""

    request_queue_size = 1024


@dataclass
class Reply:
    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: bytes | None = None  # sent as is (truncated or invalid JSON)
    delay_s: float = 0.0
    drop: bool = False  # close the connection without answering
    finish_reason: str = "stop"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    logprobs: list[dict[str, Any]] | None = None  # choices[0].logprobs.content, sent as given
    # More keys of the reply's usage block, sent as given: e.g. OpenAI's {"prompt_tokens_details": {"cached_tokens":
    # 6}, "completion_tokens_details": {"reasoning_tokens": 3}}, Anthropic's {"cache_read_input_tokens": 90}
    usage: dict[str, Any] | None = None
    # More keys of the reply's message (OpenAI: e.g. {"reasoning_content": "..."}), and content blocks before the text
    # block (Anthropic: e.g. [{"type": "thinking", "thinking": "...", "signature": "..."}]), sent as given
    message: dict[str, Any] | None = None
    blocks: list[dict[str, Any]] | None = None


Responder = Callable[[dict[str, Any]], "Reply | str"]


def chat_body(content: str, model: str = "scripted", finish_reason: str = "stop", prompt_tokens: int = 10, completion_tokens: int = 5,
              logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }
    if logprobs is not None:
        body["choices"][0]["logprobs"] = {"content": logprobs}
    return body


class ScriptedServer:
    """OpenAI chat completions. Subclasses change `base_path`, `success_body` and `error_body` for other wire formats."""

    base_path = "/v1"

    def success_body(self, reply: Reply, payload: dict[str, Any]) -> dict[str, Any]:
        body = chat_body(reply.content or "", payload.get("model", "scripted"), reply.finish_reason, reply.prompt_tokens,
                         reply.completion_tokens, reply.logprobs)
        body["usage"].update(reply.usage or {})
        body["choices"][0]["message"].update(reply.message or {})
        return body

    def error_body(self, status: int) -> dict[str, Any]:
        return {"error": {"message": f"scripted {status}"}}

    def __init__(self, responder: Responder):
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections: set[tuple[str, int]] = set()  # client (host, port) pairs: one per TCP connection used
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.connections.add(self.client_address)
                    server.requests.append(payload)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.paths.append(self.path)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server.responder(payload)
                    if isinstance(reply, str):
                        reply = Reply(content=reply)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    if reply.drop:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if reply.raw_body is not None:
                        body = reply.raw_body
                    elif reply.status >= 400:
                        body = json.dumps(server.error_body(reply.status)).encode()
                    else:
                        body = json.dumps(server.success_body(reply, payload)).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

        self._httpd = _DeepBacklogServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}{self.base_path}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def start(self) -> "ScriptedServer":
        return self.__enter__()

    def stop(self) -> None:
        self.__exit__()


def content_text(content: Any) -> str:
    """A message's text: its content, or the text of its content parts (a message with images)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content if content is not None else "")


def prompt_text(payload: dict[str, Any]) -> str:
    """All message contents of a request, joined (what a responder usually inspects)."""
    return "\n".join(content_text(m.get("content", "")) for m in payload.get("messages", []))


# ---- the Anthropic Messages wire format -----------------------------------------------------------------------------
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def message_body(content: str, model: str = "scripted", finish_reason: str = "stop", prompt_tokens: int = 10,
                 completion_tokens: int = 5) -> dict[str, Any]:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": content}],
        "stop_reason": STOP_REASONS.get(finish_reason, finish_reason),
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
    }


def anthropic_error_body(status: int) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": f"scripted {status}"}}


class ScriptedAnthropicServer(ScriptedServer):
    """`POST {base_url}/v1/messages`; the request path is recorded in `paths`. A Reply's `finish_reason` uses the shared
    vocabulary ("stop", "length", ...) and is sent as the matching `stop_reason`."""

    base_path = ""

    def success_body(self, reply: Reply, payload: dict[str, Any]) -> dict[str, Any]:
        body = message_body(reply.content or "", payload.get("model", "scripted"), reply.finish_reason, reply.prompt_tokens,
                            reply.completion_tokens)
        body["usage"].update(reply.usage or {})
        body["content"][:0] = reply.blocks or []
        return body

    def error_body(self, status: int) -> dict[str, Any]:
        return anthropic_error_body(status)


# ---- a server in a process of its own (benchmarks) ----------------------------------------------------------------------
async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head, body) of the next HTTP/1.1 request on `reader` (the body read by its content-length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length) if length else b""


async def serve_fixed(answer: str, delay_s: float, ready: Callable[[str], None]) -> None:
    """The standalone server benchmarks run in a process of their own: every request gets `answer` after `delay_s`.
    One asyncio loop instead of a thread per connection, so at 64 connections the test server spends ~0.1 ms of CPU
    per request and is not what a benchmark measures; the same wire format as ScriptedServer."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                _, raw = await read_request(reader)
                payload = json.loads(raw or b"{}")
                if delay_s:
                    await asyncio.sleep(delay_s)
                body = json.dumps(chat_body(answer, payload.get("model", "scripted"))).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    ready(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
    async with server:
        await server.serve_forever()


class ExternalScripted:
    """A scripted OpenAI-compatible server in a process of its own (`python -m testkit.scripted_servers`), answering every
    request with `answer` after `latency` seconds: by default the asyncio server (`serve_fixed`), with `threaded` the
    thread-per-connection ScriptedServer the tests use. `base_url` is its URL; `proc` its process (for its CPU time)."""

    threaded = False  # perf/ratios.py --threaded-backend sets it for every server a run starts

    def __init__(self, answer: str, latency: float):
        args = [sys.executable, "-m", "testkit.scripted_servers", "--answer", answer, "--delay", str(latency)]
        here = Path(__file__).resolve().parents[1]  # the checkout testkit/ sits in: the server runs its code
        self.proc = subprocess.Popen(args + (["--threaded"] if self.threaded else []), stdout=subprocess.PIPE, text=True, cwd=here)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()

    def __enter__(self) -> "ExternalScripted":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main() -> None:
    """A standalone scripted server (what ExternalScripted runs): prints its base URL, then serves until killed."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--answer", default='{"verdict": "[[A>B]]"}')
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument("--threaded", action="store_true", help="the thread-per-connection ScriptedServer (as the tests use it)")
    args = parser.parse_args()
    if args.threaded:
        with ScriptedServer(lambda p: Reply(content=args.answer, delay_s=args.delay)) as s:
            print(s.base_url, flush=True)
            threading.Event().wait()
    else:
        asyncio.run(serve_fixed(args.answer, args.delay, lambda url: print(url, flush=True)))


if __name__ == "__main__":
    main()
