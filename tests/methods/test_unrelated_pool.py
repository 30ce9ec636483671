"""Grade Score's unrelated option (methods/unrelated_pool.py): picked deterministically, never from the same
instruction or a repeated option; the built-in pool by default, earlier calls' options only when the operator
enables the shared pool (JUDGE_MCP_SHARED_OPTION_POOL; a bad value is a configuration error naming it); the option
adds a trial at every position, is reported, and a judge that picks it is flagged."""

from __future__ import annotations

import json

import pytest

from judge_mcp.methods.grade_score.scoring import grade_score_options
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.grade_score.unrelated_pool import BUILTIN_POOL, call_seed, choose_unrelated, insertion_position, pick
from judge_mcp.config.settings import ConfigError, load_settings
from testkit.scripted_judges import INSTRUCTION, OPTIONS, answer, picks_text, shown


def test_pick_skips_same_instruction_and_repeated_options_and_is_deterministic():
    seed = call_seed("Q", ["a", "b"])
    candidates = [("Q", "other answer"), ("Other", " A "), ("Other", "fine one"), ("Else", "fine two")]
    chosen = pick(seed, "Q", ["a", "b"], candidates)
    assert chosen in [("Other", "fine one"), ("Else", "fine two")]
    assert pick(seed, "Q", ["a", "b"], list(reversed(candidates))) == chosen  # order of the pool does not matter
    assert pick(seed, "Q", ["a", "b"], candidates[:2]) is None


def test_choose_unrelated_without_store_uses_the_builtin_pool():
    u = choose_unrelated(None, "Name a colour.", ["Red", "Blue"], shared=True)
    assert u.source == "builtin" and (u.instruction, u.text) in BUILTIN_POOL
    assert choose_unrelated(None, "Name a colour.", ["Red", "Blue"], shared=True) == u
    positions = {insertion_position(call_seed(f"q{i}", ["x", "y"]), 2) for i in range(40)}
    assert positions == {0, 1, 2}  # every slot of the cycle is used across inputs


async def test_unrelated_option_adds_a_trial_and_is_reported(make_judge):
    judge, server = make_judge(picks_text(OPTIONS[0]))
    judge = CallContext(judge.backend, judge.cache, None)  # no store: the built-in pool
    opts = OPTIONS[:3]
    result = await grade_score_options(judge, instruction=INSTRUCTION, options=opts, unrelated_option=True)
    assert len(server.requests) == 4 and len(result.trials) == 4
    assert result.unrelated_index == 3 and result.unrelated_source == "builtin"
    assert result.unrelated_option in [answer for _, answer in BUILTIN_POOL]
    assert result.unrelated_picked == 0
    assert all(sorted(t.order) == [0, 1, 2, 3] for t in result.trials)
    assert sorted(t.order.index(3) for t in result.trials) == [0, 1, 2, 3]  # at every position once
    assert all(result.unrelated_option in shown(p) for p in server.requests)
    assert len(result.position_counts) == 4 and result.option_counts == [4, 0, 0, 0]
    assert result.grade_score == 1.0 and result.winner_index == 0


async def test_a_judge_that_picks_the_unrelated_option_is_flagged(make_judge):
    seen: dict[str, str] = {}

    def responder(p):
        s = shown(p)
        odd = next(x for x in s if x not in OPTIONS)
        seen["odd"] = odd
        return answer(p, s.index(odd) + 1)

    judge, _ = make_judge(responder)
    result = await grade_score_options(judge, instruction=INSTRUCTION, options=OPTIONS[:2], unrelated_option=True)
    assert result.unrelated_picked == 3 and result.option_counts == [0, 0, 3]
    assert result.unrelated_option == seen["odd"]
    assert result.winner_index is None  # the mode is the unrelated option
    assert any("unrelated" in w for w in result.warnings)


async def test_unrelated_option_comes_from_earlier_calls_and_repeats_hit_the_cache(make_judge, store):
    judge, _ = make_judge(lambda p: answer(p, 1))
    first = await grade_score_options(judge, instruction="Name a primary colour.", options=["Red.", "Blue."])
    assert first.unrelated_index is None
    stored = {r["option"] for r in store.query("SELECT option FROM option_pool")}
    assert stored == {"Red.", "Blue."}

    judge, server = make_judge(lambda p: answer(p, 1))
    judge.shared_option_pool = True  # the operator opted in to the shared pool (Settings.shared_option_pool)
    kwargs = dict(instruction=INSTRUCTION, options=OPTIONS[:2], unrelated_option=True)
    second = await grade_score_options(judge, **kwargs)
    assert second.unrelated_source == "pool" and second.unrelated_option in {"Red.", "Blue."}
    assert second.usage.calls == 3 and len(server.requests) == 3

    fresh = CallContext(judge.backend, judge.cache, judge.store, shared_option_pool=True)  # same backend (the cache key includes its URL)
    again = await grade_score_options(fresh, **kwargs)
    assert again.unrelated_option == second.unrelated_option
    assert [t.order for t in again.trials] == [t.order for t in second.trials]
    assert again.usage.calls == 0 and again.usage.cached_calls == 3 and len(server.requests) == 3


async def test_stored_options_of_other_calls_are_not_shown_unless_the_shared_pool_is_enabled(make_judge, store):
    judge, _ = make_judge(lambda p: answer(p, 1))
    await grade_score_options(judge, instruction="Name a primary colour.", options=["Secret red.", "Secret blue."])
    assert {r["option"] for r in store.query("SELECT option FROM option_pool")} == {"Secret red.", "Secret blue."}

    judge, server = make_judge(lambda p: answer(p, 1))
    result = await grade_score_options(judge, instruction=INSTRUCTION, options=OPTIONS[:2], unrelated_option=True)
    assert result.unrelated_source == "builtin"
    assert result.unrelated_option in [a for _, a in BUILTIN_POOL]
    assert not any("Secret" in json.dumps(p) for p in server.requests)  # the other call's text never reaches the judge

    assert choose_unrelated(store, INSTRUCTION, OPTIONS[:2], shared=False).source == "builtin"
    assert choose_unrelated(store, INSTRUCTION, OPTIONS[:2], shared=True).source == "pool"


async def test_the_shared_pool_setting_reaches_grade_score_through_the_server(mcp_app):
    """JUDGE_MCP_SHARED_OPTION_POOL is read with the other settings and handed to the method by the App: off by
    default, on when the operator sets it."""
    from mcp import Client

    for setting, source in ((None, "builtin"), ("1", "pool")):
        server, _ = mcp_app(lambda p: answer(p, 1), **({} if setting is None else {"JUDGE_MCP_SHARED_OPTION_POOL": setting}))
        async with Client(server) as client:
            await client.call_tool("grade_score_options", {"instruction": "Name a primary colour.", "options": ["Red.", "Blue."]})
            result = await client.call_tool("grade_score_options", {"instruction": INSTRUCTION, "options": OPTIONS[:2], "unrelated_option": True})
        assert not result.is_error and result.structured_content["unrelated_source"] == source


def test_a_bad_shared_pool_setting_is_a_configuration_error_naming_it():
    with pytest.raises(ConfigError, match="JUDGE_MCP_SHARED_OPTION_POOL"):
        load_settings({"JUDGE_MCP_SHARED_OPTION_POOL": "maybe"})
    assert load_settings({}).shared_option_pool is False
    assert load_settings({"JUDGE_MCP_SHARED_OPTION_POOL": " ON "}).shared_option_pool is True
    assert load_settings({"JUDGE_MCP_SHARED_OPTION_POOL": "off"}).shared_option_pool is False
