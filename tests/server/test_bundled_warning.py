"""Issue 49 item 1: a result judged by the bundled 135M model says so in its `warnings` (it read `local/SmolLM2-135M`
with `"warnings": []`, taken for a real judge's verdict). The model itself is not run here: the backend named `tiny`
is configured as the bundled model, and its built backend is swapped for one speaking to a scripted server, so the
result goes through the front door (server/tools.invoke) as the bundled model's would."""

from __future__ import annotations

from dataclasses import replace

from mcp import Client

from judge_mcp.backends import build_backend
from testkit.scripted_judges import PAIR, UniversalJudge

BUNDLED = "judged by the bundled SmolLM2-135M model (backend 'tiny'): plumbing, not a judge"


async def test_a_result_judged_by_the_bundled_model_says_so_and_others_do_not(mcp_app, tmp_path) -> None:
    config = tmp_path / "judge.toml"
    config.write_text('[backends.tiny]\nkind = "local"\n', encoding="utf-8")
    server, _ = mcp_app(UniversalJudge(), JUDGE_MCP_CONFIG=str(config))
    app = server.app
    assert app.settings.backend("tiny").kind == "local" and app.settings.backend("tiny").model is None
    app._backends["tiny"] = build_backend(replace(app.settings.backend(None), name="tiny"))  # noqa: SLF001 - the model not run
    async with Client(server) as client:
        bundled = await client.call_tool("compare_pair", {**PAIR, "backend": "tiny"})
        real = await client.call_tool("compare_pair", {**PAIR, "prompt": PAIR["prompt"] + " (2)"})
        stats = await client.call_tool("judge_stats", {})
    assert not bundled.is_error and not real.is_error, (bundled, real)
    warnings = bundled.structured_content["warnings"]
    assert [w for w in warnings if w.startswith(BUNDLED)] and len([w for w in warnings if "bundled" in w]) == 1, warnings
    assert "set model in [backends.tiny]" in " ".join(warnings)
    assert not [w for w in real.structured_content["warnings"] if "bundled" in w]
    assert "bundled SmolLM2" not in str(stats.structured_content)  # not a judging tool


async def test_the_environments_bundled_backend_names_the_variable_to_set(mcp_app, tmp_path) -> None:
    from judge_mcp.config.bundled import bundled_warning

    assert bundled_warning("default").startswith("judged by the bundled SmolLM2-135M model (backend 'default'): plumbing, not a judge; set JUDGE_MCP_BACKEND")
