"""What tests build, each made in one place. Where to look for each concern:

- a scripted model server (real HTTP, real wire format): `start_scripted(responder, kind)` here, or the `scripted`
  fixture (tests/conftest.py), which also stops it. The servers (OpenAI-compatible and Anthropic Messages; `Reply`)
  are judge_mcp/bench/scripted.py, the scripted judges judge_mcp/bench/scripted_judges.py: the benchmarks use them too.
- shaping replies: `as_reply`, `delayed` (latency only; never to order events).
- a remote backend on a scripted server: `http_backend(server, ...)` (fixtures: `make_backend`, `make_judge`); a Judge
  on one with a call cache of its own: `judge_for(server, store)`.
- an in-process App and its MCP server from environment values: `app_env`, `make_app` (fixture: `mcp_app`).
- a `judge-mcp` subprocess: its environment `server_env` (or `clean_env`), `HttpServer` (serve --transport http),
  `free_port`.
- MCP over raw HTTP: `INIT`, `ACCEPT`, `token_client` (the official client with a bearer token).
- concurrency: `Rendezvous` (a barrier inside a responder: the test knows the calls overlapped), `Hold` (answers
  held until the test releases them: act while a call is surely in flight), `until` (wait for a state), `settled`
  (every task waits on something only the test can release), `gather`
  (n concurrent calls, each outcome kept), `WriteHold` (the store's write lane held inside a transaction).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge_mcp.bench.scripted import Reply, Responder, ScriptedAnthropicServer, ScriptedServer

__all__ = [
    "ACCEPT", "INIT", "ROOT", "Hold", "HttpServer", "Rendezvous", "WriteHold", "app_env", "as_reply", "clean_env", "delayed",
    "free_port", "gather", "http_backend", "judge_for", "make_app", "server_env", "settled", "start_scripted", "token_client", "until",
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
    """A Judge on a new remote backend for `server` (one retry) with a call cache of its own over `store`; with
    `structured=False` the backend asks for no JSON schema (the papers' text grammars)."""
    from judge_mcp.calls.cache import CallCache
    from judge_mcp.calls.judge import Judge

    backend = http_backend(server, max_retries=1, backoff_base_s=0.01)
    if not structured:
        backend.supports_json_schema = False
    return Judge(backend, CallCache(store), store)


def app_env(server: ScriptedServer, db: Path | str, **extra: str) -> dict[str, str]:
    """Settings (as environment values) for an App whose default backend is `server`; `extra` adds or overrides."""
    return {"JUDGE_MCP_BACKEND": kind_of(server), "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "scripted-model",
            "JUDGE_MCP_DB": str(db), **extra}


def make_app(env: dict[str, str], store: Any = None):
    """An App from these environment values (`load_settings(env)`); `store` replaces the one it would open."""
    from judge_mcp.app import App
    from judge_mcp.config import load_settings

    return App(load_settings(env), store=store)


# ---- a server subprocess -------------------------------------------------------------------------------------------
def clean_env(*, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """This process's environment without judge-mcp or provider variables (nor the names in `drop`), plus `extra`:
    for subprocesses, so that nothing of the developer's own configuration leaks into a test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_")) and k not in drop}
    env.update(extra)
    return env


def server_env(base_url: str, db: Path | str, **extra: str) -> dict[str, str]:
    """Environment for a `judge-mcp` subprocess (serve, bench, sessions) talking to an OpenAI-compatible backend at
    `base_url` with its database at `db`; `extra` adds or overrides."""
    return clean_env(**{"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted-model",
                        "JUDGE_MCP_DB": str(db), **extra})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """`judge-mcp [-v] serve --transport http --host HOST --port <free>` as a subprocess with exactly `env` (see
    `server_env`).

    With `log`, stdout and stderr go to that file and the constructor returns once the port accepts connections
    (raising, with the log's tail, if the server exits first). Without it, stderr is a pipe: `first_line()` is the
    line the server prints once it listens (or why it refused to start), and `proc` can be waited on.
    """

    def __init__(self, env: dict[str, str], *, host: str = "127.0.0.1", log: Path | None = None, verbose: bool = False):
        self.host, self.port, self.log_path = host, free_port(), log
        self.killed = threading.Event()  # set by kill(): errors a client sees after it are expected
        args = [sys.executable, "-m", "judge_mcp"] + (["-v"] if verbose else [])
        args += ["serve", "--transport", "http", "--host", host, "--port", str(self.port)]
        if log is None:
            self._log = None
            self.proc = subprocess.Popen(args, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
            return
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(args, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection((self.connect_host, self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)  # polling for the port; nothing is ordered by this
        self.kill()
        raise AssertionError(f"server did not start; log:\n{log.read_text(errors='replace')[-3000:]}")

    @property
    def connect_host(self) -> str:
        return "127.0.0.1" if self.host == "0.0.0.0" else self.host

    @property
    def url(self) -> str:
        host = self.connect_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/mcp"

    def first_line(self) -> str:
        """The first line on stderr (pipe mode only): blocks until the server listens, or has failed to start."""
        assert self.proc.stderr is not None, "first_line() needs the pipe mode (no log file)"
        return self.proc.stderr.readline().strip()

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a crash."""
        self.killed.set()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._close()

    def stop(self) -> None:
        """SIGTERM and wait (a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()

    def _close(self) -> None:
        if self._log is not None and not self._log.closed:
            self._log.close()
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.proc.stderr.close()

    def __enter__(self) -> "HttpServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ---- MCP over HTTP ---------------------------------------------------------------------------------------------------
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
ACCEPT = {"accept": "application/json, text/event-stream"}


def token_client(url: str, token: str):
    """(http, client): the official MCP client over streamable HTTP, sending `Authorization: Bearer <token>`.
    Use as `async with http, client:`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60)
    return http, Client(streamable_http_client(url, http_client=http))


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
