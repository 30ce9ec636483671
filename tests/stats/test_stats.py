"""Live bias telemetry (stats.py). Tools run through the official MCP client against scripted
OpenAI-compatible judges with fixed habits (always the first-shown answer, always the longer answer, garbage,
garbage then a readable re-ask, ...); the figures read back through the judge://stats resources, the judge_stats
tool and `judge-mcp stats` must be exactly what those habits imply."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from judge_mcp.cli import main as cli
from judge_mcp.stats import report as stats
from judge_mcp.stats.intervals import ci_rate
from judge_mcp.storage.sqlite import SqliteEngine
from testkit.scripted_judges import LweScript, first_shown_judge
from testkit.scripted_servers import prompt_text
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines

QUESTION = "What is the capital of Australia?"
SHORT, LONG = "Canberra.", "The capital of Australia is Canberra, chosen as a compromise between Sydney and Melbourne."


def shown(payload: dict[str, Any]) -> tuple[str, str]:
    """The two answers as the pairwise prompt shows them (first, second)."""
    text = prompt_text(payload)
    first = re.search(r"<\|The Start of Assistant A's Answer\|>\n(.*?)\n<\|The End of Assistant A's Answer\|>", text, re.S).group(1)
    second = re.search(r"<\|The Start of Assistant B's Answer\|>\n(.*?)\n<\|The End of Assistant B's Answer\|>", text, re.S).group(1)
    return first, second


def pair_label(first_is_better: bool) -> str:
    """compare_pair's default goal asks which answer is worse: [[A>B]] says B (second shown) is worse."""
    return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]" if first_is_better else "[[B>A]]"})


def longer_judge(payload: dict[str, Any]) -> str:
    """The longer answer is better; on equal lengths the one mentioning Canberra."""
    first, second = shown(payload)
    if len(first) != len(second):
        return pair_label(len(first) > len(second))
    return pair_label("Canberra" in first)


def garbage_judge(payload: dict[str, Any]) -> str:
    return "I would rather not say."


def reask_judge(payload: dict[str, Any]) -> str:
    """Garbage first; a readable label (first shown wins) when re-asked (the re-ask carries the first answer)."""
    reasked = any(m.get("role") == "assistant" for m in payload.get("messages", []))
    return pair_label(True) if reasked else "Hmm."


def flip_same_judge(payload: dict[str, Any]) -> str:
    """FLIP: infers the same instruction from every response (a tied top reward); unreadable for a GARBLED one."""
    if "GARBLED" in prompt_text(payload):
        return "no idea"
    return json.dumps({"REASONING": "r", "INFERRED INSTRUCTION": "Name the capital of Australia."})


class Switch:
    """One scripted backend whose habit the test changes between calls."""

    def __init__(self, habit) -> None:
        self.habit = habit

    def __call__(self, payload: dict[str, Any]):
        return self.habit(payload)


def group(window: dict[str, Any], tool: str) -> dict[str, Any]:
    found = [g for g in window["groups"] if g["tool"] == tool]
    assert len(found) == 1, window
    return found[0]


def rate(count: int, of: int) -> dict[str, Any]:
    """A rate as judge_stats reports it: with its Wilson interval, a text under 5 (tests/stats/test_intervals.py)."""
    return {"rate": round(count / of, 4) if of else None, "count": count, "of": of, "ci": ci_rate(count, of)}


async def read_stats(client: Client, uri: str = "judge://stats") -> dict[str, Any]:
    result = await client.read_resource(uri)
    return json.loads(result.contents[0].text)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


# ---- compare_pair -----------------------------------------------------------------------------------------------
async def test_a_first_shown_judge_is_fully_position_biased_and_inconsistent(mcp_app) -> None:
    server, _ = mcp_app(first_shown_judge)  # (texts differ between calls: no order's request repeats, no cache hits)
    async with Client(server) as client:
        outputs = [await call(client, "compare_pair", {"prompt": QUESTION, "response_a": a, "response_b": b}) for a, b in [(SHORT, LONG), (LONG + " Yes.", SHORT), ("Sydney.", SHORT)]]
        report = await read_stats(client)
    assert all(o["winner"] is None and o["consistent"] is False for o in outputs)
    g = group(report["all_time"], "compare_pair")
    assert (g["backend"], g["model"], g["verdicts"]) == ("default", outputs[0]["model"], 3)
    assert g["position_bias"] == {**rate(6, 6), "unbiased": 0.5}
    assert g["order_inconsistency"] == rate(3, 3)
    assert g["ties"] == rate(3, 3)  # no winner in any verdict
    assert g["length_preference"] == rate(0, 0)  # nothing decided: null, not 0
    assert g["parse_failures"] == rate(0, 6) and g["reasks"] == rate(0, 6)
    assert g["calls"] == {"mean": 2.0, "of": 3} and g["cached_calls"] == {"mean": 0.0, "of": 3}
    assert g["latency_ms"]["of"] == 3 and g["latency_ms"]["mean"] > 0
    assert report["last"] == report["all_time"] and report["last_n"] == stats.DEFAULT_LAST


