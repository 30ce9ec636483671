"""The MCP client's own model as a judge: `sampling/createMessage` on the session of the tool call being served.

The tool wiring (tools.py) runs each tool call inside `serving(ctx)`, which puts the call's MCP context in a
context variable; the tasks a method starts inherit it, so every request of the judgment goes back to the client
that called the tool, tied to that call (`related_request_id`: over streamable HTTP it rides the call's own
stream). The judge prompt goes as it is: the system prompt, the messages (images as ImageContent blocks after
their caption), max tokens and temperature; the configured `model` becomes a ModelHint (the client treats it as a
substring and may map it to a model of its own), with the optional cost/speed/intelligence priorities.

Two ways to ask, by the protocol the client speaks:
- on the initialize handshake (2025-11-25 and earlier), over stdio or stateful HTTP: a `sampling/createMessage`
  request mid-call, with the backend's attempt timeout and bounded retries;
- on the 2026-07-28 per-request protocol, which has no request from server to client mid-call: the tool call answers
  with an `input_required` result holding the judgment's pending createMessage requests (`Rounds`); the client
  answers them and calls the tool again, the judgment runs again from the start with those answers (and the earlier
  rounds', echoed back in `requestState`, sealed by the SDK), until it needs none it lacks. The requests of one round
  are those made while the judgment runs on (a round closes ROUND_QUIET_S after its last new request), so
  compare_pair's two orders go in one round, and a re-ask or an LWE step that needs an earlier answer in the next.

What can stop it, each a clear error (never a hang):
- no MCP tool call (the bench, the CLI): there is no client to ask;
- a handshake connection without a back-channel for server-to-client requests: stateless HTTP
  (JUDGE_MCP_HTTP_STATELESS) with a client on the initialize handshake;
- a client that did not declare the `sampling` capability;
- a client that answers with an error (the user declined the request, the client has no model configured): not
  retried, since asking again would ask the user again.

The call cache (calls/cache.py) keys an answer by the MCP session it came on and the model the client reported in
CreateMessageResult.model (`answer_identity`), never by the hint: the client picks the model, and the user may switch
it at any time. A client's answer is whatever its model (or the client itself) says, and the model name is the
client's word too, so an answer is only ever served again to the session that gave it, never to another client (of
the same name, model or tenant): each session is a random key of its own (`session_key`). A lookup uses the model
the same session reported last; before its first answer there is no lookup. An answer without a model name is not
stored, nor any on the 2026-07-28 protocol (each request a session of its own: nothing could read the row).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import secrets
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError

from judge_mcp.backends.base import Backend, ChatRequest, Completion, Message, Usage
from judge_mcp.backends.errors import BackendError, FatalError, RetryableError
from judge_mcp.config.values import SAMPLING_PRIORITIES

# The MCP context (mcp.server.mcpserver.Context) of the tool call being served; None outside one.
CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("judge_mcp_sampling_call", default=None)
# That call's input_required rounds, on a 2026-07-28 connection; None on the handshake protocol.
ROUNDS: contextvars.ContextVar[Rounds | None] = contextvars.ContextVar("judge_mcp_sampling_rounds", default=None)
ROUND_QUIET_S = 0.05  # a round closes once the judgment has made no new request for this long

STOP_REASONS = {"endTurn": "stop", "stopSequence": "stop", "maxTokens": "length", "toolUse": "tool_calls"}
INSTEAD = "name a configured backend instead (the tool's `backend` argument, or JUDGE_MCP_BACKEND)"
SELF_PREFERENCE = (
    "self-preference risk: judge '{name}' is the MCP client's own model ({model}); if that model wrote an answer it "
    "judges (an agent judging its own drafts), it tends to favour it. Give response_models to check the families, or "
    "judge with a backend of another family"
)


class InputNeeded(Exception):
    """The judgment needs answers the client has not given yet: the tool call answers with `Rounds.result()`."""


class Rounds:
    """One tool call's sampling on the 2026-07-28 protocol: the answers known (this round's input responses and the
    earlier rounds', from the request state) and the requests still pending, keyed by a hash of the request."""

    def __init__(self, state: str | None, responses: dict[str, Any] | None):
        try:
            known = json.loads(state) if state else {}
        except ValueError:
            known = {}
        self.answers: dict[str, Any] = known if isinstance(known, dict) else {}
        for key, response in (responses or {}).items():
            data = response.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(response, "model_dump") else response
            self.answers[str(key)] = data
        self.pending: dict[str, types.CreateMessageRequest] = {}
        self.closed = anyio.Event()
        self._closer: asyncio.Task[None] | None = None

    async def complete(self, params: types.CreateMessageRequestParams) -> Completion:
        """The client's answer to `params`, or InputNeeded once the round closes (the request goes in it)."""
        payload = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        key = "judge-" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]
        known = self.answers.get(key)
        if known is not None:
            try:
                return SamplingBackend.completion(types.CreateMessageResult.model_validate(known), params)
            except ValidationError:
                pass  # asked again below
        self.pending[key] = types.CreateMessageRequest(params=params)
        if self._closer is None:
            self._closer = asyncio.get_running_loop().create_task(self._close())
        await self.closed.wait()
        raise InputNeeded(f"{len(self.pending)} sampling request(s) for the client")

    async def _close(self) -> None:
        seen = -1
        while seen != len(self.pending):
            seen = len(self.pending)
            await anyio.sleep(ROUND_QUIET_S)
        self.closed.set()

    def result(self) -> types.InputRequiredResult:
        """The tool call's answer for this round: the pending requests, and every answer so far as the state."""
        return types.InputRequiredResult(input_requests=dict(self.pending), request_state=json.dumps(self.answers, sort_keys=True))

    def stop(self) -> None:
        if self._closer is not None:
            self._closer.cancel()


