"""What tests build, each made in one place. Where to look for each concern:

- a scripted model server (real HTTP, real wire format): `start_scripted(responder, kind)` here, or the `scripted`
  fixture (tests/conftest.py), which also stops it. The servers (OpenAI-compatible and Anthropic Messages; `Reply`)
  are testkit/scripted_servers.py, the scripted judges testkit/scripted_judges.py: the benchmarks use them too.
- shaping replies: `as_reply`, `delayed` (latency only; never to order events).
- a remote backend on a scripted server: `http_backend(server, ...)` (fixtures: `make_backend`, `make_judge`); a CallContext
  on one with a call cache of its own: `judge_for(server, store)`.
- an in-process App and its MCP server from environment values: `app_env`, `make_app` (fixture: `mcp_app`).
- a `judge-mcp` subprocess: its environment `server_env` (or `clean_env`), `HttpServer` (serve --transport http),
  `free_port`: testkit/server_process.py (perf/replicas.py uses them too), with the real PostgreSQL server
  (testkit/postgres_server.py) and the replicas behind nginx (testkit/replica_set.py).
- MCP over raw HTTP: `INIT`, `ACCEPT`, `token_client` (the official client with a bearer token).
- raw JSON-RPC lines to a real `judge-mcp serve` over stdio: `stdio_exchange(lines, env, cwd, done)`.
- an ASGI app served by uvicorn in a thread of this process on a free port: `ThreadedUvicorn` (the HTTP admission
  and limit tests put their protocols in front of a scripted app).
- concurrency: `Rendezvous` (a barrier inside a responder: the test knows the calls overlapped), `Hold` (answers
  held until the test releases them: act while a call is surely in flight), `until` (wait for a state), `settled`
  (every task waits on something only the test can release), `gather`
  (n concurrent calls, each outcome kept), `WriteHold` (the store's write lane held inside a transaction),
  `survivor_of_twin` (two identical calls on a held backend, the first cancelled while both wait).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testkit.scripted_servers import Reply, Responder, ScriptedAnthropicServer, ScriptedServer

__all__ = [
    "ACCEPT", "INIT", "ROOT", "Hold", "Rendezvous", "ThreadedUvicorn", "WriteHold", "app_env", "as_reply", "delayed", "gather", "http_backend",
    "judge_for", "make_app", "settled", "survivor_of_twin", "start_scripted", "stdio_exchange", "token_client", "until",
]

ROOT = Path(__file__).resolve().parent.parent
SERVERS: dict[str, type[ScriptedServer]] = {"openai": ScriptedServer, "anthropic": ScriptedAnthropicServer}


# ---- scripted servers and their replies -------------------------------------------------------------------------------
def start_scripted(responder: Responder, kind: str = "openai") -> ScriptedServer:
    """A started scripted server speaking `kind`'s wire format ("openai" or "anthropic"); stop it with `.stop()`."""
    return SERVERS[kind](responder).start()


def kind_of(server: ScriptedServer) -> str:
    return "anthropic" if isinstance(server, ScriptedAnthropicServer) else "openai"


def as_reply(answer: Reply | str) -> Reply:
    return answer if isinstance(answer, Reply) else Reply(content=answer)


def delayed(responder: Responder, delay_s: float | Callable[[], float]) -> Responder:
    """`responder`, answering after `delay_s` seconds (or after `delay_s()`): simulated latency."""

    def respond(payload: dict[str, Any]) -> Reply:
        reply = as_reply(responder(payload))
        reply.delay_s = delay_s() if callable(delay_s) else delay_s
        return reply

    return respond


# ---- backends, apps and MCP servers in this process -----------------------------------------------------------------
def http_backend(server: ScriptedServer, *, name: str = "scripted", model: str = "scripted-model", **kwargs: Any):
    """The remote backend for `server`'s wire format (OpenAICompatBackend or AnthropicBackend) pointed at it."""
    from judge_mcp.backends.anthropic import AnthropicBackend
    from judge_mcp.backends.openai_compat import OpenAICompatBackend

    cls = AnthropicBackend if kind_of(server) == "anthropic" else OpenAICompatBackend
    return cls(name, model, base_url=server.base_url, **kwargs)