async def test_a_judge_that_prefers_the_longer_answer(mcp_app) -> None:
    server, _ = mcp_app(longer_judge)
    equal_a, equal_b = "Canberra, ACT.", "Sydney, NSW!!"
    assert len(equal_a) == len(equal_b) + 1  # made equal below
    equal_b += "."
    async with Client(server) as client:
        for a, b in [(SHORT, LONG), (LONG, SHORT), (LONG, SHORT + " Yes."), (equal_b, equal_a)]:
            out = await call(client, "compare_pair", {"prompt": QUESTION, "response_a": a, "response_b": b})
            assert out["consistent"] is True
        g = group((await read_stats(client))["all_time"], "compare_pair")
    assert g["length_preference"] == rate(3, 3)  # the equal-length pair is decided but left out
    assert g["order_inconsistency"] == rate(0, 4) and g["ties"] == rate(0, 4)
    assert g["position_bias"] == {**rate(4, 8), "unbiased": 0.5}  # content, not position, decides: one of each pair


async def test_garbage_is_a_parse_failure_after_a_re_ask(mcp_app) -> None:
    habit = Switch(garbage_judge)
    server, backend = mcp_app(habit)
    async with Client(server) as client:
        await call(client, "compare_pair", {"prompt": QUESTION, "response_a": SHORT, "response_b": LONG})
        habit.habit = reask_judge
        out = await call(client, "compare_pair", {"prompt": QUESTION, "response_a": LONG + " Indeed.", "response_b": SHORT})
        report = await read_stats(client)
        recent = await read_stats(client, "judge://stats/last/1")
    assert [t["reasked"] and t["parse_ok"] for t in out["trials"]] == [True, True]
    assert len(backend.requests) == 8  # 2 orders x (answer + re-ask), twice
    g = group(report["all_time"], "compare_pair")
    assert g["parse_failures"] == rate(2, 4)  # the garbage call's two trials
    assert g["reasks"] == rate(4, 4)  # every answer needed the re-ask
    assert g["position_bias"] == {**rate(2, 2), "unbiased": 0.5}  # only the re-asked call's parsed trials count
    assert g["order_inconsistency"] == rate(1, 1)  # the garbage call has no pair of parsed orders
    assert g["calls"] == {"mean": 4.0, "of": 2}
    last = group(recent["last"], "compare_pair")  # the newest verdict only: the re-asked one
    assert (recent["last_n"], recent["last"]["verdicts"], last["verdicts"]) == (1, 1, 1)
    assert last["parse_failures"] == rate(0, 2) and last["reasks"] == rate(2, 2)
    assert recent["all_time"] == report["all_time"]


async def test_cached_calls_are_counted(mcp_app) -> None:
    server, backend = mcp_app(first_shown_judge)
    async with Client(server) as client:
        for _ in range(2):
            await call(client, "compare_pair", {"prompt": QUESTION, "response_a": SHORT, "response_b": LONG})
        g = group((await read_stats(client))["all_time"], "compare_pair")
    assert len(backend.requests) == 2  # the repeat was answered from the call cache
    assert g["calls"] == {"mean": 1.0, "of": 2} and g["cached_calls"] == {"mean": 1.0, "of": 2}