def needs_input(exc: BaseException) -> bool:
    """Whether `exc` is (or holds) an InputNeeded."""
    if isinstance(exc, InputNeeded):
        return True
    return isinstance(exc, BaseExceptionGroup) and any(needs_input(e) for e in exc.exceptions)


@contextmanager
def serving(ctx: Any) -> Iterator[Rounds | None]:
    """Run the body as the tool call of `ctx`: a sampling backend asks that call's client. On a 2026-07-28 connection
    it yields the call's Rounds: a body that fails with InputNeeded answers with `rounds.result()`."""
    rounds = Rounds(ctx.request_state, ctx.input_responses) if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else None
    token, rounds_token = CALL.set(ctx), ROUNDS.set(rounds)
    try:
        yield rounds
    finally:
        ROUNDS.reset(rounds_token)
        CALL.reset(token)
        if rounds is not None:
            rounds.stop()


# Each MCP session -> a random key, forgotten with the session. A session is the SDK's per-client `Connection` (a
# stdio client, a stateful HTTP session on the initialize handshake; on the 2026-07-28 protocol each request is one of
# its own, so no answer is served to a later request). The SDK gives a request a ServerSession of its own, which holds
# its connection (a private attribute of the pinned SDK; tests/server/transports/test_tenants.py checks a session's repeat
# is still answered from the cache).
_SESSION_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _connection(ctx: Any) -> Any:
    session = ctx.session
    return getattr(session, "_connection", session)


def session_key(ctx: Any) -> str:
    """The random key of the MCP session `ctx` came on (the same for every call of that session, in no other)."""
    connection = _connection(ctx)
    key = _SESSION_KEYS.get(connection)
    if key is None:
        key = _SESSION_KEYS[connection] = secrets.token_hex(16)
    return key


def _client_name(ctx: Any) -> str:
    params = ctx.session.client_params
    info = getattr(params, "client_info", None)
    return f"{info.name} {info.version}" if info is not None else "the client"


def _content(m: Message) -> Any:
    """A message's content: its text alone, or its text, then each image group's caption and ImageContent blocks."""
    text = types.TextContent(type="text", text=m.content)
    if not m.images:
        return text
    blocks: list[Any] = [text]
    for caption, group in m.images:
        blocks.append(types.TextContent(type="text", text=caption))
        blocks.extend(types.ImageContent(type="image", data=image.base64, mime_type=image.media_type) for image in group)
    return blocks


