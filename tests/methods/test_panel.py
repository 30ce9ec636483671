"""Judge panels and the self-preference guard: the pure vote and family table, then compare_pair and
grade_score_options over three scripted OpenAI-compatible servers through the official MCP client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from judge_mcp.runtime.app import App
from judge_mcp.config.settings import load_settings
from judge_mcp.methods import panel
from judge_mcp.server.build import build_server
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import ComparePairArgs, GradeScoreOptionsArgs
from testkit.scripted_servers import Reply
from testkit.scripted_judges import INSTRUCTION, OPTIONS, PAIR, answer, correct_judge, first_shown_judge, picks_text
from judge_mcp.storage.verdict_log import VerdictLog

def wrong_judge(payload: dict) -> str:
    """Consistently prefers the answer saying Sydney (response_a in PAIR)."""
    verdict = json.loads(correct_judge(payload))["verdict"]
    return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]" if verdict == "[[B>A]]" else "[[B>A]]"})


def failing(payload: dict) -> Reply:
    return Reply(status=500)


# ---- pure parts -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "model, expected",
    [
        ("openai/gpt-4o-mini", {"openai"}),
        ("o3-mini", {"openai"}),
        ("chatgpt-4o-latest", {"openai"}),
        ("anthropic/claude-sonnet-4-5", {"anthropic"}),
        ("gemini-1.5-pro", {"google"}),
        ("google/gemma-2-9b-it", {"google"}),
        ("meta-llama/Llama-3.1-8B-Instruct", {"llama"}),
        ("mistralai/Mixtral-8x7B", {"mistral"}),
        ("openai/qwen2.5:7b-instruct", {"qwen"}),  # the backend kind is not the family
        ("deepseek-r1-distill-qwen-7b", {"deepseek", "qwen"}),
        ("microsoft/Phi-3-mini", {"phi"}),
        ("local/SmolLM2-135M-Instruct", {"smollm"}),
        ("dolphin-2.9", set()),  # "phi" inside a word is not Phi
        ("openai/scripted-model", set()),
        ("", set()),
    ],
)
def test_model_families(model: str, expected: set[str]) -> None:
    assert panel.families(model) == expected


@pytest.mark.parametrize(
    "votes, winner, needed, tied",
    [
        (["B", "B", "A"], "B", 2, []),
        (["A", "B"], None, 2, ["A", "B"]),  # a tie is no winner
        (["B", None, None], None, 2, []),  # abstentions count: one vote of three is no majority
        (["B", "B", None], "B", 2, []),
        (["A", "A", "B", "B"], None, 3, ["A", "B"]),
        (["A", "A", "B", None], None, 3, []),
        (["B"], None, None, []),  # one member answered of a panel: no verdict
    ],
)
def test_tally_needs_more_than_half_of_the_members_that_answered(votes, winner, needed, tied) -> None:
    t = panel.tally(votes, quorum=2)
    assert (t.winner, t.needed, t.tied) == (winner, needed, tied)
    assert t.answered == len(votes) and t.abstained == votes.count(None)


def test_a_panel_of_one_left_by_exclusion_gives_that_judges_verdict() -> None:
    assert panel.tally(["A"], quorum=panel.quorum(1)).winner == "A"
    assert panel.tally([None], quorum=panel.quorum(1)).winner is None


def test_argument_checks_name_the_problem() -> None:
    with pytest.raises(InputError, match="either 'backend'"):
        ComparePairArgs.parse({**PAIR, "backend": "a", "backends": ["a", "b"]})
    with pytest.raises(InputError, match="repeated: a"):
        ComparePairArgs.parse({**PAIR, "backends": ["a", "b", "a"]})
    with pytest.raises(InputError, match="one model per answer: 3 \\(one per option\\), got 2"):
        GradeScoreOptionsArgs.parse({"instruction": "q", "options": ["x", "y", "z"], "response_models": ["gpt-4o", "claude"]})
    with pytest.raises(InputError, match="needs 'response_models'"):
        ComparePairArgs.parse({**PAIR, "exclude_same_family": True})
    plain = ComparePairArgs.parse(PAIR)
    assert plain.backends is None and panel.authors(plain) is None


# ---- three scripted backends ------------------------------------------------------------------------------------------
@pytest.fixture
def panel_server(scripted, tmp_path: Path):
    """panel_server({name: (responder, model)}) -> (MCPServer, {name: ScriptedServer}); the default backend is the
    first one. Members get no retries, so a failing member fails at once."""
    apps: list[App] = []

    def make(members: dict[str, tuple]):
        servers = {name: scripted(responder) for name, (responder, _) in members.items()}
        toml = "".join(
            f'[backends.{name}]\nkind = "openai"\nbase_url = "{servers[name].base_url}"\nmodel = "{model}"\nmax_retries = 0\n\n'
            for name, (_, model) in members.items()
        )
        config = tmp_path / "judge.toml"
        config.write_text(toml)
        first = next(iter(servers.values()))
        env = {
            "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": first.base_url, "JUDGE_MCP_MODEL": "scripted-model",
            "JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_MAX_RETRIES": "0", "JUDGE_MCP_CONFIG": str(config),
        }
        app = App(load_settings(env))
        apps.append(app)
        return build_server(app), servers

    yield make
    for app in apps:
        app.store.close()


async def call(server, tool: str, arguments: dict, progress: list | None = None):
    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append((done, total, message))

    async with Client(server) as client:
        return await client.call_tool(tool, arguments, progress_callback=on_progress)


async def test_majority_verdict_with_each_members_verdict_usage_sum_and_one_log_row(panel_server) -> None:
    server, servers = panel_server({"a": (correct_judge, "m-a"), "b": (correct_judge, "m-b"), "c": (wrong_judge, "m-c")})
    progress: list = []
    result = await call(server, "compare_pair", {**PAIR, "backends": ["a", "b", "c"]}, progress)
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["winner"] == "B" and data["consistent"] is False  # majority, not unanimous
    assert sorted(p[:2] for p in progress) == [(1, 3), (2, 3), (3, 3)] and all("panel member" in p[2] for p in progress)
    assert [(m["backend"], m["model"], m["status"], m["winner"], m["consistent"]) for m in data["panel"]] == [
        ("a", "openai/m-a", "ok", "B", True), ("b", "openai/m-b", "ok", "B", True), ("c", "openai/m-c", "ok", "A", True),
    ]
    assert all(len(m["trials"]) == 2 and m["usage"]["calls"] == 2 for m in data["panel"])
    assert data["panel_votes"] == {"votes": {"A": 1, "B": 2}, "answered": 3, "abstained": 0, "failed": 0, "excluded": 0, "needed": 2}
    assert data["usage"]["calls"] == 6 and data["usage"]["prompt_tokens"] == 60 and data["usage"]["completion_tokens"] == 30
    assert data["model"] == "panel: openai/m-a, openai/m-b, openai/m-c" and data["trials"] == []
    assert all(len(s.requests) == 2 for s in servers.values())
    rows = VerdictLog(server.app.store).recent("compare_pair")
    assert len(rows) == 1 and rows[0]["backend"] == "a+b+c" and rows[0]["inputs"]["backends"] == ["a", "b", "c"]
    assert sorted(r["panel_member"] for r in rows[0]["calls"]) == ["a", "a", "b", "b", "c", "c"]


async def test_unanimous_panel_is_consistent(panel_server) -> None:
    server, _ = panel_server({"a": (correct_judge, "m-a"), "b": (correct_judge, "m-b")})
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "b"]})).structured_content
    assert data["winner"] == "B" and data["consistent"] is True and data["warnings"] == []


async def test_a_tie_is_no_winner(panel_server) -> None:
    server, _ = panel_server({"a": (correct_judge, "m-a"), "b": (wrong_judge, "m-b")})
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "b"]})).structured_content
    assert data["winner"] is None and data["panel_votes"]["votes"] == {"A": 1, "B": 1}
    assert any("tied" in w for w in data["warnings"])


async def test_abstentions_count_in_the_denominator(panel_server) -> None:
    server, _ = panel_server({"a": (correct_judge, "m-a"), "b": (first_shown_judge, "m-b"), "c": (first_shown_judge, "m-c")})
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "b", "c"]})).structured_content
    assert [m["winner"] for m in data["panel"]] == ["B", None, None]
    assert data["winner"] is None and data["panel_votes"]["abstained"] == 2 and data["panel_votes"]["needed"] == 2
    assert any("no answer has a majority" in w for w in data["warnings"])  # one answer, singular
    # with one abstention of three, two votes carry it
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "default", "b"]})).structured_content
    assert data["winner"] == "B" and data["panel_votes"]["abstained"] == 1


async def test_a_failing_member_is_reported_and_the_rest_decide(panel_server) -> None:
    server, _ = panel_server({"a": (correct_judge, "m-a"), "b": (correct_judge, "m-b"), "c": (failing, "m-c")})
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "b", "c"]})).structured_content
    assert data["winner"] == "B"
    failed = data["panel"][2]
    assert failed["status"] == "failed" and "backend 'c'" in failed["error"] and failed["winner"] is None
    assert data["panel_votes"]["failed"] == 1 and data["panel_votes"]["answered"] == 2
    assert any("panel member 'c' failed" in w for w in data["warnings"])


async def test_fewer_than_two_answering_members_give_no_verdict_and_all_failing_is_an_error(panel_server) -> None:
    server, _ = panel_server({"a": (correct_judge, "m-a"), "b": (failing, "m-b"), "c": (failing, "m-c")})
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "b", "c"]})).structured_content
    assert data["panel"][0]["winner"] == "B" and data["winner"] is None and data["panel_votes"]["needed"] is None
    assert any("only 1 of 3 panel members answered" in w for w in data["warnings"])
    result = await call(server, "compare_pair", {**PAIR, "backends": ["b", "c"]})
    assert result.is_error and "backend '" in result.content[0].text and "failed" in result.content[0].text


async def test_same_family_judges_warn_and_can_be_excluded(panel_server) -> None:
    members = {"gpt": (correct_judge, "gpt-4o-mini"), "claude": (correct_judge, "claude-haiku"), "qwen": (wrong_judge, "qwen2.5:7b")}
    server, servers = panel_server(members)
    authors = {"response_models": ["gpt-4o", "llama-3.1-70b"]}
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["gpt", "claude", "qwen"], **authors})).structured_content
    assert data["self_preference"] == [
        {"backend": "gpt", "judge_model": "openai/gpt-4o-mini", "families": ["openai"], "answers": [0], "excluded": False}
    ]
    assert any("judge 'gpt'" in w and "openai family" in w and "response_a (by gpt-4o)" in w for w in data["warnings"])
    assert data["panel"][0]["status"] == "ok" and len(servers["gpt"].requests) == 2

    data = (await call(server, "compare_pair", {**PAIR, "backends": ["gpt", "claude", "qwen"], **authors, "exclude_same_family": True})).structured_content
    assert data["panel"][0]["status"] == "excluded" and data["panel"][0]["usage"] is None
    assert len(servers["gpt"].requests) == 2  # not asked again
    assert data["self_preference"][0]["excluded"] is True and data["panel_votes"]["excluded"] == 1
    assert data["winner"] is None and data["panel_votes"]["votes"] == {"A": 1, "B": 1}  # claude vs qwen: a tie

    result = await call(server, "compare_pair", {**PAIR, "backends": ["gpt", "claude"], "response_models": ["gpt-4o", "claude-opus-4"], "exclude_same_family": True})
    assert result.is_error and "exclude_same_family leaves no judge" in result.content[0].text
    assert "'gpt' (openai/gpt-4o-mini, openai)" in result.content[0].text


async def test_exclusion_leaving_one_judge_gives_its_verdict_with_a_warning(panel_server) -> None:
    server, _ = panel_server({"gpt": (correct_judge, "gpt-4o-mini"), "claude": (correct_judge, "claude-haiku")})
    args = {**PAIR, "backends": ["gpt", "claude"], "response_models": ["gpt-4o", "o3"], "exclude_same_family": True}
    data = (await call(server, "compare_pair", args)).structured_content
    assert data["winner"] == "B" and [m["status"] for m in data["panel"]] == ["excluded", "ok"]
    assert any("left one judge ('claude')" in w for w in data["warnings"])


async def test_a_single_judge_gets_the_self_preference_warning_and_keeps_its_output(panel_server) -> None:
    server, _ = panel_server({"gpt": (correct_judge, "gpt-4o-mini")})
    plain = (await call(server, "compare_pair", {**PAIR, "backend": "gpt"})).structured_content
    assert plain["winner"] == "B" and plain["model"] == "openai/gpt-4o-mini" and len(plain["trials"]) == 2
    assert plain["panel"] is None and plain["panel_votes"] is None and plain["self_preference"] is None and plain["warnings"] == []
    data = (await call(server, "compare_pair", {**PAIR, "backend": "gpt", "response_models": ["mistral-large", "gpt-4.1"]})).structured_content
    assert data["winner"] == "B" and data["self_preference"][0]["answers"] == [1]
    assert any("response_b (by gpt-4.1)" in w for w in data["warnings"])
    result = await call(server, "compare_pair", {**PAIR, "backend": "gpt", "response_models": ["x", "gpt-4.1"], "exclude_same_family": True})
    assert result.is_error and "leaves no judge" in result.content[0].text


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({**PAIR, "backend": "a", "backends": ["a", "b"]}, "either 'backend'"),
        ({**PAIR, "backends": ["a", "nope"]}, "unknown backend 'nope'"),
        ({**PAIR, "backends": ["a", "a"]}, "repeated: a"),
        ({**PAIR, "backends": ["a"]}, "'backends' must hold 2 to 8 items, got 1"),
        ({**PAIR, "response_models": ["gpt-4o"]}, "'response_models' must hold 2 to 2 items, got 1"),
        ({**PAIR, "exclude_same_family": True}, "needs 'response_models'"),
    ],
)
async def test_bad_panel_arguments_are_named_errors_before_any_call(panel_server, arguments, message) -> None:
    server, servers = panel_server({"a": (correct_judge, "m-a"), "b": (correct_judge, "m-b")})
    result = await call(server, "compare_pair", arguments)
    assert result.is_error and message in result.content[0].text, result.content[0].text
    assert all(s.requests == [] for s in servers.values())


# ---- grade_score_options ----------------------------------------------------------------------------------------------
def first_slot(payload: dict) -> str:
    return answer(payload, 1)


async def test_grade_panel_votes_by_member_modes_and_pools_the_counts(panel_server) -> None:
    right, slot = picks_text(OPTIONS[0]), first_slot  # the position-biased member's mode is a 4-way tie: it abstains
    server, servers = panel_server({"a": (right, "m-a"), "b": (right, "m-b"), "c": (slot, "m-c")})
    result = await call(server, "grade_score_options", {"instruction": INSTRUCTION, "options": OPTIONS, "backends": ["a", "b", "c"]})
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["winner_index"] == 0 and data["tied_indices"] == []
    assert [(m["winner_index"], m["tied_indices"], m["grade_score"]) for m in data["panel"]] == [(0, [], 1.0), (0, [], 1.0), (None, [0, 1, 2, 3], 0.0)]
    assert data["panel_votes"]["votes"] == {"0": 2} and data["panel_votes"]["abstained"] == 1
    assert data["option_counts"] == [9, 1, 1, 1] and data["position_counts"] == [6, 2, 2, 2]  # all 12 trials pooled
    assert data["parsed_trials"] == 12 and data["usage"]["calls"] == 12 and data["trials"] == []
    assert all(len(s.requests) == 4 for s in servers.values())


async def test_grade_panel_tie_and_response_models_length(panel_server) -> None:
    server, _ = panel_server({"a": (picks_text(OPTIONS[0]), "m-a"), "b": (picks_text(OPTIONS[2]), "m-b")})
    data = (await call(server, "grade_score_options", {"instruction": INSTRUCTION, "options": OPTIONS, "backends": ["a", "b"]})).structured_content
    assert data["winner_index"] is None and data["tied_indices"] == [0, 2]
    result = await call(server, "grade_score_options", {"instruction": INSTRUCTION, "options": OPTIONS, "backends": ["a", "b"], "response_models": ["gpt-4o", "x", "y"]})
    assert result.is_error and "'response_models' must name one model per answer: 4 (one per option), got 3" in result.content[0].text


async def test_grade_self_preference_names_the_options(panel_server) -> None:
    server, _ = panel_server({"a": (picks_text(OPTIONS[0]), "gemma-2-9b"), "b": (picks_text(OPTIONS[0]), "phi-4")})
    models = ["gemini-2.0-flash", "qwen3", "gemma-3", "llama-3"]
    data = (await call(server, "grade_score_options", {"instruction": INSTRUCTION, "options": OPTIONS, "backends": ["a", "b"], "response_models": models})).structured_content
    assert data["winner_index"] == 0
    assert data["self_preference"] == [{"backend": "a", "judge_model": "openai/gemma-2-9b", "families": ["google"], "answers": [0, 2], "excluded": False}]
    assert any("options[0] (by gemini-2.0-flash), options[2] (by gemma-3)" in w for w in data["warnings"])


async def test_hostile_backend_names_and_model_names_are_only_looked_up_or_matched(panel_server) -> None:
    server, servers = panel_server({"a": (correct_judge, "m-a"), "b": (correct_judge, "m-b")})
    result = await call(server, "compare_pair", {**PAIR, "backends": ["a", "../../etc/passwd"]})
    assert result.is_error and "unknown backend '../../etc/passwd'" in result.content[0].text
    assert all(s.requests == [] for s in servers.values())
    data = (await call(server, "compare_pair", {**PAIR, "backends": ["a", "b"], "response_models": ["/etc/passwd", "$(rm -rf /)"]})).structured_content
    assert data["winner"] == "B" and data["self_preference"] == [] and data["warnings"] == []


async def test_a_panel_verdict_is_labelled_and_each_member_gets_its_agreement(panel_server) -> None:
    server, _ = panel_server({"a": (correct_judge, "m-a"), "b": (correct_judge, "m-b"), "c": (wrong_judge, "m-c")})
    async with Client(server) as client:
        data = (await client.call_tool("compare_pair", {**PAIR, "backends": ["a", "b", "c"]})).structured_content
        label = (await client.call_tool("record_label", {"verdict_id": data["verdict_id"], "label": "B"})).structured_content
        stats = (await client.call_tool("judge_stats", {})).structured_content
    assert label["agrees"] is True and label["verdict"] == "B"
    accuracy = {g["backend"]: g["agreement"]["accuracy"]["rate"] for g in stats["all_time"]["groups"]}
    assert accuracy == {"a+b+c": 1.0, "a": 1.0, "b": 1.0, "c": 0.0}  # the panel, and each member on its own vote
