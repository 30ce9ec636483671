"""What the server's start imports: nothing the first answers do not need. aiohttp (the remote backends' client) is
imported at the first backend call, sqlite_utils only on SQLite before 3.35, rapidfuzz at the first FLIP or
similarity scoring, certifi (the CA bundle) only for an https backend, OpenTelemetry's SDK only when tracing is on; and the cyclic collector, off during the
start-up imports, is on again when serving starts. Checked in a fresh interpreter that runs `judge-mcp serve` up to
the point where it starts serving."""

from __future__ import annotations

import json
import subprocess
import sys

from judge_mcp.bench.servers import clean_env

# OpenTelemetry's SDK and exporter load only when tracing is on (JUDGE_MCP_OTEL, OTEL_* exporter settings); its API
# comes with the MCP SDK, which imports it for its own spans.
DEFERRED = ("aiohttp", "sqlite_utils", "rapidfuzz", "certifi", "judge_mcp.backends.client", "judge_mcp.bench.report",
            "judge_mcp.telemetry_otel", "opentelemetry.sdk", "opentelemetry.exporter")

PROBE = f"""
import gc, json, sys
import anyio
import judge_mcp.cli as cli

def report(fn, *args, **kwargs):  # instead of serving: which of the deferred modules the start imported
    print(json.dumps({{"imported": [m for m in {DEFERRED!r} if m in sys.modules], "gc": gc.isenabled()}}))

anyio.run = report
raise SystemExit(cli.main(["serve"]))
"""


def test_the_server_starts_without_the_modules_its_first_answers_do_not_need(tmp_path):
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_API_KEY="k",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["imported"] == []
    assert report["gc"]  # off during the start-up imports, on again once the server serves