# ---- the last-N window ------------------------------------------------------------------------------------------
async def test_the_last_window_holds_only_the_newest_verdicts(mcp_app) -> None:
    habit = Switch(first_shown_judge)
    server, _ = mcp_app(habit)
    async with Client(server) as client:
        for k in range(3):
            await call(client, "compare_pair", {"prompt": QUESTION, "response_a": SHORT + "!" * k, "response_b": LONG})
        habit.habit = longer_judge
        for k in range(2):
            await call(client, "compare_pair", {"prompt": QUESTION, "response_a": LONG + "?" * (k + 1), "response_b": SHORT})
        report = await call(client, "judge_stats", {"last": 2})
        resource = await read_stats(client, "judge://stats/last/2")
    assert resource == report  # the tool and the resource give the same report
    everything, recent = group(report["all_time"], "compare_pair"), group(report["last"], "compare_pair")
    assert (report["all_time"]["verdicts"], report["last"]["verdicts"]) == (5, 2)
    assert recent["position_bias"]["count"] == 2 and recent["position_bias"]["of"] == 4
    assert recent["order_inconsistency"] == rate(0, 2) and recent["length_preference"] == rate(2, 2)
    assert everything["position_bias"] == {**rate(8, 10), "unbiased": 0.5}
    assert everything["order_inconsistency"] == rate(3, 5) and everything["ties"] == rate(3, 5)
    assert report["last"]["oldest_at"] >= report["all_time"]["oldest_at"]
    assert report["last"]["newest_at"] == report["all_time"]["newest_at"]


# ---- the other tools --------------------------------------------------------------------------------------------
async def test_grade_score_first_position_against_one_in_n(mcp_app) -> None:
    server, _ = mcp_app(first_shown_judge)
    async with Client(server) as client:
        out = await call(client, "grade_score_options", {"instruction": QUESTION, "options": ["Canberra", "Sydney", "Melbourne"]})
        g = group((await read_stats(client))["all_time"], "grade_score_options")
    assert out["position_counts"] == [3, 0, 0] and len(out["tied_indices"]) == 3
    assert g["position_bias"] == {**rate(3, 3), "unbiased": round(1 / 3, 4)}
    assert g["ties"] == rate(1, 1)  # each option picked once: the mode is tied
    assert g["order_inconsistency"] == rate(0, 0) and g["length_preference"] == rate(0, 0)
    assert g["parse_failures"] == rate(0, 3) and g["calls"] == {"mean": 3.0, "of": 1}


async def test_flip_ties_and_unparsed_responses(mcp_app) -> None:
    server, _ = mcp_app(flip_same_judge)
    async with Client(server) as client:
        tied = await call(client, "infer_instruction_reward", {"instruction": "Name the capital of Australia.", "responses": ["Canberra.", "It is Canberra."]})
        garbled = await call(client, "infer_instruction_reward", {"instruction": "Name the capital of Australia.", "responses": ["Canberra.", "GARBLED"]})
        g = group((await read_stats(client))["all_time"], "infer_instruction_reward")
    assert tied["best_index"] is None and tied["tied_best"] == [0, 1]
    assert garbled["unparsed"] == [1]
    assert g["ties"] == rate(1, 2)
    assert g["parse_failures"] == rate(1, 4) and g["reasks"] == rate(1, 4)
    assert g["position_bias"] == {**rate(0, 0), "unbiased": None}  # FLIP shows one response at a time


async def test_lwe_counts_its_vanilla_pair_and_the_meta_path_judgment(mcp_app) -> None:
    habit = Switch(LweScript("first"))
    server, _ = mcp_app(habit)
    pair = {"prompt": QUESTION, "response_a": LONG, "response_b": SHORT, "batch_size": 64}
    async with Client(server) as client:
        first = await call(client, "lwe_judge", pair)
        habit.habit = LweScript("vanilla_garbage")
        garbled = await call(client, "lwe_judge", {**pair, "response_a": LONG + " Sure."})  # new texts: no cache hits
        g = group((await read_stats(client))["all_time"], "lwe_judge")
    assert first["path"] == "meta_prompt" and first["vanilla"] == {"ab": "A", "ba": "B", "consistent": False} and first["winner"] == "A"
    assert garbled["vanilla"]["ab"] is None and garbled["vanilla"]["ba"] is None and garbled["winner"] == "A"
    # first: vanilla AB picks A (shown first), BA picks B (shown first), the meta-path judgment picks A (shown first);
    # garbled: only its meta-path judgment parsed.
    assert g["position_bias"] == {**rate(4, 4), "unbiased": 0.5}
    assert g["order_inconsistency"] == rate(1, 1)
    assert g["parse_failures"] == rate(2, 6)
    assert g["reasks"] == rate(2, 6)  # the garbled vanilla verdicts were re-asked (seen in the call records)
    assert g["ties"] == rate(0, 2)
    assert g["length_preference"] == rate(2, 2)  # A, the longer answer, won both


