"""The providers' batch APIs on the wire: OpenAI's Batch API and Anthropic's Message Batches.

OpenAI: the requests as a JSONL file (`{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}` per
line) uploaded to `POST {base}/files` (multipart, purpose "batch"); `POST {base}/batches` (input_file_id, endpoint
"/v1/chat/completions", completion_window "24h"); `GET {base}/batches/{id}` until its status is completed, failed,
expired or cancelled; then `GET {base}/files/{id}/content` of its output and error files, one line per request
(`custom_id`, `response.status_code`, `response.body`, or `error`).

Anthropic: `POST {base}/v1/messages/batches` with `requests: [{custom_id, params}]`; `GET .../batches/{id}` until
`processing_status` is "ended"; then its `results_url` (JSONL; `result.type` succeeded / errored / canceled /
expired). The request bodies are exactly what the backend sends one at a time (its `payload`).

Each request's outcome is an `Outcome`: an answer body ("ok"), a failure worth sending again ("retry": a server
error, a rate limit, a line missing from the results) or one that would fail again ("fail": an invalid request, an
expired or canceled request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import aiohttp
import anyio

from judge_mcp.backends.anthropic import AnthropicBackend, messages_url, parse_message
from judge_mcp.backends.base import ChatRequest, Completion
from judge_mcp.backends.client import HTTPBackend, RETRYABLE_STATUS, classify_status, read_capped, secrets_in
from judge_mcp.backends.request_body import encode_json
from judge_mcp.backends.errors import FatalError, RetryableError
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from judge_mcp.backends.openai_wire import parse_chat_completion
from judge_mcp.redaction import contains, redact, redact_tree

RESULTS_MAX_BYTES = 1024 * 1024 * 1024  # an output file of 50,000 answers is tens of megabytes; past this it is refused
TRANSFER_S = 600.0  # an upload of up to 190 MB, or a download of a batch's results, may take this long
CHAT_ENDPOINT = "/v1/chat/completions"


class Outcome(NamedTuple):
    kind: str  # "ok" | "retry" | "fail"
    body: dict[str, Any] | None = None  # the answer body, for "ok"
    cause: str = ""  # why not, for "retry" and "fail"


@dataclass(frozen=True)
class Status:
    ended: bool  # the provider has finished with the batch (answers, errors or not)
    usable: bool  # its results can be read (False: failed, expired or cancelled as a whole)
    state: str  # the provider's word for it
    detail: str = ""  # why it failed, when it did
    partial: bool = False  # not usable, but the answers it finished can be read (OpenAI: an expired or cancelled batch)


async def _call(backend: HTTPBackend, method: str, url: str, headers: dict[str, str], *, limit_s: float | None = None, **kw: Any) -> bytes:
    """One control-plane request (create, poll, download) within `limit_s` (default: the backend's attempt limit), its
    failures classified as RetryableError or FatalError with the credentials blanked out."""
    secrets = secrets_in(headers)
    try:
        with anyio.fail_after(limit_s or backend.attempt_limit_s):
            async with backend.session().request(method, url, headers=headers, allow_redirects=False, proxy=backend._proxy, **kw) as response:
                raw = await read_capped(response, RESULTS_MAX_BYTES)
                status, reply_headers = response.status, response.headers
    except TimeoutError:
        raise RetryableError(f"{method} {url} timed out after {limit_s or backend.attempt_limit_s:g}s") from None
    except aiohttp.ClientError as exc:
        raise RetryableError(redact(f"connection error ({type(exc).__name__}: {exc})", secrets)) from exc
    if status >= 400:
        raise classify_status(status, reply_headers, raw.decode("utf-8", errors="replace"), secrets, url=url)
    if secrets:  # a provider echoing the key (in any case or encoding) in a result: blanked before anything reads it
        text = raw.decode("utf-8", errors="replace")
        if contains(text, secrets):
            return redact_tree_lines(text, secrets).encode("utf-8")
    return raw


def redact_tree_lines(text: str, secrets: list[str]) -> str:
    """A JSON or JSONL reply with the secrets blanked out of its parsed values (the JSON-escaped forms too, as
    client.post_json does), each line re-encoded; a line that is not JSON is blanked as text."""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.dumps(redact_tree(json.loads(line), secrets)) if line.strip() else line)
        except (ValueError, RecursionError):
            out.append(redact(line, secrets))
    return "\n".join(out)


def _json(raw: bytes, what: str) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise RetryableError(f"{what}: the reply is not JSON") from None
    if not isinstance(body, dict):
        raise RetryableError(f"{what}: the reply is not a JSON object")
    return body


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def jsonl(raw: bytes) -> list[dict[str, Any]]:
    """The objects of a JSONL file (blank lines skipped; a line that is no JSON object is left out)."""
    out = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("custom_id"), str):
                out.append(value)
    return out


class OpenAIBatches:
    """OpenAI's Batch API for an OpenAI-compatible backend (its base URL ends in /v1, as for chat completions)."""

    def __init__(self, backend: OpenAICompatBackend):
        self.backend = backend

    def headers(self, content_type: str | None = "application/json") -> dict[str, str]:
        headers = {"content-type": content_type} if content_type else {}
        if self.backend._api_key:
            headers["authorization"] = f"Bearer {self.backend._api_key}"
        return headers

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return self.backend.payload(request)

    async def submit(self, bodies: dict[str, dict[str, Any]]) -> str:
        lines = b"".join(
            encode_json({"custom_id": cid, "method": "POST", "url": CHAT_ENDPOINT, "body": body}) + b"\n" for cid, body in bodies.items()
        )
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", lines, filename="judge-mcp-batch.jsonl", content_type="application/jsonl")
        base = self.backend.base_url
        uploaded = _json(await _call(self.backend, "POST", f"{base}/files", self.headers(None), data=form, limit_s=TRANSFER_S), "file upload")
        if not isinstance(uploaded.get("id"), str):
            raise FatalError("file upload: the reply has no file id")
        created = {"input_file_id": uploaded["id"], "endpoint": CHAT_ENDPOINT, "completion_window": "24h"}
        batch = _json(await _call(self.backend, "POST", f"{base}/batches", self.headers(), data=encode_json(created)), "batch creation")
        if not isinstance(batch.get("id"), str):
            raise FatalError("batch creation: the reply has no batch id")
        return batch["id"]

    async def status(self, batch_id: str) -> tuple[Status, dict[str, Any]]:
        body = _json(await _call(self.backend, "GET", f"{self.backend.base_url}/batches/{batch_id}", self.headers(None)), "batch status")
        state = str(body.get("status") or "")
        errors = body.get("errors")
        detail = "; ".join(str(e.get("message") or e) for e in (errors.get("data") or []) if isinstance(e, dict)) if isinstance(errors, dict) else ""
        if state == "completed":
            return Status(True, True, state), body
        # an expired or cancelled batch keeps the answers it finished in its output file (and bills them)
        partial = state in ("expired", "cancelled") and bool(body.get("output_file_id"))
        return Status(state in ("failed", "expired", "cancelled"), False, state, detail, partial), body

    async def results(self, batch: dict[str, Any]) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.get(key)
            if isinstance(file_id, str) and file_id:
                raw = await _call(self.backend, "GET", f"{self.backend.base_url}/files/{file_id}/content", self.headers(None), limit_s=TRANSFER_S)
                out.update((line["custom_id"], openai_outcome(line)) for line in jsonl(raw))
        return out

    def completion(self, body: dict[str, Any], sent: dict[str, Any]) -> Completion:
        return parse_chat_completion(body, self.backend.model, sent, structured="response_format" in sent)


def openai_outcome(line: dict[str, Any]) -> Outcome:
    """One line of an output or error file."""
    response = _dict(line.get("response"))
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        return Outcome("ok", body)
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None)
    cause = f"HTTP {status}: " if status else ""
    cause += str(error.get("message") or error.get("code") or error) if isinstance(error, dict) else str(error or "no answer")
    retry = status is None or status in RETRYABLE_STATUS
    return Outcome("retry" if retry else "fail", cause=cause[:300])


