"""A panel's compare_pair result tells the truth about its members: `p_better` pools the members' own (it used to be
dropped), `swapped` is false when a member judged one order (swap="auto"), and each member shows its own. Named
TOML backends without their own max_retries follow JUDGE_MCP_MAX_RETRIES (a dead member with it set to 0 is asked
once, not four times)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from judge_mcp.runtime.app import App
from judge_mcp.config.settings import load_settings
from judge_mcp.server.build import build_server
from testkit.scripted_judges import BAD, GOOD, shown_first, logprob_content, verdict_json
from testkit.scripted_servers import Reply

PAIR = dict(prompt="What is the capital of Australia?", response_a=BAD, response_b=GOOD)


def prob_judge(p_first: dict[str, float]):
    """Names the answer shown first as better with P(letter A) = p_first[order] ("AB": the caller's A shown first)."""

    def respond(payload: dict) -> Reply:
        order = "AB" if "Sydney" in shown_first(payload) else "BA"
        p = p_first[order]
        content = verdict_json(p >= 0.5)
        return Reply(content=content, logprobs=logprob_content(content, p) if payload.get("logprobs") else None)

    return respond


@pytest.fixture
def panel_app(scripted, tmp_path: Path):
    apps: list[App] = []

    def make(members: dict, *, retries_in_table: bool = True, env_retries: str = "0"):
        servers = {name: scripted(responder) for name, responder in members.items()}
        toml = "".join(
            f'[backends.{name}]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodel = "m-{name}"\n'
            + ("max_retries = 0\n" if retries_in_table else "") + "\n"
            for name, server in servers.items()
        )
        (tmp_path / "judge.toml").write_text(toml)
        first = next(iter(servers.values()))
        app = App(load_settings({
            "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": first.base_url, "JUDGE_MCP_MODEL": "scripted-model",
            "JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_MAX_RETRIES": env_retries,
            "JUDGE_MCP_CONFIG": str(tmp_path / "judge.toml"),
        }))
        apps.append(app)
        return build_server(app), servers, app

    yield make
    for app in apps:
        app.store.close()


async def _call(server, arguments: dict):
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def test_a_panel_pools_its_members_p_better(panel_app) -> None:
    # a: B better with P(A) = 0.2 in both orders' terms; b: P(A better) = 0.4
    server, _, _ = panel_app({"a": prob_judge({"AB": 0.2, "BA": 0.8}), "b": prob_judge({"AB": 0.4, "BA": 0.6})})
    data = await _call(server, {**PAIR, "backends": ["a", "b"]})
    members = {m["backend"]: m for m in data["panel"]}
    assert members["a"]["p_better"]["A"] == pytest.approx(0.2) and members["b"]["p_better"]["A"] == pytest.approx(0.4)
    assert data["p_better"]["A"] == pytest.approx(0.3) and data["p_better"]["B"] == pytest.approx(0.7)
    assert data["swapped"] is True and all(m["swapped"] for m in data["panel"])


async def test_a_panel_says_not_swapped_when_a_member_judged_one_order(panel_app) -> None:
    # a is confident in order AB (margin 0.9): swap="auto" stops there; b is unsure and judges both orders
    server, servers, _ = panel_app({"a": prob_judge({"AB": 0.05, "BA": 0.95}), "b": prob_judge({"AB": 0.45, "BA": 0.55})})
    data = await _call(server, {**PAIR, "backends": ["a", "b"], "swap": "auto"})
    members = {m["backend"]: m for m in data["panel"]}
    assert (members["a"]["swapped"], members["b"]["swapped"]) == (False, True)
    assert len(servers["a"].requests) == 1 and len(servers["b"].requests) == 2
    assert data["swapped"] is False  # not every member judged both orders
    # consistent: every member's trials parsed and agree (one order or two) and all name one answer
    assert data["consistent"] is (all(m["consistent"] for m in data["panel"]) and len({m["winner"] for m in data["panel"]}) == 1)
    assert data["p_better"]["A"] == pytest.approx((0.05 + 0.45) / 2)


async def test_toml_backends_without_max_retries_follow_the_environment(panel_app) -> None:
    dead = lambda payload: Reply(status=503)  # noqa: E731
    server, servers, app = panel_app({"live": prob_judge({"AB": 0.2, "BA": 0.8}), "dead": dead}, retries_in_table=False)
    assert app.settings.named_backends["dead"].max_retries == 0
    data = await _call(server, {**PAIR, "backends": ["live", "dead"]})
    assert {m["backend"]: m["status"] for m in data["panel"]} == {"live": "ok", "dead": "failed"}
    assert len(servers["dead"].requests) == 2  # one attempt per order, no retries (4 attempts each before)