# ---- empty log, bad N, the read-only tool's metadata ------------------------------------------------------------
async def test_an_empty_log_has_null_rates_and_bad_n_is_named(mcp_app) -> None:
    server, backend = mcp_app(first_shown_judge)
    async with Client(server) as client:
        report = await read_stats(client)
        for bad in ("0", "abc", "1000001"):
            with pytest.raises(MCPError) as info:
                await client.read_resource(f"judge://stats/last/{bad}")
            assert "'n' must be a whole number from 1 to 1,000,000" in str(info.value) and repr(bad) in str(info.value)
        refused = await client.call_tool("judge_stats", {"last": 0})
        tools = {t.name: t for t in (await client.list_tools()).tools}
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    empty = {"verdicts": 0, "oldest_at": None, "newest_at": None, "skipped": 0, "groups": []}
    health = {"pending": 0, "written_late": 0, "lost": 0, "last_error": None}  # the server's verdict-log writing
    assert report == {"last_n": 100, "all_time": empty, "last": empty, "verdict_log": health, "ranking": []}
    assert refused.is_error and "'last' must be a whole number from 1 to 1000000, got 0" in refused.content[0].text
    assert tools["judge_stats"].annotations.read_only_hint is True
    assert "judge://stats/last/{n}" in templates
    assert backend.requests == []


# ---- rows the tools do not write: panels and unreadable output ----------------------------------------------------
@on_both_engines
def test_panel_members_with_trials_count_under_their_own_backend(store: SqliteEngine) -> None:
    def member(name: str, ab_better: str) -> dict[str, Any]:  # its BA trial always names B (shown first there)
        trials = [{"order": "AB", "better": ab_better, "parse_ok": True}, {"order": "BA", "better": "B", "parse_ok": True}]
        usage = {"calls": 2, "cached_calls": 0, "latency_ms": 10.0}
        return {"backend": name, "model": f"openai/{name}-model", "winner": None, "consistent": False, "trials": trials, "usage": usage}

    # a member without trials (nor model) adds nothing; extra fields (p_better) are ignored
    output = {"winner": None, "panel": [member("small", "A"), member("big", "B"), {"backend": "x", "verdict": "A"}], "p_better": None, "trials": []}
    VerdictLog(store).log("compare_pair", "panel", "panel/small+big", {"response_a": "a", "response_b": "bb"}, output, {"calls": 4, "latency_ms": 12.0}, [])
    report = stats.from_store(store, 10)
    by_backend = {g.backend: g for g in report.all_time.groups}
    assert sorted(by_backend) == ["big", "panel", "small"]
    assert by_backend["panel"].verdicts == 1 and by_backend["panel"].ties.count == 1 and by_backend["panel"].position_bias.of == 0
    assert by_backend["panel"].calls.mean == 4.0
    assert (by_backend["small"].position_bias.count, by_backend["small"].position_bias.of) == (2, 2)
    assert (by_backend["big"].position_bias.count, by_backend["big"].order_inconsistency.count) == (1, 0)
    assert by_backend["small"].order_inconsistency.count == 1


@on_both_engines
def test_unreadable_rows_are_skipped_and_paging_changes_nothing(store: SqliteEngine) -> None:
    for k in range(5):
        VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "a" * (k + 1), "response_b": "b"},
                          {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}, {"calls": 1}, [])
    with store.transaction() as db:
        db.execute("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at, tenant) "
                   "VALUES ('compare_pair', 'default', 'm', '{', '{not json', '{', '[', 0, 'local')")  # the caller's tenant (stdio: local)
    # a row no writer of the log makes (the log's own rows come with their counts; rows of databases from before the
    # counters are backfilled: tests/storage/test_verdict_stats.py): the scan of the log reads it as skipped
    paged = stats.compute(stats.iter_rows(store, page=2), last=3)
    assert paged == stats.scan_store(store, 3)
    assert (paged.all_time.verdicts, paged.all_time.skipped, paged.all_time.groups[0].verdicts) == (6, 1, 5)
    assert paged.all_time.groups[0].length_preference.count == 4  # k = 0 has equal lengths
    assert (paged.last.verdicts, paged.last.skipped) == (3, 1)  # the unreadable row is the newest


