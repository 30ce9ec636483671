"""compare_pair's verdict probabilities (p_better from token log-probabilities) and adaptive swap (swap="auto").

Backends are scripted OpenAI-compatible servers that send chosen `logprobs` over real HTTP: every expected
probability below is computed from the probabilities the script put on the wire.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from mcp import Client

from judge_mcp.backends.anthropic import AnthropicBackend
from judge_mcp.backends.base import ChatRequest, Message, TokenLogprob, user
from judge_mcp.backends.local import LocalBackend
from judge_mcp.methods import label_probs, pairwise
from judge_mcp.calls.cache import CallCache
from judge_mcp.calls.context import CallContext
from judge_mcp.contract.fields import InputError
from testkit.scripted_servers import Reply
from testkit.scripted_judges import GOOD, PAIR, logprob_content, shown_first, verdict_json
from judge_mcp.storage.verdict_log import VerdictLog



def prob_judge(p_first: dict[str, float | None]):
    """Names the answer shown first as better with P(letter A) = p_first[order], where the order is "AB" when the
    caller's A (BAD, Sydney) is shown first. The label written is the more likely letter; without a probability
    (None: no logprobs sent) the label is the correct one (Canberra better)."""

    def respond(payload: dict) -> Reply:
        order = "AB" if "Sydney" in shown_first(payload) else "BA"
        p = p_first[order]
        content = verdict_json(order == "BA" if p is None else p >= 0.5)
        return Reply(content=content, logprobs=logprob_content(content, p) if p is not None and payload.get("logprobs") else None)

    return respond


# ---- the pure part ------------------------------------------------------------------------------------------------
def tok(token: str, top: dict[str, float] | None = None) -> TokenLogprob:
    top = top or {token: 1.0}
    return TokenLogprob(token, math.log(top[token]), tuple((t, math.log(p)) for t, p in top.items()))


def test_letter_probability_renormalises_over_the_two_letters_and_sums_split_tokens() -> None:
    text = 'My verdict: [[B>A]]'
    tokens = [tok("My verdict:"), tok(" [["), tok("B", {"B": 0.3, "A": 0.1, " A": 0.1, "C": 0.5}), tok(">A]]")]
    # "A" and " A" both write the letter A after "[["; "C" is neither letter: 0.2 / (0.2 + 0.3)
    assert label_probs.first_better(tokens, text, "[[B>A]]") == pytest.approx(0.4)


def test_a_letter_inside_a_longer_token_is_read_after_the_tokens_prefix() -> None:
    text = '{"verdict": "[[A>B]]"}'
    tokens = [tok('{"verdict": "'), tok("[[A", {"[[A": 0.6, "[[B": 0.2, "[A": 0.2}), tok('>B]]"}')]
    assert label_probs.first_better(tokens, text, "[[A>B]]") == pytest.approx(0.75)


def test_tokens_around_a_stripped_code_fence_still_find_the_label() -> None:
    # llama.cpp generates ```json ... ``` around a JSON answer and strips the fence from the message content
    text = '{"verdict": "[[A>B]]"}'
    tokens = [tok("```json\n"), tok('{"verdict": "'), tok("[["), tok("A", {"A": 0.9, "B": 0.1}), tok('>B]]"}'), tok("\n```")]
    assert label_probs.first_better(tokens, text, "[[A>B]]") == pytest.approx(0.9)


def test_a_letter_missing_from_the_alternatives_counts_as_zero() -> None:
    tokens = [tok("[["), tok("B", {"B": 0.7, "1": 0.2}), tok(">A]]")]
    assert label_probs.first_better(tokens, "[[B>A]]", "[[B>A]]") == 0.0


def test_missing_pieces_give_none_never_a_number() -> None:
    good = [tok("[["), tok("B", {"B": 0.7, "A": 0.3}), tok(">A]]")]
    assert label_probs.first_better(None, "[[B>A]]", "[[B>A]]") is None
    assert label_probs.first_better([TokenLogprob("[[", -0.1), TokenLogprob("B", -0.2), TokenLogprob(">A]]", -0.1)], "[[B>A]]", "[[B>A]]") is None
    assert label_probs.first_better(good, "[[A>B]]", "[[A>B]]") is None  # the tokens wrote B, the text says A
    assert label_probs.first_better(good, "[[A>B]] then [[B>A]]", "[[B>A]]") is None  # label counts differ
    assert label_probs.first_better(good, "no label", "[[B>A]]") is None


def test_the_text_grammars_deciding_label_is_the_one_read() -> None:
    text = "Echo [[A>B]] ... my verdict: [[A>B]]"
    tokens = [tok("Echo "), tok("[["), tok("A", {"A": 0.99, "B": 0.01}), tok(">B]] ... my verdict: "), tok("[["), tok("A", {"A": 0.6, "B": 0.4}), tok(">B]]")]
    assert label_probs.first_better(tokens, text, "[[A>B]]", at=text.rindex("[[")) == pytest.approx(0.6)
    assert label_probs.first_better(tokens, text, "[[A>B]]", at=text.index("[[")) == pytest.approx(0.99)


# ---- the backend layer ----------------------------------------------------------------------------------------------
def test_log_probabilities_are_part_of_the_cache_key_only_when_asked_for() -> None:
    plain = user("q")
    asked = user("q", logprobs=True, top_logprobs=10)
    assert "logprobs" not in plain.to_record()  # requests without them keep the keys they always had
    assert plain.cache_key("b") != asked.cache_key("b")
    assert asked.cache_key("b") != user("q", logprobs=True, top_logprobs=5).cache_key("b")


def test_the_embedded_and_anthropic_payloads() -> None:
    request = user("q", logprobs=True, top_logprobs=7)
    local = LocalBackend("local", None).payload(request)
    assert local["logprobs"] is True and local["top_logprobs"] == 7
    assert "logprobs" not in LocalBackend("local", None).payload(user("q"))
    anthropic = AnthropicBackend("claude", "claude-x", api_key="k")
    assert anthropic.supports_logprobs is False and "logprobs" not in anthropic.payload(request)


async def test_anthropic_compare_pair_asks_for_none_and_returns_null(scripted, store) -> None:
    from testkit.scripted_servers import ScriptedAnthropicServer

    def respond(payload: dict) -> Reply:
        return Reply(content=verdict_json(True))

    server = ScriptedAnthropicServer(respond).start()
    try:
        backend = AnthropicBackend("claude", "claude-x", base_url=server.base_url, api_key="k", max_retries=0)
        result = await pairwise.compare_pair(CallContext(backend, CallCache(store), store), **PAIR)
    finally:
        server.stop()
    assert result.p_better is None and all(t.p_better is None for t in result.trials)
    assert all("logprobs" not in r for r in server.requests)


async def test_requests_ask_for_top_logprobs_and_p_better_is_the_mean_over_both_orders(make_judge) -> None:
    # AB: P(first = caller's A better) = 0.8; BA: P(first = caller's B better) = 0.3, so P(A better) = 0.7
    judge, server = make_judge(prob_judge({"AB": 0.8, "BA": 0.3}))
    result = await pairwise.compare_pair(judge, **PAIR)
    assert all(r["logprobs"] is True and r["top_logprobs"] == pairwise.TOP_LOGPROBS for r in server.requests)
    by_order = {t.order: t for t in result.trials}
    assert by_order["AB"].p_better.A == pytest.approx(0.8) and by_order["AB"].p_better.B == pytest.approx(0.2)
    assert by_order["BA"].p_better.A == pytest.approx(0.7)
    assert result.p_better.A == pytest.approx(0.75) and result.p_better.B == pytest.approx(0.25)
    # the labels: AB says first (A) better, BA says first (B) worse -> both name A; p_better agrees
    assert result.winner == "A" and result.consistent is True and result.swapped is True


@pytest.mark.parametrize("goal", ["worse", "better"])
async def test_the_letter_names_the_better_answer_under_either_goal(make_judge, goal: str) -> None:
    judge, _ = make_judge(prob_judge({"AB": 0.2, "BA": 0.9}))
    result = await pairwise.compare_pair(judge, goal=goal, **PAIR)
    # AB: P(A better) = 0.2; BA: P(B better) = 0.9, P(A better) = 0.1
    assert result.p_better.A == pytest.approx(0.15) and result.winner == "B"


async def test_position_bias_cancels_in_the_mean(make_judge) -> None:
    # a judge that favours whatever is shown first, equally in both orders: the mean is 0.5 each
    judge, _ = make_judge(prob_judge({"AB": 0.9, "BA": 0.9}))
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.winner is None and result.consistent is False
    assert result.p_better.A == pytest.approx(0.5) and result.p_better.B == pytest.approx(0.5)


async def test_swap_false_gives_the_one_orders_probability(make_judge) -> None:
    judge, server = make_judge(prob_judge({"AB": 0.9, "BA": 0.9}))
    result = await pairwise.compare_pair(judge, swap=False, **PAIR)
    assert len(server.requests) == 1 and result.swapped is False
    assert result.p_better.A == pytest.approx(0.9) and result.consistent is True


async def test_a_server_without_logprobs_gives_null(make_judge) -> None:
    judge, _ = make_judge(prob_judge({"AB": None, "BA": None}))
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.winner == "B" and result.p_better is None
    assert [t.p_better for t in result.trials] == [None, None]


async def test_one_order_without_probabilities_makes_the_mean_null(make_judge) -> None:
    judge, _ = make_judge(prob_judge({"AB": 0.8, "BA": None}))
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.trials[0].p_better.A == pytest.approx(0.8) and result.trials[1].p_better is None
    assert result.p_better is None


async def test_text_grammar_answers_read_the_deciding_label(make_judge) -> None:
    def respond(payload: dict) -> Reply:
        first_bad = "Sydney" in shown_first(payload)
        label = "[[B>A]]" if first_bad else "[[A>B]]"
        content = f"Assistant A says Sydney. My final verdict is: {label}"
        return Reply(content=content, logprobs=logprob_content(content, 0.25 if first_bad else 0.7))

    judge, server = make_judge(respond)
    judge.backend.supports_json_schema = False
    result = await pairwise.compare_pair(judge, **PAIR)
    assert "response_format" not in server.requests[0]
    # AB (Sydney first): P(A better) = 0.25; BA (Canberra first): P(first = B better) = 0.7 -> P(A better) = 0.3
    assert result.winner == "B" and result.p_better.A == pytest.approx(0.275)


async def test_a_reasked_verdict_is_read_from_the_reasks_tokens(make_judge) -> None:
    def respond(payload: dict) -> Reply:
        if len(payload["messages"]) <= 2:
            return Reply(content="I cannot decide.", logprobs=logprob_content("I cannot decide.", None))
        content = verdict_json("Sydney" not in shown_first(payload))
        return Reply(content=content, logprobs=logprob_content(content, 0.35 if "Sydney" in shown_first(payload) else 0.65))

    judge, _ = make_judge(respond)
    result = await pairwise.compare_pair(judge, **PAIR)
    assert all(t.reasked for t in result.trials)
    assert result.p_better.A == pytest.approx(0.35)


async def test_an_unparsed_trial_has_no_probability(make_judge) -> None:
    judge, _ = make_judge(lambda p: Reply(content="No idea.", logprobs=logprob_content("No idea.", None)))
    result = await pairwise.compare_pair(judge, **PAIR)
    assert not any(t.parse_ok for t in result.trials) and result.p_better is None


async def test_a_refused_logprobs_parameter_is_dropped_once_and_remembered(make_judge) -> None:
    def respond(payload: dict) -> Reply:
        if "logprobs" in payload:
            body = {"error": {"message": "Unsupported parameter: 'logprobs' is not supported with this model.", "param": "logprobs"}}
            return Reply(status=400, raw_body=json.dumps(body).encode())
        return Reply(content=verdict_json("Sydney" not in shown_first(payload)))

    judge, server = make_judge(respond)
    result = await pairwise.compare_pair(judge, swap=False, **PAIR)
    assert result.winner == "B" and result.p_better is None
    assert len(server.requests) == 2 and "logprobs" in server.requests[0] and "logprobs" not in server.requests[1]
    assert judge.records[0]["dropped_parameters"] == ["logprobs"] and judge.backend.supports_logprobs is False
    # remembered: the next judgment asks for none and sends one request per order
    again = await pairwise.compare_pair(CallContext(judge.backend, judge.cache, judge.store), **{**PAIR, "response_b": GOOD + " Yes."})
    assert len(server.requests) == 4 and all("logprobs" not in r for r in server.requests[2:])
    assert again.winner == "B" and again.p_better is None


async def test_a_400_about_something_else_is_not_taken_for_a_logprobs_refusal(make_judge) -> None:
    from judge_mcp.backends.errors import BackendError

    judge, server = make_judge(lambda p: Reply(status=400, raw_body=b'{"error": {"message": "context too long"}}'))
    with pytest.raises(BackendError, match="context too long"):
        await pairwise.compare_pair(judge, swap=False, **PAIR)
    assert len(server.requests) == 1 and judge.backend.supports_logprobs is True


async def test_a_cache_hit_keeps_the_probabilities(make_judge, store) -> None:
    judge, server = make_judge(prob_judge({"AB": 0.8, "BA": 0.3}))
    first = await pairwise.compare_pair(judge, **PAIR)
    # a new cache over the same database: the answers come from SQLite, not from the in-flight map
    fresh = CallContext(judge.backend, CallCache(store), store)
    second = await pairwise.compare_pair(fresh, **PAIR)
    assert len(server.requests) == 2 and second.usage.cached_calls == 2 and second.usage.calls == 0
    assert second.p_better == first.p_better and second.p_better.A == pytest.approx(0.75)
    assert [t.p_better for t in second.trials] == [t.p_better for t in first.trials]


async def test_a_non_finite_or_malformed_logprobs_block_gives_null_not_a_failure(make_judge) -> None:
    def respond(payload: dict) -> Reply:
        return Reply(content=verdict_json(True), logprobs=[{"token": 5, "logprob": "x"}])

    judge, _ = make_judge(respond)
    result = await pairwise.compare_pair(judge, swap=False, **PAIR)
    assert result.winner == "A" and result.p_better is None


# ---- adaptive swap ---------------------------------------------------------------------------------------------------
async def test_auto_judges_one_order_when_the_first_is_confident(make_judge) -> None:
    judge, server = make_judge(prob_judge({"AB": 0.9, "BA": 0.9}))
    result = await pairwise.compare_pair(judge, swap="auto", **PAIR)
    assert len(server.requests) == 1 and result.usage.calls == 1
    assert result.swapped is False and result.consistent is True and result.winner == "A"
    assert [t.order for t in result.trials] == ["AB"] and result.p_better.A == pytest.approx(0.9)


async def test_auto_judges_both_orders_when_the_first_is_not_confident(make_judge) -> None:
    judge, server = make_judge(prob_judge({"AB": 0.7, "BA": 0.2}))  # margin 0.4 < 0.5
    result = await pairwise.compare_pair(judge, swap="auto", **PAIR)
    assert len(server.requests) == 2 and result.swapped is True
    assert [t.order for t in result.trials] == ["AB", "BA"]
    assert result.winner == "A" and result.consistent is True  # AB: [[A>B]] (A better); BA: [[B>A]] (A better)
    assert result.p_better.A == pytest.approx((0.7 + 0.8) / 2)


async def test_auto_margin_is_the_callers(make_judge) -> None:
    judge, server = make_judge(prob_judge({"AB": 0.7, "BA": 0.2}))
    result = await pairwise.compare_pair(judge, swap="auto", swap_margin=0.4, **PAIR)  # margin 0.4 >= 0.4
    assert len(server.requests) == 1 and result.swapped is False


async def test_auto_judges_both_orders_without_probabilities_or_when_unparsed(make_judge) -> None:
    judge, server = make_judge(prob_judge({"AB": None, "BA": None}))
    result = await pairwise.compare_pair(judge, swap="auto", **PAIR)
    assert len(server.requests) == 2 and result.swapped is True and result.consistent is True

    def unparsed_first(payload: dict) -> Reply:
        if "Sydney" in shown_first(payload):
            return Reply(content="Hmm.", logprobs=logprob_content("Hmm.", None))
        return prob_judge({"AB": 0.99, "BA": 0.99})(payload)

    judge, server = make_judge(unparsed_first)
    result = await pairwise.compare_pair(judge, swap="auto", **PAIR)
    assert result.swapped is True and result.winner is None and result.trials[0].parse_ok is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"swap": "yes"}, "'swap' must be true, false or \"auto\""),
        ({"swap": 1}, "'swap' must be true, false or \"auto\""),
        ({"swap_margin": 0.3}, "'swap_margin' applies only with swap \"auto\""),
        ({"swap": "auto", "swap_margin": 1.5}, "'swap_margin' must be a number from 0 to 1"),
        ({"swap": "auto", "swap_margin": True}, "'swap_margin' must be a number from 0 to 1"),
    ],
)
async def test_bad_swap_arguments_are_clear_errors(make_judge, kwargs: dict, message: str) -> None:
    judge, server = make_judge(prob_judge({"AB": 0.9, "BA": 0.9}))
    with pytest.raises(InputError, match=re.escape(message)):
        await pairwise.compare_pair(judge, **{**PAIR, **kwargs})
    assert server.requests == []


# ---- through MCP ---------------------------------------------------------------------------------------------------
async def test_p_better_and_auto_swap_through_the_official_client(mcp_app) -> None:
    server, backend = mcp_app(prob_judge({"AB": 0.95, "BA": 0.4}))
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        schema = tools["compare_pair"]
        auto = (await client.call_tool("compare_pair", {**PAIR, "swap": "auto"})).structured_content
        both = (await client.call_tool("compare_pair", PAIR)).structured_content
        tight = await client.call_tool("compare_pair", {**PAIR, "swap": "auto", "swap_margin": 0.95})
        wrong = await client.call_tool("compare_pair", {**PAIR, "swap_margin": 0.2})
    assert {"p_better", "swapped"} <= set(schema.output_schema["properties"])
    assert {"swap", "swap_margin"} <= set(schema.input_schema["properties"])
    assert auto["swapped"] is False and auto["consistent"] is True and auto["usage"]["calls"] == 1
    assert auto["p_better"]["A"] == pytest.approx(0.95) and auto["trials"][0]["p_better"]["B"] == pytest.approx(0.05)
    # swap=true: AB is answered from the cache, BA is new; P(A better) = (0.95 + 0.6) / 2
    assert both["usage"] == {**both["usage"], "calls": 1, "cached_calls": 1}
    assert both["p_better"]["A"] == pytest.approx(0.775) and both["swapped"] is True
    assert not tight.is_error and tight.structured_content["swapped"] is True  # margin 0.9 < 0.95
    assert wrong.is_error and "'swap_margin' applies only with swap \"auto\"" in wrong.content[0].text
    logged = [row["output"]["p_better"]["A"] for row in VerdictLog(server.app.store).recent("compare_pair")]
    assert sorted(logged) == pytest.approx(sorted([0.95, 0.775, 0.775]))


def test_request_keeps_logprobs_through_continuations_and_reasks() -> None:
    from dataclasses import replace

    request = user("q", logprobs=True, top_logprobs=10)
    follow = replace(request, messages=request.messages + (Message("assistant", "x"), Message("user", "go on")))
    assert isinstance(follow, ChatRequest) and follow.logprobs and follow.top_logprobs == 10


async def test_a_continued_answer_is_read_only_when_its_last_piece_holds_the_label(make_judge) -> None:
    def respond(payload: dict) -> Reply:
        continuing = len(payload["messages"]) > 2
        first_bad = "Sydney" in shown_first(payload)
        label = "[[B>A]]" if first_bad else "[[A>B]]"
        if not continuing:
            return Reply(content="Assistant A says Sydney and", finish_reason="length", logprobs=logprob_content("Assistant A says Sydney and", None))
        content = f" so my final verdict is: {label}"
        return Reply(content=content, logprobs=logprob_content(content, 0.1 if first_bad else 0.8))

    judge, _ = make_judge(respond)
    judge.backend.supports_json_schema = False
    result = await pairwise.compare_pair(judge, **PAIR)
    assert all(t.continued for t in result.trials)
    assert result.p_better.A == pytest.approx((0.1 + 0.2) / 2)

    def label_first(payload: dict) -> Reply:
        first_bad = "Sydney" in shown_first(payload)
        label = "[[B>A]]" if first_bad else "[[A>B]]"
        if len(payload["messages"]) <= 2:
            content = f"My final verdict is: {label} because"
            return Reply(content=content, finish_reason="length", logprobs=logprob_content(content, 0.1 if first_bad else 0.8))
        return Reply(content=" B says Canberra.", logprobs=logprob_content(" B says Canberra.", None))

    judge, _ = make_judge(label_first)
    judge.backend.supports_json_schema = False
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.winner == "B" and all(t.continued for t in result.trials)
    assert [t.p_better for t in result.trials] == [None, None] and result.p_better is None
