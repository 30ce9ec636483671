"""A scripted Anthropic Messages server on 127.0.0.1 (`POST /v1/messages`), the twin of tests/scripted.py.

It speaks the real wire format over real HTTP and takes the same `responder(payload) -> Reply | str`; a Reply's
`finish_reason` uses the shared vocabulary ("stop", "length", ...) and is sent as the matching `stop_reason`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.scripted import Reply, Responder

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def message_body(content: str, model: str = "scripted", finish_reason: str = "stop", prompt_tokens: int = 10, completion_tokens: int = 5) -> dict[str, Any]:
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


def error_body(status: int) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": f"scripted {status}"}}


class ScriptedAnthropicServer:
    def __init__(self, responder: Responder):
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
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
                        body = json.dumps(error_body(reply.status)).encode()
                    else:
                        body = json.dumps(
                            message_body(reply.content or "", payload.get("model", "scripted"), reply.finish_reason, reply.prompt_tokens, reply.completion_tokens)
                        ).encode()
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

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        # a short poll interval so that stop() returns at once (the default 0.5 s adds up over many tests)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "ScriptedAnthropicServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def start(self) -> "ScriptedAnthropicServer":
        return self.__enter__()

    def stop(self) -> None:
        self.__exit__()


def start_quick(server: Any) -> Any:
    """Start a tests/scripted.py ScriptedServer with a short poll interval, so its stop() does not wait 0.5 s."""
    server._thread = threading.Thread(target=server._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    return server.start()


def prompt_text(payload: dict[str, Any]) -> str:
    """The system prompt and every message content of a request, joined."""
    parts = [str(payload.get("system") or "")]
    parts += [str(m.get("content", "")) for m in payload.get("messages", [])]
    return "\n".join(p for p in parts if p)
