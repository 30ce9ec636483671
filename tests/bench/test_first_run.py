"""The bench on first contact: the bundled model's budget capped (and said), a line at the start and while no item has
finished, a warning with the fix for a server on this machine at the hosted-API default concurrency or refusing
connections, and the report's figures (wall seconds per item beside each item's latency, "1 error", zero bars, whole
model names)."""

from __future__ import annotations

import io
import re
import socket

import anyio

from judge_mcp.bench import html_report as report
from judge_mcp.bench.command import format_summary, resolve_backend
from judge_mcp.bench.fitting import BUNDLED_MAX_OUTPUT_TOKENS, cap_bundled_model, connection_warning
from judge_mcp.bench.methods import Options
from judge_mcp.bench.progress import Progress
from judge_mcp.bench.runner import RunSpec, run
from judge_mcp.config.settings import load_settings
from tests.bench.datasets import PAIRS, right_judge
from tests.helpers import app_env, make_app


def test_the_bundled_model_is_capped_as_the_demo_caps_it_and_the_run_says_so(tmp_path) -> None:
    from judge_mcp.runtime.app import App

    settings, name = resolve_backend(load_settings({"JUDGE_MCP_DB": str(tmp_path / "j.db"), "JUDGE_MCP_BACKEND": "openai",
                                                    "JUDGE_MCP_BASE_URL": "http://127.0.0.1:9/v1"}), "local")
    app = App(settings)
    try:
        (note,) = cap_bundled_model(app, (name,))
        assert app.backend("local").max_output_tokens == BUNDLED_MAX_OUTPUT_TOKENS == 128
        assert app.settings.backend("local").timeout_s == 600  # a timeout that fits a busy CPU, since none was set
        assert "capped at 128 tokens" in note and "judge-mcp demo" in note and "may take 600 s" in note
        assert "max_output_tokens / timeout_s" in note
        assert cap_bundled_model(app, (None,)) == []  # the openai default backend is left alone
    finally:
        anyio.run(app.aclose)
    env = {"JUDGE_MCP_DB": str(tmp_path / "k.db")}
    app = App(load_settings({**env, "JUDGE_MCP_TIMEOUT_S": "300"}))
    try:
        (note,) = cap_bundled_model(app, (None,))
        assert app.settings.default_backend.timeout_s == 300 and "JUDGE_MCP_MAX_OUTPUT_TOKENS / JUDGE_MCP_TIMEOUT_S" in note
    finally:
        anyio.run(app.aclose)
    for own in ({"JUDGE_MCP_MAX_OUTPUT_TOKENS": "512"}, {"JUDGE_MCP_MODEL": "/models/other.gguf"}):  # a cap or model of one's own
        app = App(load_settings({**env, **own}))
        try:
            assert cap_bundled_model(app, (None,)) == []
            assert app.settings.default_backend.max_output_tokens == (512 if own.get("JUDGE_MCP_MAX_OUTPUT_TOKENS") else None)
        finally:
            anyio.run(app.aclose)