@on_both_engines
def test_verdicts_are_grouped_by_the_inputs_callers_brought(store: SqliteEngine) -> None:
    image = {"sha256": "0" * 64, "media_type": "image/png", "bytes": 10}
    brought = [{}, {"criteria": "c"}, {"reference": "r"}, {"criteria": "c", "reference": "r"}, {"response_b_images": [image]},
               {"option_images": [[image], None]}, {"criteria": "c", "images": [image]}]
    for extra in brought:
        VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "a", "response_b": "b", **extra},
                              {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}, {"calls": 1}, [])
    groups = [g.inputs for g in stats.from_store(store, 10).all_time.groups]
    assert sorted(groups) == sorted(["text", "criteria", "reference", "criteria+reference", "images", "criteria+images"])
    assert next(g for g in stats.from_store(store, 10).all_time.groups if g.inputs == "images").verdicts == 2


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "x", "", stats.MAX_LAST + 1])
def test_check_last_names_the_argument(value) -> None:
    with pytest.raises(ValueError, match="'last' must be a whole number from 1 to 1,000,000"):
        stats.check_last(value)


# ---- the command line -------------------------------------------------------------------------------------------
async def test_cli_stats_prints_tables_and_json(mcp_app, tmp_path: Path, capsys) -> None:
    server, _ = mcp_app(first_shown_judge)
    async with Client(server) as client:
        await call(client, "compare_pair", {"prompt": QUESTION, "response_a": SHORT, "response_b": LONG})
        await call(client, "grade_score_options", {"instruction": QUESTION, "options": ["Canberra", "Sydney"]})
    db = tmp_path / "judge.db"
    assert cli.main(["stats", "--db", str(db), "--last", "1"]) == 0
    text = capsys.readouterr().out
    all_time, last = text.split("\n\nlast 1: 1 verdicts\n")
    assert "all time: 2 verdicts" in all_time
    pair_line = next(line for line in all_time.splitlines() if "compare_pair" in line)
    assert "1.00 (2/2)" in pair_line and "0.50" in pair_line and "-" in pair_line.split()  # length preference undefined
    assert "grade_score_options" in last and "compare_pair" not in last.split("\n\n")[0]  # newest only
    assert cli.main(["stats", "--db", str(db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["all_time"]["verdicts"] == 2 and group(report["all_time"], "compare_pair")["position_bias"]["rate"] == 1.0


def test_cli_stats_errors_and_the_empty_log(tmp_path: Path, capsys, monkeypatch) -> None:
    missing = tmp_path / "nope.db"
    assert cli.main(["stats", "--db", str(missing)]) == 2
    assert "no database at" in capsys.readouterr().err and not missing.exists()  # a reader never creates one
    with pytest.raises(SystemExit) as done:
        cli.main(["stats", "--last", "abc"])
    assert done.value.code == 2 and "'last' must be a whole number from 1 to 1,000,000, got 'abc'" in capsys.readouterr().err
    SqliteEngine(tmp_path / "empty.db").close()
    monkeypatch.setenv("JUDGE_MCP_DB", str(tmp_path / "empty.db"))  # the default database: JUDGE_MCP_DB
    assert cli.main(["stats"]) == 0
    assert "no verdicts in the log yet" in capsys.readouterr().out


def test_cli_stats_of_a_tenant_without_verdicts_names_whose_the_log_holds(tmp_path: Path, capsys) -> None:
    """An HTTP server with JUDGE_MCP_HTTP_TOKEN logs as tenant `default`; `judge-mcp stats` reads tenant `local` by
    default. It said "no verdicts in the log yet" of a log holding verdicts; it names the tenants that have some."""
    db = tmp_path / "judge.db"
    store = SqliteEngine(db)
    try:
        for tenant, n in (("default", 2), ("team-b", 1)):
            for _ in range(n):
                VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "a", "response_b": "b"},
                                      {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}, {"calls": 1}, [],
                                      tenant=tenant)
    finally:
        store.close()
    assert cli.main(["stats", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "no verdicts in the log yet" not in out
    assert "no verdicts of tenant 'local'" in out and "'default' (2 verdicts), 'team-b' (1 verdict)" in out
    assert "--tenant default" in out
    assert cli.main(["stats", "--db", str(db), "--json"]) == 0  # stdout stays the report's JSON; the note goes to stderr
    captured = capsys.readouterr()
    assert json.loads(captured.out)["all_time"]["verdicts"] == 0 and "'default' (2 verdicts)" in captured.err
    assert cli.main(["stats", "--db", str(db), "--tenant", "team-b"]) == 0
    assert "all time: 1 verdicts" in capsys.readouterr().out


@on_both_engines
def test_tenants_logged_counts_each_tenants_verdicts(store: SqliteEngine) -> None:
    from judge_mcp.storage.verdict_stats import tenants_logged

    assert tenants_logged(store) == {}
    for tenant in ("default", "default", "local"):
        VerdictLog(store).log("grade_score_options", "default", "m", {"instruction": "q", "options": ["a", "b"]},
                              {"winner_index": 0, "trials": [{"order": [0, 1], "selected_position": 0, "parse_ok": True}]},
                              {"calls": 1}, [], tenant=tenant)
    assert tenants_logged(store) == {"default": 2, "local": 1}


@on_both_engines
def test_lengths_are_characters_not_bytes(store: SqliteEngine) -> None:
    """SQLite computes the answers' lengths; 'éé' is 2 characters (4 bytes in UTF-8) against 'abc''s 3."""
    VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "éé", "response_b": "abc"},
                      {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}, {"calls": 1}, [])
    g = stats.from_store(store).all_time.groups[0]
    assert (g.length_preference.count, g.length_preference.of) == (0, 1)  # the shorter answer won


@on_both_engines
def test_conversations_and_trajectories_are_kinds_of_inputs(store: SqliteEngine) -> None:
    chat = [{"role": "user", "content": "q"}]
    run = [{"role": "assistant", "content": "a"}]
    rows = [
        ("compare_pair", {"prompt": "q", "response_a": "a", "response_b": "b"}),
        ("compare_pair", {"prompt": chat, "response_a": "a", "response_b": "b"}),
        ("compare_pair", {"prompt": "q", "response_a": "a", "response_b": run}),
        ("lwe_judge", {"prompt": chat, "response_a": run, "response_b": run, "criteria": "c"}),
        ("grade_score_options", {"instruction": "q", "options": ["a", run]}),
        ("infer_instruction_reward", {"instruction": "q", "responses": ["a", run], "context": chat}),
    ]
    for tool, inputs in rows:
        VerdictLog(store).log(tool, "default", "m", inputs, {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]},
                              {"calls": 1}, [])
    expected = {("compare_pair", "text"), ("compare_pair", "conversation"), ("compare_pair", "trajectory"),
                ("lwe_judge", "criteria+conversation+trajectory"), ("grade_score_options", "trajectory"),
                ("infer_instruction_reward", "conversation+trajectory")}
    counted = {(g.tool, g.inputs) for g in stats.from_store(store, 10).all_time.groups}  # the counters kept as rows are written
    scanned = {(g.tool, g.inputs) for g in stats.scan_store(store, 10).all_time.groups}  # the SQL scan of the log
    assert counted == scanned == expected


