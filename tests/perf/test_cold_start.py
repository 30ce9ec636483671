"""perf/cold_start.py's servers start, answer their first tool call, and run with bytecode under the benchmark's
own prefix (the servers and the measurement loop, run once each; the timings themselves are not asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perf.cold_start import measure, one_start, servers_to_start
from testkit.scripted_servers import ExternalScripted


def test_every_server_answers_its_first_call_with_bytecode_under_the_prefix(tmp_path: Path):
    with ExternalScripted('{"verdict": "[[A>B]]"}', 0.0) as backend:
        servers = servers_to_start(backend.base_url, tmp_path, None)
        assert list(servers) == ["minimal", "naive", "judge"]
        for _argv, env, _cwd, _tool, _arguments in servers.values():
            assert "PYTHONDONTWRITEBYTECODE" not in env
            assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")
        times = measure(servers, runs=1, think_s=0.0)
    assert set(times) == set(servers)
    for name, runs in times.items():
        (listed, called, call), = runs
        assert 0 < listed <= called, name
        assert 0 < call <= called, name
    # the warm-up starts wrote judge-mcp's bytecode (and the naive judge's httpx) under the prefix
    cached = {p.name for p in (tmp_path / "pycache").rglob("*.pyc")}
    assert any(name.startswith("pairwise.") for name in cached), sorted(cached)[:20]
    assert any(name.startswith("_client.") for name in cached), sorted(cached)[:20]


def test_a_first_call_that_fails_is_an_error_not_a_timing(tmp_path: Path):
    refused = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, the connection is refused
    argv, env, cwd, tool, arguments = servers_to_start(refused, tmp_path, None)["naive"]
    with pytest.raises(RuntimeError, match="judge failed"):
        one_start(argv, env, tool, arguments(0), cwd=cwd)