class SamplingBackend(Backend):
    kind = "sampling"
    private_answers = True  # the client's own model: its answers are never served to another tenant or session
    supports_json_schema = False  # sampling has no structured output: the methods use the papers' text grammars

    def __init__(self, name: str, model: str, *, priorities: Iterable[tuple[str, float]] = (), **kwargs: Any):
        super().__init__(name, model, **kwargs)
        self.priorities = dict(priorities)
        unknown = set(self.priorities) - set(SAMPLING_PRIORITIES)
        if unknown:
            raise ValueError(f"backend '{name}': unknown model priorities {sorted(unknown)}; known: {', '.join(SAMPLING_PRIORITIES)}")
        # the model each session (by its key, session_key) reported last: what a cache lookup is keyed by
        self.reported: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    # ---- identity: the client's model, as it reports it -----------------------------------------------------------
    @property
    def model_id(self) -> str:
        return f"sampling/{self.model or 'client'}"

    def answered_model_id(self, models: Iterable[str]) -> str:
        seen = sorted({m for m in models if m})
        return f"sampling/{'+'.join(seen)}" if seen else self.model_id

    def identity(self) -> str | None:  # type: ignore[override]
        """`sampling|SESSION|MODEL`: SESSION this call's session's key, MODEL the one it reported last; None (no
        lookup) before its first answer, and outside a tool call."""
        ctx = CALL.get()
        model = self.reported.get(_connection(ctx)) if ctx is not None else None
        return f"sampling|{session_key(ctx)}|{model}" if model else None

    def answer_identity(self, completion: Completion, identity: str | None) -> str | None:
        """The identity the answer is stored under: this session's, with the model it reported; None (not stored)
        without a model name, outside a tool call, or on the 2026-07-28 protocol (each request is a session of its
        own there, so nothing could ever read the row)."""
        ctx = CALL.get()
        if not completion.model or ctx is None or ROUNDS.get() is not None:
            return None
        self.reported[_connection(ctx)] = completion.model
        return f"sampling|{session_key(ctx)}|{completion.model}"

    def describe(self) -> str:
        return f"sampling, the MCP client's model{f' (hint {self.model!r})' if self.model else ''}"

    def self_preference_warning(self, model_id: str) -> str | None:
        return SELF_PREFERENCE.format(name=self.name, model=model_id)

    # ---- calling ----------------------------------------------------------------------------------------------
    def params(self, request: ChatRequest) -> types.CreateMessageRequestParams:
        system = [request.system] if request.system else []
        messages = []
        for m in request.messages:
            if m.role == "system":  # sampling messages are user or assistant; a system message joins the system prompt
                system.append(m.content)
            else:
                messages.append(types.SamplingMessage(role=m.role, content=_content(m)))  # type: ignore[arg-type]
        hints = [types.ModelHint(name=self.model)] if self.model else None
        preferences = types.ModelPreferences(hints=hints, **self.priorities) if hints or self.priorities else None
        return types.CreateMessageRequestParams(
            messages=messages,
            system_prompt="\n\n".join(system) if system else None,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            model_preferences=preferences,
        )

    def _session(self) -> Any:
        """This call's session, or a FatalError saying why the client cannot be asked."""
        ctx = CALL.get()
        if ctx is None:
            raise FatalError(f"the sampling backend asks the model of the MCP client calling a tool, and this is no tool call; {INSTEAD}")
        if not ctx.session.can_send_request:
            raise FatalError(
                "this connection cannot carry a request from the server to the client (stateless HTTP, JUDGE_MCP_HTTP_STATELESS, "
                f"with a client on the initialize handshake), so the client's model cannot be asked; serve over stdio or stateful "
                f"HTTP, connect with the 2026-07-28 protocol (its input_required rounds carry the requests), or {INSTEAD}"
            )
        try:
            self._declared(ctx)
        except BackendError as exc:
            raise FatalError(exc.cause) from None
        return ctx

    async def complete(self, request: ChatRequest) -> Completion:
        """On a 2026-07-28 connection, the answer from the call's rounds (nothing is sent mid-call: no timeout or
        retry applies); else a createMessage request with the usual attempt timeout and retries."""
        rounds = ROUNDS.get()
        if rounds is None:
            return await super().complete(request)
        self._declared(CALL.get())
        params = self.params(request)
        completion = await rounds.complete(params)
        return self._finished(completion, request, 1, [])

    def _declared(self, ctx: Any) -> None:
        capabilities = ctx.session.client_capabilities
        if capabilities is None or capabilities.sampling is None:
            raise BackendError(self.name, (
                f"the MCP client ({_client_name(ctx)}) did not declare the sampling capability, so its model cannot be asked; "
                f"use a client that supports sampling, or {INSTEAD}"
            ), where=self.describe())

    async def _send(self, request: ChatRequest) -> Completion:
        ctx = self._session()
        params = self.params(request)
        # session.create_message sends this same request; it is marked deprecated as of the 2026-07-28 protocol
        # (SEP-2577) and warns on every call, so the typed request goes through send_request.
        try:
            result = await ctx.session.send_request(
                types.CreateMessageRequest(params=params), types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
            )
        except NoBackChannelError as exc:
            raise FatalError(f"the connection has no back-channel for the sampling request ({exc}); {INSTEAD}") from None
        except MCPError as exc:
            raise FatalError(f"the MCP client answered the sampling request with an error (code {exc.error.code}): {exc.error.message[:300]}") from None
        except ValidationError as exc:
            raise RetryableError(f"the MCP client's sampling result is malformed: {str(exc)[:300]}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise FatalError("the MCP client's connection closed before it answered the sampling request") from None
        return self.completion(result, params)

    @staticmethod
    def completion(result: types.CreateMessageResult, params: types.CreateMessageRequestParams) -> Completion:
        content = result.content
        text = content.text if isinstance(content, types.TextContent) else ""  # an image or audio answer has no verdict
        stop = result.stop_reason
        return Completion(
            text=text,
            model=result.model,
            usage=Usage(),  # sampling reports no token counts
            finish_reason=STOP_REASONS.get(stop, stop) if stop is not None else None,
            raw={
                "request": params.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"messages"}),
                "response": {"model": result.model, "stop_reason": stop, "content_type": content.type},
            },
        )
