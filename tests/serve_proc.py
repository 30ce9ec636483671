"""A real `judge-mcp serve --transport http` process for the durability and secrets tests (loopback only)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """The server on a free port, talking to a scripted backend at `base_url`; stdout and stderr go to `log`."""

    def __init__(self, base_url: str, db: Path, log: Path, *, verbose: bool = False, **env_extra: str):
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
        env.update(
            JUDGE_MCP_BACKEND="openai",
            JUDGE_MCP_BASE_URL=base_url,
            JUDGE_MCP_MODEL="scripted-model",
            JUDGE_MCP_DB=str(db),
            JUDGE_MCP_MAX_RETRIES="0",
            **env_extra,
        )
        self.log_path = log
        self._log = open(log, "ab")
        args = [sys.executable, "-m", "judge_mcp"] + (["-v"] if verbose else [])
        args += ["serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(args, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise AssertionError(f"server did not start; log:\n{log.read_text(errors='replace')[-3000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a crash."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        if not self._log.closed:
            self._log.close()

    def stop(self) -> None:
        """SIGTERM and wait (a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if not self._log.closed:
            self._log.close()