class AnthropicBatches:
    """Anthropic's Message Batches for an Anthropic backend."""

    def __init__(self, backend: AnthropicBackend):
        self.backend = backend
        self.url = messages_url(backend.base_url) + "/batches"

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return self.backend.payload(request)

    async def submit(self, bodies: dict[str, dict[str, Any]]) -> str:
        payload = {"requests": [{"custom_id": cid, "params": body} for cid, body in bodies.items()]}
        batch = _json(await _call(self.backend, "POST", self.url, self.backend.headers(), data=encode_json(payload), limit_s=TRANSFER_S), "batch creation")
        if not isinstance(batch.get("id"), str):
            raise FatalError("batch creation: the reply has no batch id")
        return batch["id"]

    async def status(self, batch_id: str) -> tuple[Status, dict[str, Any]]:
        body = _json(await _call(self.backend, "GET", f"{self.url}/{batch_id}", self.backend.headers()), "batch status")
        state = str(body.get("processing_status") or "")
        return Status(state == "ended", state == "ended", state), body

    async def results(self, batch: dict[str, Any]) -> dict[str, Outcome]:
        url = batch.get("results_url")
        if not isinstance(url, str) or not url:
            raise RetryableError("the ended batch has no results_url yet")
        if urlsplit(url).netloc != urlsplit(self.url).netloc:  # the key goes only to the API's own host
            raise FatalError(f"results_url is on another host than the API ({urlsplit(url).netloc})")
        raw = await _call(self.backend, "GET", url, self.backend.headers(), limit_s=TRANSFER_S)
        return {line["custom_id"]: anthropic_outcome(line) for line in jsonl(raw)}

    def completion(self, body: dict[str, Any], sent: dict[str, Any]) -> Completion:
        return parse_message(body, self.backend.model, sent, structured="output_config" in sent)


def anthropic_outcome(line: dict[str, Any]) -> Outcome:
    """One line of a batch's results: succeeded (its message), errored (an invalid request fails; any other error is
    worth sending again), canceled or expired (fail)."""
    result = _dict(line.get("result"))
    kind = result.get("type")
    if kind == "succeeded" and _dict(result.get("message")):
        return Outcome("ok", _dict(result.get("message")))
    if kind == "errored":
        wrapper = _dict(result.get("error"))
        error = _dict(wrapper.get("error")) or wrapper
        cause = f"{error.get('type') or 'error'}: {error.get('message') or ''}".strip()
        return Outcome("fail" if error.get("type") == "invalid_request_error" else "retry", cause=cause[:300])
    return Outcome("fail", cause=f"the request was {kind or 'not answered'} in the batch")


def batches_for(backend: Any) -> OpenAIBatches | AnthropicBatches:
    if isinstance(backend, OpenAICompatBackend):
        return OpenAIBatches(backend)
    if isinstance(backend, AnthropicBackend):
        return AnthropicBatches(backend)
    raise ValueError(f"backend '{backend.name}' ({backend.kind}) has no provider batch API")
