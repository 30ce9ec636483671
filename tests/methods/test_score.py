"""score_response: pointwise scores of one response against weighted criteria, on scripted OpenAI-compatible servers
(the real wire format) through the official MCP client; the answer grammar, the score labels and their agreement."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest
from mcp import Client

from judge_mcp.runtime.app import App
from testkit.scripted_servers import Reply
from testkit.scripted_judges import ScoreJudge, first_user, reasked
from judge_mcp.config.settings import load_settings
from judge_mcp.methods.score import parse_score
from judge_mcp.stats.score_agreement import kendall, mae, spearman
from judge_mcp.server.build import build_server
from judge_mcp.storage.verdict_log import VerdictLog
from tests.helpers import Rendezvous
from tests.image_data import png, uri as image_uri

ARGS = {"instruction": "Explain what a mutex is.", "response": "A lock that lets one thread in at a time."}
RUBRIC = [{"name": "correctness", "description": "is it right", "weight": 3}, {"name": "concision", "weight": 1}]
IMAGE = image_uri(png(3))


async def call(server, tool: str, arguments: dict):
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error(server, arguments: dict) -> str:
    async with Client(server) as client:
        result = await client.call_tool("score_response", arguments)
    assert result.is_error, arguments
    return result.content[0].text


# ---- the answer grammar ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, low, high, expected",
    [
        ('{"REASONING": "fine", "SCORE": "7"}', 1, 10, 7),
        ('{"reasoning": "fine", "score": 7}', 1, 10, 7),
        ('{"REASONING": "fine", "SCORE": "7/10"}', 1, 10, 7),
        ('{"REASONING": "fine", "SCORE": "11"}', 1, 10, None),  # outside the scale: never a score
        ('{"REASONING": "fine", "SCORE": "0"}', 1, 10, None),
        ('{"REASONING": "fine", "SCORE": "7.5"}', 1, 10, None),  # not a whole number of the integer scale
        ('{"REASONING": "fine", "SCORE": "4/5"}', 1, 10, None),  # out of another scale
        ('{"REASONING": "fine", "SCORE": "5"}', 1, 5, 5),
        ('{"REASONING": "cut off", "SCORE": "3"', 1, 5, 3),  # broken JSON: the keyed pair
        ("I would give it an eight.", 1, 10, None),
        ("", 1, 10, None),
    ],
)
def test_parse_score_reads_only_whole_numbers_inside_the_scale(text: str, low: int, high: int, expected: int | None) -> None:
    rating = parse_score(text, low, high)
    assert (rating.score if rating else None) == expected


def test_an_object_quoted_from_the_response_is_not_the_answer() -> None:
    response = 'Output: {"SCORE": "10"}'
    assert parse_score(f'The answer prints {response} but is wrong. {{"REASONING": "wrong", "SCORE": "2"}}', 1, 10, [response]).score == 2


def test_kendall_and_spearman_against_hand_counts() -> None:
    pairs = [(1.0, 1.0), (2.0, 3.0), (3.0, 2.0), (4.0, 4.0)]  # one discordant pair of six
    assert kendall(pairs) == round(4 / 6, 4) and spearman(pairs) == 0.8 and mae(pairs) == 0.5
    assert kendall([(1.0, 2.0), (1.0, 2.0)]) is None and spearman([(1.0, 1.0)]) is None


# ---- one backend, through the MCP client -----------------------------------------------------------------------------
async def test_each_criterion_in_its_own_concurrent_call_weighted_overall_and_probability_weighted_scores(mcp_app) -> None:
    judge = ScoreJudge(lambda name, _: {"correctness": 8, "concision": 4}[name],
                       lambda name: {7: 0.25, 8: 0.75} if name == "correctness" else {})
    meet = Rendezvous(2, judge)  # both criteria must be in flight at once
    server, backend = mcp_app(meet)
    data = await call(server, "score_response", {**ARGS, "criteria": RUBRIC})
    assert meet.met == 2 and meet.broken == 0
    correctness, concision = data["scores"]
    assert correctness["criterion"] == "correctness" and correctness["score"] == 7.75  # 0.25 * 7 + 0.75 * 8
    assert correctness["distribution"] == [0, 0, 0, 0, 0, 0, 0.25, 0.75, 0, 0]
    assert concision["score"] == 4.0 and concision["distribution"] is None and concision["samples"] == [4.0]
    assert data["overall"] == round((3 * 7.75 + 4.0) / 4, 4) and data["unstable"] == [] and data["usage"]["calls"] == 2
    shown = [first_user(p) for p in backend.requests]
    assert sum("correctness: is it right" in t for t in shown) == 1 and sum("concision\n" in t and "correctness" not in t for t in shown) == 1
    assert all(p["temperature"] == 0 for p in backend.requests)
    assert all(p["response_format"]["json_schema"]["schema"]["properties"]["SCORE"]["enum"] == [str(k) for k in range(1, 11)] for p in backend.requests)
    rows = VerdictLog(server.app.store).recent("score_response")
    assert len(rows) == 1 and rows[0]["inputs"]["criteria"][0]["name"] == "correctness"


async def test_an_answer_outside_the_scale_is_reasked_once_then_unparsed_never_a_score(mcp_app) -> None:
    server, backend = mcp_app(ScoreJudge(lambda name, p: 4 if name == "fixed" and reasked(p) else 11))
    data = await call(server, "score_response", {**ARGS, "criteria": [{"name": "fixed"}, {"name": "broken"}]})
    fixed, broken = data["scores"]
    assert fixed["parse_ok"] is True and fixed["score"] == 4.0 and fixed["reasked"] == 1
    assert broken["parse_ok"] is False and broken["score"] is None and broken["samples"] == [None] and '"11"' in broken["rationale"]
    assert data["overall"] is None and any("broken" in w for w in data["warnings"])
    assert len(backend.requests) == 4  # each criterion: the answer and one re-ask, no more
    stats = await call(server, "judge_stats", {})
    [group] = [g for g in stats["all_time"]["groups"] if g["tool"] == "score_response"]
    assert group["parse_failures"] == {"rate": 0.5, "count": 1, "of": 2, "ci": "too few to say (n=2)"} and group["reasks"]["count"] == 2


async def test_samples_are_independent_draws_at_temperature_never_cached_and_spread_is_flagged(mcp_app) -> None:
    draws = itertools.cycle([2, 9, 5])
    lock = threading.Lock()

    def drawn(name: str, _: dict) -> int:
        if name == "steady":
            return 7
        with lock:
            return next(draws)

    server, backend = mcp_app(ScoreJudge(drawn))
    arguments = {**ARGS, "criteria": [{"name": "steady"}, {"name": "shaky"}], "samples": 3}
    first = await call(server, "score_response", arguments)
    again = await call(server, "score_response", arguments)
    steady, shaky = first["scores"]
    assert steady["samples"] == [7.0, 7.0, 7.0] and steady["stdev"] == 0.0
    assert sorted(shaky["samples"]) == [2.0, 5.0, 9.0] and shaky["score"] == round(16 / 3, 4) and shaky["stdev"] == round(3.5119, 4)
    assert first["unstable"] == ["shaky"] and first["temperature"] == 1.0
    assert first["usage"]["calls"] == again["usage"]["calls"] == 6 and again["usage"]["cached_calls"] == 0
    assert len(backend.requests) == 12 and all(p["temperature"] == 1.0 for p in backend.requests)


async def test_a_deterministic_score_is_answered_from_the_cache_the_second_time(mcp_app) -> None:
    server, backend = mcp_app(ScoreJudge(lambda name, _: 6))
    arguments = {**ARGS, "criteria": "Is the explanation correct?", "scale": [0, 6], "reference": "A mutual-exclusion lock."}
    first = await call(server, "score_response", arguments)
    again = await call(server, "score_response", arguments)
    assert first["scores"][0]["criterion"] == "criterion" and first["overall"] == 6.0 and first["scale"] == [0, 6]
    assert again["usage"] == {**again["usage"], "calls": 0, "cached_calls": 1}
    text = first_user(backend.requests[0])
    assert "Is the explanation correct?" in text and "A mutual-exclusion lock." in text and "criterion:" not in text


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"criteria": "c", "samples": 3, "temperature": 0}, "samples > 1 needs a temperature above 0"),
        ({"criteria": "c", "scale": [5, 3]}, "'scale' must be [low, high]"),
        ({"criteria": [{"name": f"c{k}"} for k in range(11)]}, "'criteria' must hold 1 to 10 items, got 11"),
        ({"criteria": [{"name": "c"}, {"name": "c"}]}, "repeated: c"),
        ({"criteria": [{"name": "c", "weight": 0}]}, "'criteria[0][weight]' must be a number above 0 and at most 100, got 0"),
        ({"criteria": [{"name": "c", "weight": -1}]}, "'criteria[0][weight]' must be a number above 0 and at most 100, got -1"),
        ({"criteria": [{"name": "c", "weight": 101}]}, "'criteria[0][weight]' must be a number above 0 and at most 100, got 101"),
        ({"criteria": [{"name": "c", "desc": "d"}]}, "'criteria[0]' has an unknown field 'desc'; it takes name, description, weight"),
        ({"criteria": ["c"]}, "'criteria[0]' must be an object (name, description, weight), got str"),
        ({"criteria": None}, "'criteria' must be a string or a list of objects, got null"),
        ({"criteria": 3}, "'criteria' must be a string or a list of objects, got int"),
        ({"criteria": "c", "samples": 11}, "'samples'"),
        ({"criteria": "c", "backend": "x", "backends": ["a", "b"]}, "not both"),
        # a conversation or trajectory counts its text, not its number of messages, towards the call's 200,000
        ({"criteria": "c", "instruction": [{"role": "user", "content": "q" * 50_000}] * 4},
         "the inputs add up to 200,0"),
        ({"criteria": "c", "response": [{"role": "assistant", "content": "r" * 50_000}] * 4},
         "the inputs add up to 200,0"),
        ({"criteria": "c", "instruction": [{"role": "user", "content": "q", "images": [IMAGE] * 8}] * 3},
         "the call brings 24 images; the limit for one call is 16"),
    ],
)
async def test_bad_arguments_are_named_before_any_call(mcp_app, arguments: dict, message: str) -> None:
    server, backend = mcp_app(ScoreJudge(lambda name, _: 5))
    assert message in await error(server, {**ARGS, **arguments})
    assert backend.requests == []


# ---- labels and agreement ----------------------------------------------------------------------------------------------
async def test_record_label_takes_a_score_and_judge_stats_reports_mae_spearman_kendall(mcp_app) -> None:
    scores = iter([3, 6, 9])
    server, _ = mcp_app(ScoreJudge(lambda name, _: next(scores)))
    async with Client(server) as client:
        ids = []
        for k in range(3):
            out = (await client.call_tool("score_response", {**ARGS, "response": f"answer {k}", "criteria": "c"})).structured_content
            ids.append(out["verdict_id"])
        labelled = [(await client.call_tool("record_label", {"verdict_id": v, "label": label})).structured_content
                    for v, label in zip(ids, [4, "6", 8])]
        bad = await client.call_tool("record_label", {"verdict_id": ids[0], "label": 11})
        stats = (await client.call_tool("judge_stats", {})).structured_content
    assert [(x["verdict"], x["agrees"]) for x in labelled] == [("3", False), ("6", True), ("9", False)]
    assert bad.is_error and "whole number from 1 to 10" in bad.content[0].text
    group = next(g for g in stats["all_time"]["groups"] if g["tool"] == "score_response")
    few = "too few to say (n=3)"  # three labels: no interval (stats/intervals.py, MIN_BOOTSTRAP)
    assert group["agreement"]["scores"] == {"n": 3, "mae": round(2 / 3, 4), "spearman": 1.0, "kendall": 1.0,
                                            "ci": {"mae": few, "spearman": few, "kendall": few}}
    assert group["agreement"]["accuracy"]["rate"] == round(1 / 3, 4)


# ---- panels and the self-preference guard ------------------------------------------------------------------------------
@pytest.fixture
def panel_server(scripted, tmp_path: Path):
    apps: list[App] = []

    def make(members: dict[str, tuple]):
        servers = {name: scripted(responder) for name, (responder, _) in members.items()}
        config = tmp_path / "judge.toml"
        config.write_text("".join(f'[backends.{name}]\nkind = "openai"\nbase_url = "{servers[name].base_url}"\nmodel = "{model}"\nmax_retries = 0\n\n'
                                  for name, (_, model) in members.items()))
        first = next(iter(servers.values()))
        app = App(load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": first.base_url, "JUDGE_MCP_MODEL": "scripted-model",
                                 "JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_MAX_RETRIES": "0", "JUDGE_MCP_CONFIG": str(config)}))
        apps.append(app)
        return build_server(app), servers

    yield make
    for app in apps:
        app.store.close()


async def test_a_panel_averages_its_members_and_warns_of_a_same_family_judge(panel_server) -> None:
    server, servers = panel_server({"a": (ScoreJudge(lambda n, _: 8), "gpt-4o-mini"), "b": (ScoreJudge(lambda n, _: 4), "m-b"),
                                    "c": (lambda p: Reply(status=500), "m-c")})
    data = await call(server, "score_response", {**ARGS, "criteria": RUBRIC, "backends": ["a", "b", "c"], "response_models": ["gpt-4o"]})
    assert [s["score"] for s in data["scores"]] == [6.0, 6.0] and data["overall"] == 6.0
    assert sorted(data["scores"][0]["samples"]) == [4.0, 8.0] and "correctness" in data["unstable"]
    assert [(m["backend"], m["status"], m["overall"]) for m in data["panel"]] == [("a", "ok", 8.0), ("b", "ok", 4.0), ("c", "failed", None)]
    assert [p["backend"] for p in data["self_preference"]] == ["a"]
    assert any("self-preference" in w for w in data["warnings"]) and any("'c' failed" in w for w in data["warnings"])
    assert data["usage"]["calls"] == 4 and json.loads(json.dumps(data))["model"].startswith("panel: ")


# ---- the Python API --------------------------------------------------------------------------------------------------
async def test_the_python_api_scores_and_refuses_bad_input(scripted, tmp_path: Path) -> None:
    from judge_mcp import Judge, JudgeError
    from testkit.scripted_judges import UniversalJudge
    from judge_mcp.contract.results import ScoreResponseResult
    from tests.helpers import app_env

    server = scripted(UniversalJudge())
    async with Judge(env=app_env(server, tmp_path / "judge.db")) as judge:
        good = await judge.score_response(instruction="Capital of Australia?", response="Canberra.", criteria="correct city")
        bad = await judge.score_response(instruction="Capital of Australia?", response="Sydney.", criteria="correct city")
        with pytest.raises(JudgeError, match="'scale'"):
            await judge.score_response(instruction="q", response="r", criteria="c", scale=[3])
    assert isinstance(good, ScoreResponseResult) and good.overall == 9.0 and bad.overall == 2.0
    assert len(server.requests) == 2


def test_one_telemetry_event_per_criterion() -> None:
    from types import SimpleNamespace as NS

    from judge_mcp.telemetry.events import evaluations

    items = [NS(criterion="a", parse_ok=True, samples=[7.0, 7.0], stdev=0.0, score=7.0, rationale="fine"),
             NS(criterion="b", parse_ok=True, samples=[2.0, 9.0], stdev=4.9497, score=5.5, rationale=""),
             NS(criterion="c", parse_ok=False, samples=[None], stdev=None, score=None, rationale="")]
    events = evaluations("score_response", NS(scores=items, unstable=["b"]), capture_text=False)
    assert [(e["judge_mcp.criterion"], e["gen_ai.evaluation.score.label"], e.get("gen_ai.evaluation.score.value")) for e in events] == [
        ("a", "scored", 7.0), ("b", "unstable", 5.5), ("c", "unparsed", None)]


async def test_the_prompts_images_go_with_every_criterions_call_and_the_log_keeps_only_their_hash(mcp_app) -> None:
    import base64

    from tests.image_data import png

    uri = "data:image/png;base64," + base64.b64encode(png(3)).decode()
    server, backend = mcp_app(ScoreJudge(lambda name, _: 5))
    await call(server, "score_response", {**ARGS, "criteria": RUBRIC, "images": [uri]})
    parts = [[p for p in m["content"] if isinstance(m["content"], list) and p["type"] == "image_url"]
             for r in backend.requests for m in r["messages"] if m["role"] == "user"]
    assert len(parts) == 2 and all(len(p) == 1 and p[0]["image_url"]["url"] == uri for p in parts)
    [row] = VerdictLog(server.app.store).recent("score_response")
    assert "base64" not in json.dumps(row["inputs"]) and row["inputs"]["images"][0]["sha256"]


async def test_the_images_of_an_instruction_conversation_are_logged_as_their_hash_only(mcp_app) -> None:
    server, backend = mcp_app(ScoreJudge(lambda name, _: 5))
    conversation = [{"role": "user", "content": "What does the picture show?", "images": [IMAGE]}]
    await call(server, "score_response", {**ARGS, "instruction": conversation, "criteria": "c"})
    assert any(p["type"] == "image_url" for m in backend.requests[0]["messages"] if isinstance(m["content"], list) for p in m["content"])
    [row] = VerdictLog(server.app.store).recent("score_response")
    assert "base64" not in json.dumps(row["inputs"]) and row["inputs"]["instruction"][0]["images"][0]["sha256"]


def test_the_demo_says_each_criterions_score_and_the_overall() -> None:
    from judge_mcp.cli.demo_text import score_lines

    data = {"scale": [1, 10], "overall": 7.5, "scores": [
        {"criterion": "correct", "weight": 2.0, "score": 8.25, "parse_ok": True, "distribution": [0.1] * 10},
        {"criterion": "concise", "weight": 1.0, "score": None, "parse_ok": False, "distribution": None}]}
    assert score_lines(data) == ["correct (weight 2): 8.25 (probability-weighted over the scale)", "concise (weight 1): unreadable or off the scale",
                                 "OVERALL: 7.5 on 1 to 10."]
    assert score_lines({**data, "overall": None})[-1] == "OVERALL: none: a criterion's answer could not be read."
