"""What the server's start imports: nothing the first answers do not need. The methods' modules (the registry names
them, the argument and result models give the tool list) load at the first judging call; the stats, the labels and
the LWE sessions' modules at their tools' or resources' first call; the verdict log's telemetry modules at its first
write (or where the migration that made their tables runs). aiohttp (the remote backends' client) is
imported at the first backend call, sqlite_utils only on SQLite before 3.35, rapidfuzz at the first FLIP or
similarity scoring, certifi (the CA bundle) only for an https backend, OpenTelemetry's SDK only when tracing is on; and the cyclic collector, off during the
start-up imports, is on again when serving starts. Checked in a fresh interpreter that runs `judge-mcp serve` up to
the point where it starts serving. The remote backend's client is then imported in a thread once a client has
finished the handshake (over HTTP: at start), ahead of its first tool call, and the methods' modules in another."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from mcp.types import LATEST_PROTOCOL_VERSION

from testkit.server_process import clean_env, free_port
from judge_mcp.storage import open_store
from judge_mcp.storage.migrations import MIGRATIONS

# OpenTelemetry's SDK and exporter load only when tracing is on (JUDGE_MCP_OTEL, OTEL_* exporter settings); its API
# comes with the MCP SDK, which imports it for its own spans.
DEFERRED = ("aiohttp", "sqlite_utils", "rapidfuzz", "certifi", "judge_mcp.backends.client", "judge_mcp.bench.html_report",
            "judge_mcp.telemetry.otel", "opentelemetry.sdk", "opentelemetry.exporter",
            "judge_mcp.methods.pairwise", "judge_mcp.methods.flip.reward", "judge_mcp.methods.grade_score.scoring", "judge_mcp.methods.lwe",
            "judge_mcp.methods.panel", "judge_mcp.methods.parsing", "judge_mcp.stats.report", "judge_mcp.stats.agreement", "judge_mcp.stats.labels",
            "judge_mcp.stats.calibration", "judge_mcp.storage.verdict_facts", "judge_mcp.storage.verdict_stats",
            "judge_mcp.storage.lwe_sessions", "judge_mcp.storage.migration_helpers", "judge_mcp.methods.score",
            "judge_mcp.bench.command")

PROBE = f"""
import gc, json, sys
import anyio
import judge_mcp.cli.main as cli

def report(fn, *args, **kwargs):  # instead of serving: which of the deferred modules the start imported
    print(json.dumps({{"imported": [m for m in {DEFERRED!r} if m in sys.modules], "gc": gc.isenabled()}}))

anyio.run = report
raise SystemExit(cli.main(["serve"]))
"""


def test_the_server_starts_without_the_modules_its_first_answers_do_not_need(tmp_path):
    open_store(tmp_path / "judge.db", MIGRATIONS).close()  # a database made before, as every start after the first finds it
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_API_KEY="k",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["imported"] == []
    assert report["gc"]  # off during the start-up imports, on again once the server serves


class ImportWatch:
    """The `-X importtime` lines of a server's stderr, read as they come; `imported` is set once the remote
    backend's client module (aiohttp's user) has been imported, `methods` once the judging methods' modules have."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.imported, self.methods, self.seen = threading.Event(), threading.Event(), []
        self.proc = proc
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.seen.append(line)
            if line.rstrip().endswith(" judge_mcp.backends.client"):
                self.imported.set()
            if line.rstrip().endswith(" judge_mcp.methods.lwe.sessions"):  # the last module the methods' preload imports
                self.methods.set()


def test_over_http_the_backend_client_is_imported_in_the_background_before_any_call(tmp_path):
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_API_KEY="k",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "judge_mcp", "serve", "--transport", "http", "--port", str(free_port())],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    watch = ImportWatch(proc)
    try:
        assert watch.imported.wait(60), "".join(watch.seen[-5:])
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_backend_client_is_imported_in_the_background_once_the_client_has_finished_the_handshake(tmp_path):
    """What the start leaves out is imported while the client thinks about its first tool call: after
    `notifications/initialized`, with no tool call made (seen in the server's -X importtime lines on stderr)."""
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_API_KEY="k",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "judge_mcp", "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    watch = ImportWatch(proc)
    imported, seen = watch.imported, watch.seen

    def ask(message: dict) -> dict | None:
        proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(proc.stdout.readline()) if "id" in message else None  # type: ignore[union-attr]

    try:
        ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert not imported.is_set() and not watch.methods.is_set()  # not at start
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]  # type: ignore[index]
        assert imported.wait(60), "".join(seen[-5:])
        assert watch.methods.wait(60), "".join(seen[-5:])
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(30)
