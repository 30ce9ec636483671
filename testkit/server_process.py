"""A `judge-mcp` server as a subprocess, for the tests and the perf/ scripts: its environment (`clean_env`,
`server_env`), a free loopback port (`free_port`) and `HttpServer` (`judge-mcp serve --transport http` on that port).
The PostgreSQL server and the replicas behind nginx that build on it are postgres_server.py and replica_set.py here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["HttpServer", "clean_env", "free_port", "server_env"]

SOURCE = Path(__file__).resolve().parent.parent  # the checkout (testkit/ never ships): the servers run its judge_mcp


def clean_env(*, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """This process's environment without judge-mcp, provider or OpenTelemetry variables (nor the names in `drop`), plus `extra`:
    for subprocesses, so that nothing of the developer's own configuration leaks into a test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_", "OTEL_")) and k not in drop}
    env.update(extra)
    return env


def server_env(base_url: str, db: Path | str, **extra: str) -> dict[str, str]:
    """Environment for a `judge-mcp` subprocess (serve, bench, sessions) talking to an OpenAI-compatible backend at
    `base_url` with its database at `db`; `extra` adds or overrides."""
    settings = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted-model", "JUDGE_MCP_DB": str(db)}
    return {**clean_env(), **settings, **extra}


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` (the address the server will bind: a port free on 127.0.0.1 may be another socket's on
    127.0.0.2, such as a client's bound there, since both come from the ephemeral range)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class HttpServer:
    """`judge-mcp [-v] serve --transport http --host HOST --port <free>` as a subprocess with exactly `env` (see
    `server_env`).

    With `log`, stdout and stderr go to that file and the constructor returns once the port accepts connections
    (raising, with the log's tail, if the server exits first). Without it, stderr is a pipe: `first_line()` is the
    line the server prints once it listens (or why it refused to start), and `proc` can be waited on.
    """

    def __init__(self, env: dict[str, str], *, host: str = "127.0.0.1", log: Path | None = None, verbose: bool = False):
        self.host, self.port, self.log_path = host, free_port(host), log
        self.killed = threading.Event()  # set by kill(): errors a client sees after it are expected
        args = [sys.executable, "-m", "judge_mcp"] + (["-v"] if verbose else [])
        args += ["serve", "--transport", "http", "--host", host, "--port", str(self.port)]
        self._log: IO[bytes] | None = None
        self.proc: subprocess.Popen[Any]
        if log is None:
            self.proc = subprocess.Popen(args, env=env, cwd=SOURCE, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
            return
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(args, env=env, cwd=SOURCE, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
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
        """The first line on stderr (pipe mode only) after the start's note on a backend that is a local server (its
        timeout, config/settings.local_notes): blocks until the server listens, or has failed to start."""
        assert self.proc.stderr is not None, "first_line() needs the pipe mode (no log file)"
        line = self.proc.stderr.readline().strip()
        while line.startswith("judge-mcp: backend '") and "' is a local server (" in line:
            line = self.proc.stderr.readline().strip()
        return line

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