def judge_for(server: ScriptedServer, store: Any, *, structured: bool = True):
    """A CallContext on a new remote backend for `server` (one retry) with a call cache of its own over `store`; with
    `structured=False` the backend asks for no JSON schema (the papers' text grammars)."""
    from judge_mcp.calls.cache import CallCache
    from judge_mcp.calls.context import CallContext

    backend = http_backend(server, max_retries=1, backoff_base_s=0.01)
    if not structured:
        backend.supports_json_schema = False
    return CallContext(backend, CallCache(store), store)


def app_env(server: ScriptedServer, db: Path | str, **extra: str) -> dict[str, str]:
    """Settings (as environment values) for an App whose default backend is `server`; `extra` adds or overrides."""
    return {"JUDGE_MCP_BACKEND": kind_of(server), "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "scripted-model",
            "JUDGE_MCP_DB": str(db), **extra}


def make_app(env: dict[str, str], store: Any = None):
    """An App from these environment values (`load_settings(env)`); `store` replaces the one it would open."""
    from judge_mcp.runtime.app import App
    from judge_mcp.config.settings import load_settings

    return App(load_settings(env), store=store)


# ---- MCP over HTTP ---------------------------------------------------------------------------------------------------
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
ACCEPT = {"accept": "application/json, text/event-stream"}


def token_client(url: str, token: str, **options: Any):
    """(http, client): the official MCP client over streamable HTTP, sending `Authorization: Bearer <token>`
    (`options` go to `mcp.Client`). Use as `async with http, client:`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60)
    return http, Client(streamable_http_client(url, http_client=http), **options)


class ThreadedUvicorn:
    """uvicorn serving `app` on 127.0.0.1 at a free port in a daemon thread, as a context manager: entering waits (at
    most 20 s) until it listens, leaving asks it to exit and joins the thread. `config` goes to uvicorn.Config."""

    def __init__(self, app: Any, **config: Any):
        import uvicorn

        from testkit.server_process import free_port

        self.port = free_port()
        config = {"log_level": "warning", "lifespan": "off", **config}
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, **config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ThreadedUvicorn:
        import time

        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def stdio_exchange(lines: list[str], env: dict[str, str], cwd: Path, done: Callable[[list[dict]], bool]) -> list[dict]:
    """Write `lines` to a fresh `python -m judge_mcp serve` at once and collect its JSON replies until `done(replies)`
    (at most 60 s). A client keeps stdin open until it has its replies (at EOF the session ends and drops requests
    in flight), so stdin is closed only then."""
    import json
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "judge_mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env, cwd=cwd,
    )
    replies: list[dict] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                replies.append(json.loads(line))
                if done(replies):
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert proc.stdin is not None
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    reader.join(timeout=60)
    proc.stdin.close()
    proc.wait(timeout=30)
    return replies


# ---- concurrency -----------------------------------------------------------------------------------------------------
class Rendezvous:
    """A responder that holds each request at a barrier of `parties` until that many requests are inside at once,
    then answers with `responder`. Calls that really run concurrently meet; calls that do not (sequential, or fewer
    in flight than `parties`) break the barrier after `timeout_s`, which is counted in `broken` (the request is then
    answered anyway, so the test fails on its assertion, not on a connection error). `met` counts requests that met.
    With `when`, only requests it accepts wait (the others are answered at once); with `rounds`, only the first
    `rounds` groups wait.
    """

    def __init__(self, parties: int, responder: Responder, *, timeout_s: float = 20.0, rounds: int | None = None,
                 when: Callable[[dict[str, Any]], bool] | None = None):
        self.parties, self.responder, self.rounds, self.when = parties, responder, rounds, when
        self._barrier = threading.Barrier(parties, timeout=timeout_s)
        self._lock = threading.Lock()
        self.arrived = self.met = self.broken = 0

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        if self.when is not None and not self.when(payload):
            return self.responder(payload)
        with self._lock:
            self.arrived += 1
            waits = self.rounds is None or self.arrived <= self.rounds * self.parties
        if waits:
            try:
                self._barrier.wait()
                with self._lock:
                    self.met += 1
            except threading.BrokenBarrierError:
                with self._lock:
                    self.broken += 1
        return self.responder(payload)


class Hold:
    """A responder that holds the first `count` requests (of those `when` accepts) until `release()`, then answers
    them with `responder`; later requests are answered at once. `arrived` is set once `count` requests are held.
    It stands in for a slow model without guessing how slow: the test acts while the calls are surely in flight,
    then releases them. (A held request is answered anyway after `timeout_s`, so a failing test does not hang.)"""

    def __init__(self, responder: Responder, *, count: int = 1, when: Callable[[dict[str, Any]], bool] | None = None,
                 timeout_s: float = 20.0):
        self.responder, self.count, self.when, self.timeout_s = responder, count, when, timeout_s
        self.arrived = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.held = 0

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        take = False
        if self.when is None or self.when(payload):
            with self._lock:
                if self.held < self.count:
                    self.held += 1
                    take = True
                    if self.held == self.count:
                        self.arrived.set()
        if take:
            self._released.wait(self.timeout_s)
        return self.responder(payload)

    def release(self) -> None:
        self._released.set()


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait (on the event loop) until `predicate()` holds; fails after `timeout_s`. For a state the test cannot be
    told about directly (e.g. how many callers wait on a shared call); it orders nothing by time."""
    import anyio

    with anyio.fail_after(timeout_s):
        while not predicate():
            await anyio.sleep(0.005)


