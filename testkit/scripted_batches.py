"""Scripted batch APIs on 127.0.0.1 for tests: OpenAI's Batch API (`ScriptedOpenAIBatches`: file upload, batches,
output and error files) and Anthropic's Message Batches (`ScriptedAnthropicBatches`: batches and their results_url),
speaking the real wire formats over real HTTP.

Each request in a batch is answered by `responder(body)` (the same responders as the chat servers in scripted.py:
a string is the answer text). Scripting beyond that:
- `request_error(body) -> str | None`: this request errors in this batch ("server" = a 500 / api_error, worth
  sending again; "invalid" = a 400 / invalid_request_error);
- `batch_outcome(n) -> str`: how the n-th batch (from 0) ends: "completed" (default), "expired", "failed";
- `polls_to_end`: status polls a batch answers "in progress" before it ends; `hold` keeps every batch in progress;
- `finished_before_expiry`: how many of an expired OpenAI batch's requests were answered (in its output file).
`log` records every HTTP request as (method, path); `batches` each batch's id and custom ids, in submission order.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from testkit.scripted_servers import Reply, _DeepBacklogServer, chat_body, message_body


@dataclass
class _Batch:
    id: str
    requests: list[dict[str, Any]]  # {"custom_id", "body"}
    outcome: str = "completed"
    polls: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)


def multipart_file(content_type: str, raw: bytes) -> bytes:
    """The `file` part of a multipart/form-data body."""
    boundary = content_type.split("boundary=", 1)[1].strip().strip('"').encode()
    for part in raw.split(b"--" + boundary):
        head, _, content = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return content[:-2] if content.endswith(b"\r\n") else content
    raise ValueError("no file part")


class _ScriptedBatches:
    def __init__(self, responder: Callable[[dict[str, Any]], Any], *, polls_to_end: int = 1):
        self.responder = responder
        self.request_error: Callable[[dict[str, Any]], str | None] = lambda body: None
        self.batch_outcome: Callable[[int], str] = lambda n: "completed"
        self.polls_to_end = polls_to_end
        self.hold = False
        self.finished_before_expiry = 0
        self.log: list[tuple[str, str]] = []
        self.batches: list[_Batch] = []
        self.files: dict[str, bytes] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def _serve(self, method: str) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                with server._lock:
                    server.log.append((method, self.path))
                    status, body, kind = server.route(method, self.path, dict(self.headers), raw)
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = _DeepBacklogServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "_ScriptedBatches":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # ---- shared ---------------------------------------------------------------------------------------------------
    def submitted(self) -> list[list[str]]:
        """Each batch's custom ids, in submission order."""
        return [[r["custom_id"] for r in b.requests] for b in self.batches]

    def posts(self) -> list[str]:
        return [path for method, path in self.log if method == "POST"]

    def new_batch(self, prefix: str, requests: list[dict[str, Any]]) -> _Batch:
        batch = _Batch(f"{prefix}{len(self.batches):04d}", requests, self.batch_outcome(len(self.batches)))
        self.batches.append(batch)
        return batch

    def find(self, batch_id: str) -> _Batch | None:
        return next((b for b in self.batches if b.id == batch_id), None)

    def poll(self, batch: _Batch) -> bool:
        """Count one status poll; whether the batch has ended (its results made once, when it ends)."""
        batch.polls += 1
        ended = not self.hold and batch.polls > self.polls_to_end
        if ended and not batch.results and batch.outcome in ("completed", "expired"):
            done = batch.requests if batch.outcome == "completed" else batch.requests[: self.finished_before_expiry]
            batch.results = [self.answer(r["custom_id"], r["body"]) for r in done]
        return ended

    def text(self, body: dict[str, Any]) -> str:
        reply = self.responder(body)
        return reply.content or "" if isinstance(reply, Reply) else str(reply)

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, bytes, str]:
        raise NotImplementedError

    def answer(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def _json(status: int, body: Any) -> tuple[int, bytes, str]:
    return status, json.dumps(body).encode(), "application/json"


class ScriptedOpenAIBatches(_ScriptedBatches):
    """OpenAI's Batch API under `base_url` (ending in /v1, as for chat completions)."""

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, bytes, str]:
        parts = path.split("/")  # "", "v1", ...
        if method == "POST" and path == "/v1/files":
            content_type = next(v for k, v in headers.items() if k.lower() == "content-type")
            file_id = f"file-{len(self.files):04d}"
            self.files[file_id] = multipart_file(content_type, raw)
            return _json(200, {"id": file_id, "object": "file", "purpose": "batch", "bytes": len(self.files[file_id])})
        if method == "POST" and path == "/v1/batches":
            created = json.loads(raw)
            assert created["endpoint"] == "/v1/chat/completions" and created["completion_window"] == "24h", created
            lines = [json.loads(line) for line in self.files[created["input_file_id"]].splitlines() if line.strip()]
            assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" for line in lines)
            made = self.new_batch("batch_", [{"custom_id": line["custom_id"], "body": line["body"]} for line in lines])
            return _json(200, self.batch_object(made, "validating"))
        if method == "GET" and len(parts) == 4 and parts[2] == "batches":
            batch = self.find(parts[3])
            if batch is None:
                return _json(404, {"error": {"message": "No such batch", "type": "invalid_request_error"}})
            return _json(200, self.batch_object(batch, batch.outcome if self.poll(batch) else "in_progress"))
        if method == "GET" and len(parts) == 5 and parts[2] == "files" and parts[4] == "content":
            return 200, self.files[parts[3]], "application/jsonl"
        return _json(404, {"error": {"message": f"no route {method} {path}"}})

    def batch_object(self, batch: _Batch, status: str) -> dict[str, Any]:
        out: dict[str, Any] = {"id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "status": status,
                               "completion_window": "24h", "output_file_id": None, "error_file_id": None,
                               "request_counts": {"total": len(batch.requests), "completed": 0, "failed": 0}}
        if status in ("completed", "expired") and batch.results:
            good = [r for r in batch.results if r["response"] and r["response"]["status_code"] == 200]
            bad = [r for r in batch.results if r not in good]
            for key, rows in (("output_file_id", good), ("error_file_id", bad)):
                if rows:
                    file_id = f"file-{batch.id}-{key[:3]}"
                    self.files[file_id] = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
                    out[key] = file_id
        if status == "failed":
            out["errors"] = {"object": "list", "data": [{"code": "invalid_file", "message": "scripted failure"}]}
        return out

    def answer(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        error = self.request_error(body)
        if error is not None:
            status = 500 if error == "server" else 400
            response = {"status_code": status, "request_id": "req_x", "body": {"error": {"message": f"scripted {error}", "type": error}}}
        else:
            response = {"status_code": 200, "request_id": "req_x", "body": chat_body(self.text(body), body.get("model", "scripted"))}
        return {"id": f"batch_req_{custom_id[:8]}", "custom_id": custom_id, "response": response, "error": None}


class ScriptedAnthropicBatches(_ScriptedBatches):
    """Anthropic's Message Batches under `base_url` (the API root, as for the Messages API)."""

    @property
    def base_url(self) -> str:
        return self.root

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, bytes, str]:
        parts = path.split("/")  # "", "v1", "messages", "batches", id, "results"
        if method == "POST" and path == "/v1/messages/batches":
            created = json.loads(raw)
            made = self.new_batch("msgbatch_", [{"custom_id": r["custom_id"], "body": r["params"]} for r in created["requests"]])
            return _json(200, self.batch_object(made, "in_progress"))
        if method == "GET" and len(parts) == 5 and parts[3] == "batches":
            batch = self.find(parts[4])
            if batch is None:
                return _json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such batch"}})
            return _json(200, self.batch_object(batch, "ended" if self.poll(batch) else "in_progress"))
        if method == "GET" and len(parts) == 6 and parts[5] == "results":
            ended = self.find(parts[4])
            assert ended is not None
            answered = {r["custom_id"] for r in ended.results}
            lines = ended.results + [self.lost(r["custom_id"], ended.outcome) for r in ended.requests if r["custom_id"] not in answered]
            return 200, b"".join(json.dumps(r).encode() + b"\n" for r in lines), "application/binary"
        return _json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {method} {path}"}})

    def batch_object(self, batch: _Batch, status: str) -> dict[str, Any]:
        ended = status == "ended"
        return {"id": batch.id, "type": "message_batch", "processing_status": status,
                "request_counts": {"processing": 0 if ended else len(batch.requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
                "results_url": f"{self.root}/v1/messages/batches/{batch.id}/results" if ended else None}

    @staticmethod
    def lost(custom_id: str, outcome: str) -> dict[str, Any]:
        """A request of a batch that ended without answering it (expired at 24 hours, or canceled)."""
        return {"custom_id": custom_id, "result": {"type": "canceled" if outcome == "canceled" else "expired"}}

    def answer(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        error = self.request_error(body)
        if error is not None:
            kind = "api_error" if error == "server" else "invalid_request_error"
            return {"custom_id": custom_id, "result": {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": f"scripted {error}"}}}}
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message_body(self.text(body), body.get("model", "scripted"))}}