async def test_a_line_at_the_start_and_while_no_item_has_finished() -> None:
    stream = io.StringIO()
    bar = Progress(3, "set grp", stream=stream, every_s=0.2)
    bar.begin(2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(bar.tick_while_waiting)
        await anyio.sleep(0.7)
        tg.cancel_scope.cancel()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "set grp: judging 3 item(s), 2 at a time; a line every 0 s until the first finishes"
    assert len(lines) >= 3 and all("0/3" in line and "waiting for the first item" in line for line in lines[1:])


def test_a_resumed_run_with_nothing_left_says_so() -> None:
    """It announced "judging 0 item(s), 1 at a time; a line every 15 s until the first finishes"."""
    stream = io.StringIO()
    Progress(0, "set grp", stream=stream).begin(1)
    assert stream.getvalue() == "set grp: nothing to judge, every selected item is stored (a new --db judges them again)\n"


async def _bench(scripted, tmp_path, concurrency: int | None, app_concurrency: str | None, server=None) -> tuple[dict, str]:
    server = server or scripted(right_judge)
    extra = {"JUDGE_MCP_CONCURRENCY": app_concurrency} if app_concurrency else {}
    app = make_app(app_env(server, tmp_path / "bench.db", JUDGE_MCP_MAX_RETRIES="0", **extra))
    stream = io.StringIO()
    try:
        summary = await run(app, RunSpec(dataset=PAIRS, method="grp", limit=2, concurrency=concurrency, options=Options()), progress_stream=stream)
    finally:
        await app.aclose()
    return summary, stream.getvalue()


async def test_a_server_on_this_machine_at_the_hosted_default_concurrency_is_warned_of(scripted, tmp_path) -> None:
    summary, out = await _bench(scripted, tmp_path / "a", None, None)  # openai kind: 256 in flight by default
    (warning,) = [w for w in summary.get("warnings", []) if "--concurrency" in w]
    assert "is a server at 127.0.0.1 and gets up to 256 requests in flight" in warning and warning in out
    assert out.splitlines()[1].startswith("pairs grp: judging 2 item(s), 2 at a time")  # the start line, after the warning
    for concurrency, app_concurrency in ((4, None), (None, "4")):  # told how many: no warning
        summary, _ = await _bench(scripted, tmp_path / f"b{concurrency}", concurrency, app_concurrency)
        assert not [w for w in summary.get("warnings", []) if "--concurrency" in w]


async def test_a_refused_connection_is_warned_of_once_with_the_fix(scripted, tmp_path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Closed:
        base_url = f"http://127.0.0.1:{port}/v1"

    app = make_app({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": Closed.base_url, "JUDGE_MCP_MODEL": "m",
                    "JUDGE_MCP_DB": str(tmp_path / "bench.db"), "JUDGE_MCP_MAX_RETRIES": "0", "JUDGE_MCP_CONCURRENCY": "2"})
    stream = io.StringIO()
    try:
        summary = await run(app, RunSpec(dataset=PAIRS, method="grp", limit=3), progress_stream=stream)
    finally:
        await app.aclose()
    refused = [w for w in summary["warnings"] if "refused or dropped a connection" in w]
    assert len(refused) == 1 and "is the server running at its base URL?" in refused[0] and "--concurrency" in refused[0]
    assert summary["errors"] == 3


def test_connection_warning_only_for_connection_failures() -> None:
    assert connection_warning("BackendError: backend 'default' failed: HTTP 400: bad request", None) is None
    assert "backend 'x'" in (connection_warning("ClientConnectorError: Cannot connect to host 127.0.0.1:9", "x") or "")


def _summary(model: str, errors: int, pair: float) -> dict:
    overall = {"n": 4, "pair_accuracy": pair, "single_order_accuracy": 0.5, "accuracy": 0.5, "calls_per_item": 2.0,
               "tokens_per_item": 10.0, "seconds_per_item": 67.96, "wall_seconds_per_item": 1.1}
    return {"dataset": "set", "kind": "pairwise", "method": "grp", "method_key": "grp", "model": model, "overall": overall,
            "categories": {}, "errors": errors, "run": {"wall_seconds_this_invocation": 4.4, "judged_this_invocation": 4}}


def test_the_report_shows_wall_seconds_per_item_beside_latency_one_error_zero_bars_and_whole_names() -> None:
    long_model = "local/SmolLM2-135M-Instruct.Q4_1-with-a-very-long-file-name.gguf"
    text = format_summary(_summary(long_model, 1, 0.0))
    header = text.splitlines()[2]  # after the title and the headline figures
    assert "wall s/item" in header and "latency s" in header and not re.search(r"(?<!\w)s/item", header.replace("wall s/item", ""))
    assert "1.10" in text and "67.96" in text and long_model in text
    page = report.render([_summary(long_model, 1, 0.0), _summary("other/model", 2, 0.5)])
    assert "1 error<" in page or "1 error," in page or ">1 error" in page
    assert "1 errors" not in page and "2 errors" in page
    assert "…" not in page and f">{long_model}<" in page  # the model's name whole in the charts' labels
    widths = [float(w) for w in re.findall(r'<rect class="bar" x="\d+" y="\d+" width="([\d.]+)"', page)]
    assert widths and min(widths) >= 2.0  # the 0.00 pair accuracy is a visible stub