async def settled(store: Any = None) -> None:
    """Wait until every other task on this event loop waits on something outside it: a backend answer the test holds
    (Hold), a held write (WriteHold), or the test itself. With `store`, its read lane is drained in between, so a task
    that was waiting for a read (the call cache's lookup) has had its answer and gone on to its next wait. This is how
    a test knows that concurrent callers have all reached a shared call, or that a cancelled one has let go, without
    reading the code's private state."""
    import anyio
    import anyio.lowlevel

    await anyio.wait_all_tasks_blocked()
    if store is not None:
        await anyio.lowlevel.checkpoint()  # what the loop has queued runs first (the cache hands its reads over that way)
        await store.reads.run(lambda: None)  # the lane runs its jobs in order: every read handed over before is answered
        await anyio.wait_all_tasks_blocked()


async def gather(n: int, fn: Callable[[], Any]) -> list[Any]:
    """Run fn() n times concurrently; each result or raised exception, in completion order."""
    import anyio

    out: list[Any] = []

    async def one() -> None:
        try:
            out.append(await fn())
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            out.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return out


async def survivor_of_twin(call: Callable[[], Any], hold: Hold, store: Any = None) -> Any:
    """Run `call()` twice on a backend behind `hold`: the first until its requests are held at the backend, then the
    second, which shares them; once both wait, cancel the first and release the backend. The first must end
    cancelled; returns the second's result (which must not be broken by the cancellation)."""
    import anyio

    results = []
    async with anyio.create_task_group() as tg:
        doomed = anyio.CancelScope()

        async def cancelled() -> None:
            with doomed:
                await call()

        async def survivor() -> None:
            results.append(await call())

        tg.start_soon(cancelled)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)  # the first call's requests are at the backend
        tg.start_soon(survivor)
        await settled(store)  # the survivor waits on the calls in flight
        doomed.cancel()
        await settled(store)
        hold.release()
    assert doomed.cancelled_caught
    return results[0]


class WriteHold:
    """A job for a store's write lane (`store.writes.run(hold.job)`) that holds the lane inside a write transaction:
    `entered` is set once it holds it, and it lets go at `release()` (or after `timeout_s`, failing)."""

    def __init__(self, store: Any, timeout_s: float = 10.0):
        self.store, self.timeout_s = store, timeout_s
        self.entered, self._released = threading.Event(), threading.Event()

    def job(self) -> None:
        with self.store.transaction():
            self.entered.set()
            assert self._released.wait(self.timeout_s), "the write lane was never released"

    def release(self) -> None:
        self._released.set()


def integrity_ok(store: Any) -> bool:
    """SQLite's own check of the whole file (what a crash or a half-written transaction would break)."""
    return store.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"


def closed_by_server(sock: socket.socket, wait_s: float = 15.0) -> bool:
    """Whether the server closed the connection (what is left of a response read first); False after `wait_s`."""
    sock.settimeout(wait_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