@on_both_engines
def test_the_terminal_table_names_what_each_row_brought(store: SqliteEngine) -> None:
    """Two groups that differ only in what the callers brought (text alone; a rubric) are two rows of `judge-mcp
    stats`: the `inputs` column tells them apart (without it they read as duplicates)."""
    from judge_mcp.cli.stats_table import render_stats

    output = {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}
    VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "a", "response_b": "b"}, output, {"calls": 1}, [])
    VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "a", "response_b": "b", "criteria": "be brief"}, output, {"calls": 1}, [])
    table = render_stats(stats.from_store(store)).split("\n\n")[0].splitlines()
    header, rows = table[1].split(), [line.split() for line in table[2:]]
    assert header[:5] == ["backend", "model", "tool", "inputs", "verdicts"]
    assert sorted(r[3] for r in rows) == ["criteria", "text"]


def test_the_terminal_table_shows_reasoning_tokens_and_billed_input_per_verdict(store: SqliteEngine) -> None:
    """`judge-mcp stats` shows what a reasoning judge spends on hidden reasoning and the billed-equivalent input
    with the price ratios it assumed (Anthropic's 0.1x reads, 1.25x writes), not only judge_stats' JSON."""
    from judge_mcp.cli.stats_table import render_stats

    output = {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}
    usage = {"calls": 2, "prompt_tokens": 2000, "completion_tokens": 900, "reasoning_tokens": 600,
             "cached_prompt_tokens": 1000, "cache_write_tokens": 0}
    VerdictLog(store).log("compare_pair", "default", "anthropic/claude-x", {"response_a": "a", "response_b": "b"}, output, usage, [])
    table = render_stats(stats.from_store(store)).split("\n\n")[0]
    assert "reasoning" in table and "billed input" in table
    row = table.splitlines()[2]
    assert " 600 " in f" {row} " and "1100 (x0.1/x1.25)" in row  # 1,000 uncached + 0.1 x 1,000 read
