"""perf/call_cpu.py's measurement loop: the naive judge (perf/naive_judge.py) and judge-mcp answer over stdio and
streamable HTTP, and a failing call is an error, not a timing (the figures themselves are not asserted)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from perf.call_cpu import servers, stdio_measure
from perf.profile_call import measure
from testkit.scripted_judges import UNIVERSAL_ANSWER
from testkit.scripted_servers import ExternalScripted


def test_the_servers_answer_over_stdio_and_http(tmp_path: Path):
    with ExternalScripted(UNIVERSAL_ANSWER, 0.0) as backend:
        table = servers(backend.base_url, tmp_path, None)
        assert list(table) == ["naive", "ours", "one"] and table["one"][5]["swap"] is False
        for name, (http_argv, stdio_argv, env, root, tool, args) in table.items():
            got = stdio_measure(stdio_argv, {**env, "PYTHONPATH": str(root)}, root, tool, args, calls=2, warm_up=1)
            assert got["wall"] > 0 and got["cpu"] >= 0, name
            got = anyio.run(lambda: measure(http_argv, env, tool, args, 2, root=root, warm_up=1))
            assert got["wall"] > 0 and got["cpu"] >= 0, name


def test_a_failing_call_is_an_error(tmp_path: Path):
    refused = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    _http, stdio_argv, env, root, tool, args = servers(refused, tmp_path, None)["naive"]
    with pytest.raises(RuntimeError, match="judge failed"):
        stdio_measure(stdio_argv, env, root, tool, args, calls=1, warm_up=1)
