"""Human labels through the official MCP client: every judging tool returns a verdict_id, record_label stores the
correct answer for it (checked against the verdict's tool), and judge_stats reports each judge's agreement with the
labels (accuracy, Cohen's kappa, ECE and Brier of p_better), figures computed here by hand for a small case."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp import Client

from judge_mcp.server import tools
from testkit.scripted_servers import Reply
from testkit.scripted_judges import (
    BAD, CAPITAL_Q, GOOD, RIGHT_INSTRUCTION, UniversalJudge, logprob_content, shown_first, verdict_json,
)
from judge_mcp.server.build import build_server
from judge_mcp.storage.sqlite import SqliteEngine
from tests.helpers import app_env, make_app, until

HEX32 = re.compile(r"[0-9a-f]{32}")


def sure_judge(payload: dict) -> Reply:
    """compare_pair: the answer naming Canberra is better, wherever it is shown, with probability 0.9 in either order."""
    p_first = 0.9 if "Canberra" in shown_first(payload) else 0.1
    content = verdict_json(p_first >= 0.5)
    return Reply(content=content, logprobs=logprob_content(content, p_first) if payload.get("logprobs") else None)


def case(k: int, good_first: bool, **extra: str) -> dict:
    a, b = (GOOD, BAD) if good_first else (BAD, GOOD)
    return {"prompt": f"{CAPITAL_Q} (case {k})", "response_a": a, "response_b": b, **extra}


def _error(result) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_labels_give_each_judge_its_agreement_in_judge_stats(connect) -> None:
    async with connect(sure_judge) as judged:
        client = judged.client
        results = [await client.call_tool("compare_pair", args) for args in (
            case(1, good_first=False), case(2, good_first=True), case(3, good_first=False), case(4, good_first=False, criteria="Be right."),
        )]
        assert not any(r.is_error for r in results), [r.content for r in results]
        out = [r.structured_content for r in results]
        assert [o["winner"] for o in out] == ["B", "A", "B", "B"]
        assert out[0]["p_better"]["B"] == pytest.approx(0.9) and out[1]["p_better"]["A"] == pytest.approx(0.9)
        ids = [o["verdict_id"] for o in out]
        assert all(HEX32.fullmatch(i) for i in ids) and len(set(ids)) == 4

        first = await client.call_tool("record_label", {"verdict_id": ids[0], "label": "a", "note": "a slip"})
        again = await client.call_tool("record_label", {"verdict_id": ids[0], "label": "B"})  # replaces the slip
        second = await client.call_tool("record_label", {"verdict_id": ids[1], "label": "B", "note": "the human disagrees"})
        third = await client.call_tool("record_label", {"verdict_id": ids[2], "label": "tie"})
        assert first.structured_content == {"verdict_id": ids[0], "tool": "compare_pair", "label": "A", "verdict": "B", "agrees": False, "replaced": False, "label_feedback": False}
        assert again.structured_content["replaced"] is True and again.structured_content["agrees"] is True
        assert second.structured_content["agrees"] is False and third.structured_content["label"] == "tie"

        stats = (await client.call_tool("judge_stats", {"last": 2})).structured_content
    groups = {g["inputs"]: g for g in stats["all_time"]["groups"]}
    labelled, unlabelled = groups["text"]["agreement"], groups["criteria"]["agreement"]
    # (verdict, label): (B, B), (A, B), (B, tie): 1 of 3 right; kappa: p_o = 1/3, p_e = (2*2 + 1*0 + 0*1) / 9 = 4/9,
    # (1/3 - 4/9) / (1 - 4/9) = -0.2. Calibration over the A/B labels: p of the label 0.9 and 0.1, both confidence
    # 0.9 in one bin whose accuracy is 1/2: ECE |0.5 - 0.9| = 0.4; Brier ((1 - 0.9)^2 + (1 - 0.1)^2) / 2 = 0.41.
    assert labelled["labelled"] == 3 and labelled["accuracy"] == {"rate": 0.3333, "count": 1, "of": 3, "ci": "too few to say (n=3)"}
    assert labelled["kappa"] == pytest.approx(-0.2)
    assert labelled["calibration"]["n"] == 2 and labelled["calibration"]["of"] == 2
    assert labelled["calibration"]["ece"] == pytest.approx(0.4) and labelled["calibration"]["brier"] == pytest.approx(0.41)
    # length against the labels: the judge always names the good answer; of the two decided verdicts with an A/B label
    # (cases 1 and 2), the labels name the good answer once
    assert len(GOOD) != len(BAD)
    sign = 1 if len(GOOD) > len(BAD) else -1
    few = "too few to say (n=2)"  # two verdicts: no interval (stats/intervals.py)
    assert labelled["length"] == {"longer_picked": {"rate": float(sign > 0), "count": 2 * (sign > 0), "of": 2, "ci": few},
                                  "longer_labels": {"rate": 0.5, "count": 1, "of": 2, "ci": few}, "bias": 0.5 * sign, "ci": few}
    # the criteria group has no label: null figures with their denominators, never 0
    assert unlabelled == {"labelled": 0, "accuracy": {"rate": None, "count": 0, "of": 0, "ci": None}, "kappa": None, "kappa_ci": None,
                          "calibration": {"n": 0, "of": 0, "ece": None, "brier": None, "ci": {}}, "scores": None, "length": None}
    # the last 2 verdicts (cases 3 and 4): one label, a tie the judge did not see
    recent = {g["inputs"]: g["agreement"] for g in stats["last"]["groups"]}
    assert recent["text"]["labelled"] == 1 and recent["text"]["accuracy"]["rate"] == 0.0 and recent["text"]["calibration"]["of"] == 0
    # the rows: each verdict keeps the id its answer gave; the labels stay in the database
    assert sorted(row["verdict_id"] for row in judged.verdicts()) == sorted(ids)
    store = SqliteEngine(judged.db)
    try:
        rows = store.query("SELECT verdict_id, label, note FROM labels ORDER BY label")
    finally:
        store.close()
    assert rows == [{"verdict_id": ids[0], "label": "B", "note": None}, {"verdict_id": ids[1], "label": "B", "note": "the human disagrees"},
                    {"verdict_id": ids[2], "label": "tie", "note": None}]


async def test_a_label_that_does_not_fit_is_refused_with_the_reason(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        pair = (await client.call_tool("compare_pair", case(1, good_first=False))).structured_content["verdict_id"]
        answers = [
            await client.call_tool("record_label", {"verdict_id": pair, "label": "C"}),
            await client.call_tool("record_label", {"verdict_id": pair, "label": 1}),
            await client.call_tool("record_label", {"verdict_id": "0" * 32, "label": "A"}),
            await client.call_tool("record_label", {"verdict_id": "not-an-id", "label": "A"}),
            await client.call_tool("record_label", {"verdict_id": pair, "label": "A", "note": "n" * 2001}),
            await client.call_tool("record_label", {"verdict_id": pair, "label": "A", "extra": 1}),
        ]
        stats = (await client.call_tool("judge_stats", {})).structured_content
    messages = [_error(a) for a in answers]
    assert "'label' must be \"A\", \"B\" or \"tie\" for a compare_pair verdict, got 'C'" in messages[0]
    assert "'label' must be \"A\", \"B\" or \"tie\" for a compare_pair verdict, got 1" in messages[1]
    assert "unknown verdict_id '00000000000000000000000000000000'" in messages[2]
    assert "'verdict_id' must match ^[0-9a-f]{32}$" in messages[3]
    assert "'note' is 2,001 characters; the limit is 2,000" in messages[4]
    assert "unknown argument 'extra'" in messages[5]
    assert stats["all_time"]["groups"][0]["agreement"]["labelled"] == 0  # nothing was stored


async def test_options_and_responses_are_labelled_by_index_or_text(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        grade = (await client.call_tool("grade_score_options", {"instruction": CAPITAL_Q, "options": [BAD, GOOD, "42"]})).structured_content
        flip = (await client.call_tool("infer_instruction_reward", {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]})).structured_content
        one = (await client.call_tool("infer_instruction_reward", {"instruction": RIGHT_INSTRUCTION, "responses": [GOOD]})).structured_content
        lwe = (await client.call_tool("lwe_judge", {**case(1, good_first=False), "session": "labels"})).structured_content
        by_text = await client.call_tool("record_label", {"verdict_id": grade["verdict_id"], "label": GOOD})
        by_digits = await client.call_tool("record_label", {"verdict_id": grade["verdict_id"], "label": "0"})
        by_option_text = await client.call_tool("record_label", {"verdict_id": grade["verdict_id"], "label": "42"})  # an option's text wins
        out_of_range = await client.call_tool("record_label", {"verdict_id": grade["verdict_id"], "label": 3})
        not_an_option = await client.call_tool("record_label", {"verdict_id": grade["verdict_id"], "label": "Perth."})
        flip_label = await client.call_tool("record_label", {"verdict_id": flip["verdict_id"], "label": 1})
        single = await client.call_tool("record_label", {"verdict_id": one["verdict_id"], "label": 0})
        lwe_label = await client.call_tool("record_label", {"verdict_id": lwe["verdict_id"], "label": "B"})
        stats = (await client.call_tool("judge_stats", {})).structured_content
    assert by_text.structured_content["label"] == "1" and by_text.structured_content["agrees"] is True
    assert by_digits.structured_content["label"] == "0" and by_digits.structured_content["replaced"] is True
    assert by_option_text.structured_content["label"] == "2" and by_option_text.structured_content["agrees"] is False
    assert "'label' 3 is not an index of this verdict's 3 options (0 to 2)" in _error(out_of_range)
    assert "'label' is not the text of any of this verdict's 3 options" in _error(not_an_option)
    assert flip_label.structured_content == {"verdict_id": flip["verdict_id"], "tool": "infer_instruction_reward", "label": "1",
                                             "verdict": "1", "agrees": True, "replaced": False, "label_feedback": False}
    assert "judged fewer than 2 responses" in _error(single)
    assert lwe_label.structured_content["agrees"] is True
    agreement = {g["tool"]: g["agreement"] for g in stats["all_time"]["groups"]}
    assert agreement["grade_score_options"]["accuracy"] == {"rate": 0.0, "count": 0, "of": 1, "ci": "too few to say (n=1)"}  # the last label (option 2) stands
    assert agreement["grade_score_options"]["calibration"]["of"] == 0  # no p_better to calibrate
    assert agreement["infer_instruction_reward"]["accuracy"]["rate"] == 1.0 and agreement["lwe_judge"]["labelled"] == 1


async def test_a_label_waits_for_a_verdict_row_still_being_written(scripted, tmp_path, monkeypatch) -> None:
    import sqlite3

    backend = scripted(UniversalJudge())
    db = tmp_path / "judge.db"
    app = make_app(app_env(backend, db, JUDGE_MCP_MAX_RETRIES="0"), store=SqliteEngine(db, busy_timeout_s=60))
    other_process = sqlite3.connect(str(db), isolation_level=None)
    try:
        async with Client(build_server(app)) as client:
            await client.call_tool("compare_pair", case(1, good_first=False))
            other_process.execute("BEGIN IMMEDIATE")  # the next verdict's row waits behind this lock
            hit = (await client.call_tool("compare_pair", case(1, good_first=False))).structured_content
            assert any("not written yet" in w for w in hit["warnings"]) and HEX32.fullmatch(hit["verdict_id"])
            monkeypatch.setattr(tools, "LABEL_WAIT_S", 0.05)
            early = await client.call_tool("record_label", {"verdict_id": hit["verdict_id"], "label": "B"})
            assert "is not in the verdict log yet" in _error(early) and "try record_label again" in _error(early)
            monkeypatch.setattr(tools, "LABEL_WAIT_S", 60.0)
            async with anyio.create_task_group() as tg:
                answers = []

                async def label() -> None:
                    answers.append(await client.call_tool("record_label", {"verdict_id": hit["verdict_id"], "label": "B"}))

                tg.start_soon(label)
                await until(lambda: app.verdict_writes.is_pending(hit["verdict_id"]))
                other_process.execute("ROLLBACK")  # the row goes in; the waiting label follows it
            assert not answers[0].is_error and answers[0].structured_content["agrees"] is True
    finally:
        other_process.close()
        await app.aclose()


async def test_the_python_api_labels_as_the_tool_does(scripted, tmp_path) -> None:
    from judge_mcp import Judge, JudgeError

    server = scripted(UniversalJudge())
    async with Judge(env=app_env(server, tmp_path / "judge.db")) as judge:
        pair = await judge.compare_pair(**case(1, good_first=False))
        label = await judge.record_label(verdict_id=pair.verdict_id, label="B")
        with pytest.raises(JudgeError, match="unknown verdict_id"):
            await judge.record_label(verdict_id="1" * 32, label="B")
        stats = await judge.judge_stats()
    assert label.agrees is True and label.replaced is False
    assert stats.all_time.groups[0].agreement.accuracy.rate == 1.0
