"""compare_pair end to end on the embedded model (SmolLM2-135M through xllamacpp), through the MCP client."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from judge_mcp.server.build import build_server
from tests.helpers import make_app

pytestmark = pytest.mark.model


async def test_compare_pair_on_the_embedded_model(tmp_path: Path) -> None:
    app = make_app({"JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_MAX_RETRIES": "0", "JUDGE_MCP_TIMEOUT_S": "600"})
    server = build_server(app)
    arguments = {
        "prompt": "What is 2 + 2?",
        "response_a": "2 + 2 = 4.",
        "response_b": "2 + 2 = 5.",
        "template": "direct",
    }
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", arguments)
        again = await client.call_tool("compare_pair", arguments)
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["model"] == "local/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert [t["order"] for t in data["trials"]] == ["AB", "BA"]
    # Schema-constrained decoding: every trial parses to one of the two labels.
    assert all(t["parse_ok"] and t["label"] in ("[[A>B]]", "[[B>A]]") for t in data["trials"])
    assert data["usage"]["calls"] == 2 and data["usage"]["completion_tokens"] > 0
    # winner follows the strict rule whatever this tiny model answers
    betters = {t["better"] for t in data["trials"]}
    assert (data["winner"] is not None) == (len(betters) == 1) == data["consistent"]
    # the identical call is answered from the cache: no model call
    assert again.structured_content["usage"] == {**again.structured_content["usage"], "calls": 0, "cached_calls": 2}
    assert again.structured_content["trials"] == data["trials"]
    # llama.cpp returns log-probabilities under the schema: each order's probability exists, and greedy decoding under
    # the grammar (only A or B can follow "[[") wrote the likelier letter, so the named answer has p >= 0.5
    for trial in data["trials"]:
        assert trial["p_better"][trial["better"]] >= 0.5
        assert trial["p_better"]["A"] + trial["p_better"]["B"] == pytest.approx(1.0)
    mean = sum(t["p_better"]["A"] for t in data["trials"]) / 2
    assert data["p_better"]["A"] == pytest.approx(mean, abs=1e-6) and data["swapped"] is True
    assert again.structured_content["p_better"] == data["p_better"]  # the cache keeps the probabilities
    await app.aclose()
