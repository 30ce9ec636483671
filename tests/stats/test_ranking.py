"""judge_stats' ranking of named candidates: compare_pair / lwe_judge `candidates` kept in the verdict log (never
shown to the judge), both-order verdicts as Bradley-Terry battles (inconsistent pairs as ties), per tenant."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

from judge_mcp.stats import bradley_terry
from judge_mcp.storage import battles as battle_log
from testkit.scripted_judges import first_shown_judge
from testkit.scripted_servers import prompt_text
from tests.stats.test_stats import QUESTION, call, longer_judge


def tie_or_longer(payload: dict[str, Any]) -> str:
    """The longer answer wins in both orders, except where an answer says TIE: then the first shown (orders disagree)."""
    return first_shown_judge(payload) if "TIE" in prompt_text(payload) else longer_judge(payload)


LONG, SHORT = "Canberra is the capital of Australia, chosen in 1908.", "Canberra."
# (candidate a, its answer, candidate b, its answer) -> the battle each verdict makes
CASES = [
    ("x", LONG, "y", SHORT, "A"), ("y", SHORT + " Sure.", "x", LONG + " Yes.", "B"), ("x", LONG + " TIE", "y", SHORT, "tie"),
    ("y", LONG + " Indeed.", "z", SHORT, "A"), ("z", SHORT + " TIE", "y", LONG, "tie"),
]


async def test_named_candidates_are_ranked_from_both_order_verdicts(mcp_app) -> None:
    server, backend = mcp_app(tie_or_longer)
    async with Client(server) as client:
        for a, text_a, b, text_b, _ in CASES:
            await call(client, "compare_pair", {"prompt": QUESTION, "response_a": text_a, "response_b": text_b, "candidates": [a, b]})
        await call(client, "compare_pair", {"prompt": QUESTION, "response_a": LONG, "response_b": SHORT + " Unnamed."})  # no candidates
        one_order = await call(client, "compare_pair", {"prompt": QUESTION, "response_a": LONG + " One.", "response_b": SHORT,
                                                        "candidates": ["x", "z"], "swap": False})
        stats = (await client.call_tool("judge_stats", {})).structured_content
    assert one_order["winner"] == "A"  # judged in one order only: no battle
    expected = [(a, b, outcome) for a, _, b, _, outcome in CASES]
    assert stats["ranking"] == bradley_terry.ranking(expected)
    rows = {row["name"]: row for row in stats["ranking"]}
    assert [row["name"] for row in stats["ranking"]] == ["x", "y", "z"]
    assert (rows["x"]["wins"], rows["x"]["losses"], rows["x"]["ties"], rows["x"]["battles"]) == (2, 0, 1, 3)
    assert (rows["y"]["wins"], rows["y"]["losses"], rows["y"]["ties"], rows["y"]["battles"]) == (1, 2, 2, 5)
    assert rows["y"]["consistent"] == 0.6 and rows["x"]["strength"] > rows["y"]["strength"] > rows["z"]["strength"]
    assert rows["x"]["ci"] == "too few to say (n=5)"
    # the names are the log's, never the judge's: no request mentions them
    assert not any(f'"{name}"' in json.dumps(payload) for payload in backend.requests for name in ("x", "y", "z"))


async def test_candidates_must_name_two_authors(mcp_app) -> None:
    server, _ = mcp_app(longer_judge)
    async with Client(server) as client:
        same = await client.call_tool("compare_pair", {"prompt": QUESTION, "response_a": LONG, "response_b": SHORT, "candidates": ["x", "x"]})
        one = await client.call_tool("compare_pair", {"prompt": QUESTION, "response_a": LONG, "response_b": SHORT, "candidates": ["x"]})
    assert same.is_error and "names one candidate twice ('x')" in same.content[0].text
    assert one.is_error and "candidates" in one.content[0].text


def test_a_verdict_is_a_battle_only_with_candidates_and_both_orders_parsed() -> None:
    trials = [{"order": "AB", "better": "A"}, {"order": "BA", "better": "B"}]
    named = {"candidates": ["p", "q"]}
    assert battle_log.battle_of("compare_pair", named, {"trials": trials}) == ("p", "q", "tie")
    assert battle_log.battle_of("compare_pair", named, {"trials": [trials[0], {"order": "BA", "better": "A"}]}) == ("p", "q", "A")
    assert battle_log.battle_of("compare_pair", named, {"trials": [trials[0], {"order": "BA", "better": None}]}) == ("p", "q", None)
    assert battle_log.battle_of("compare_pair", {}, {"trials": trials}) == (None, None, None)
    assert battle_log.battle_of("lwe_judge", named, {"vanilla": {"ab": "B", "ba": "B"}}) == ("p", "q", "B")
    assert battle_log.battle_of("lwe_judge", named, {"vanilla": None}) == ("p", "q", None)


def test_judge_mcp_stats_prints_the_ranking_and_intervals() -> None:
    from judge_mcp.cli.stats_table import render_stats
    from judge_mcp.contract.results import RankedCandidate, StatsReport, Window
    from judge_mcp.stats.report import summary
    from judge_mcp.storage.verdict_facts import Counts

    group = summary(("default", "m", "compare_pair", "text"), Counts.of({"verdicts": 20, "picks": 20, "first": 14, "unbiased_sum": 10.0}))
    window = Window(verdicts=20, oldest_at=1.0, newest_at=2.0, groups=[group])
    battles = [("x", "y", "A")] * 8 + [("x", "y", "tie")] * 4 + [("y", "x", "A")] * 3
    report = StatsReport(last_n=100, all_time=window, last=window,
                         ranking=[RankedCandidate(**row) for row in bradley_terry.ranking(battles)])  # type: ignore[arg-type]
    text = render_stats(report)
    assert "0.70 (14/20) [0.48, 0.85]" in text  # the first-shown rate with its Wilson interval
    ranked = text.split("ranking of the named candidates")[1]
    x = next(line for line in ranked.splitlines() if line.startswith("1 "))
    assert " x " in x and f"{report.ranking[0].strength:.0f} [{report.ranking[0].ci[0]:.0f}, {report.ranking[0].ci[1]:.0f}]" in x


def test_each_tenant_ranks_its_own_battles(tmp_path) -> None:
    from judge_mcp.storage import open_store
    from judge_mcp.storage.migrations import MIGRATIONS
    from judge_mcp.storage.verdict_log import VerdictLog

    store = open_store(tmp_path / "judge.db", MIGRATIONS)
    try:
        log = VerdictLog(store)
        trials = [{"order": "AB", "better": "A", "parse_ok": True}, {"order": "BA", "better": "A", "parse_ok": True}]
        for tenant, names in (("team-a", ["x", "y"]), ("team-b", ["p", "q"]), ("team-b", ["q", "p"])):
            inputs = {"prompt": QUESTION, "response_a": LONG, "response_b": SHORT, "candidates": names}
            log.log("compare_pair", "default", "m", inputs, {"winner": "A", "consistent": True, "trials": trials}, {}, [], tenant=tenant)
        assert battle_log.battles(store, "team-a")[0] == [("x", "y", "A")]
        assert battle_log.battles(store, "team-b")[0] == [("p", "q", "A"), ("q", "p", "A")]
        assert battle_log.battles(store, "team-c") == ([], None)
    finally:
        store.close()
