"""LWE learns from labels: record_label on an lwe_judge verdict that the label contradicts (or that had no winner) puts
a feedback item with the right answer into the session's buffer, in the label's own transaction; the next refinement
is told which verdict was wrong; `lwe_session show` counts them; `learn_from_labels: false` opts out. Over the
official MCP client on a scripted LWE model (the real wire format)."""

from __future__ import annotations

import pytest
from mcp import Client

from judge_mcp.methods.lwe import label_feedback
from judge_mcp.stats import labels
from judge_mcp.contract.args import RecordLabelArgs
from testkit.scripted_servers import prompt_text
from testkit.scripted_judges import LweScript, lwe_case, role_of
from judge_mcp.storage.label_rows import LabelTable
from judge_mcp.runtime.run import run_method
from judge_mcp.storage.lwe_sessions import LweRepository
from tests.engines import on_both_engines
from tests.helpers import app_env, make_app


async def tool(client: Client, name: str, arguments: dict) -> dict:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def refine_prompts(server) -> list[str]:
    return [prompt_text(p) for p in server.requests if role_of(p) == "refine"]


async def test_a_contradicting_label_is_buffered_used_once_by_the_next_refinement_and_counted(mcp_app) -> None:
    server, backend = mcp_app(LweScript("first"))  # position-biased: every case takes the meta-prompt path
    async with Client(server) as client:
        first = await tool(client, "lwe_judge", {**lwe_case(0), "session": "s", "batch_size": 2})
        assert first["path"] == "meta_prompt" and first["winner"] == "A" and first["pending_feedback"] == 1
        label = await tool(client, "record_label", {"verdict_id": first["verdict_id"], "label": "B", "note": "B shows the work"})
        shown = await tool(client, "lwe_session_show", {"session": "s"})
        assert label["label_feedback"] is True and label["agrees"] is False
        assert shown["pending_feedback"] == 2 and shown["label_feedback"] == 1 and shown["learn_from_labels"] is True
        assert refine_prompts(backend) == []

        second = await tool(client, "lwe_judge", {**lwe_case(1), "session": "s"})  # the full buffer is refined first
        [refine] = refine_prompts(backend)
        assert second["meta_prompt_version"] == 2 and second["pending_feedback"] == 1
        assert "corrected by a human label" in refine and "The verdict given was Assistant A's answer is better" in refine
        assert "the correct answer is Assistant B's answer is better." in refine and "B shows the work" not in refine  # the note stays
        assert refine.count("[[[Batch example") == 2  # the self-feedback item and the label's

        again = await tool(client, "record_label", {"verdict_id": first["verdict_id"], "label": "B"})  # the same label again
        agreeing = await tool(client, "record_label", {"verdict_id": second["verdict_id"], "label": "A"})
        shown = await tool(client, "lwe_session_show", {"session": "s"})
    assert again["label_feedback"] is False and again["replaced"] is True and agreeing["label_feedback"] is False
    assert shown["label_feedback"] == 1 and shown["pending_feedback"] == 1
    items = [f for f in LweRepository(server.app.store).feedback("s") if f["source"] == "label"]
    assert [(f["status"], f["used_in_version"], f["verdict_id"]) for f in items] == [("used", 2, first["verdict_id"])]


async def test_a_replaced_label_discards_the_pending_item_and_a_verdict_without_winner_takes_a_tie(mcp_app) -> None:
    server, _ = mcp_app(LweScript("garbage"))  # case verdicts unreadable: the meta path has no winner
    async with Client(server) as client:
        verdict = await tool(client, "lwe_judge", {**lwe_case(0), "session": "t", "batch_size": 8})
        assert verdict["winner"] is None
        tie = await tool(client, "record_label", {"verdict_id": verdict["verdict_id"], "label": "tie"})
        b = await tool(client, "record_label", {"verdict_id": verdict["verdict_id"], "label": "B"})
        shown = await tool(client, "lwe_session_show", {"session": "t"})
    assert tie["label_feedback"] is True and tie["agrees"] is True  # no winner: the label still teaches the session
    assert b["label_feedback"] is True and shown["label_feedback"] == 1 and shown["pending_feedback"] == 2
    items = [(f["status"], "no verdict" in f["feedback"], f["feedback"].rsplit("correct answer is ", 1)[1])
             for f in LweRepository(server.app.store).feedback("t") if f["source"] == "label"]
    assert items == [("discarded", True, "no winner (a tie)."), ("pending", True, "Assistant B's answer is better.")]


async def test_a_session_created_without_learning_from_labels_ignores_them(mcp_app) -> None:
    server, _ = mcp_app(LweScript("first"))
    async with Client(server) as client:
        verdict = await tool(client, "lwe_judge", {**lwe_case(0), "session": "quiet", "learn_from_labels": False})
        label = await tool(client, "record_label", {"verdict_id": verdict["verdict_id"], "label": "B"})
        later = await tool(client, "lwe_judge", {**lwe_case(1), "session": "quiet", "learn_from_labels": True})  # set at creation only
        label2 = await tool(client, "record_label", {"verdict_id": later["verdict_id"], "label": "B"})
        shown = await tool(client, "lwe_session_show", {"session": "quiet"})
    assert label["label_feedback"] is False and label2["label_feedback"] is False and label["agrees"] is False
    assert shown["learn_from_labels"] is False and shown["label_feedback"] == 0 and shown["pending_feedback"] == 2


@on_both_engines
async def test_the_label_and_its_feedback_item_are_written_together_or_not_at_all(scripted, store, tmp_path, monkeypatch) -> None:
    backend = scripted(LweScript("first"))
    app = make_app(app_env(backend, tmp_path / "unused.db", JUDGE_MCP_MAX_RETRIES="1"), store=store)
    verdict, _ = await run_method(app, "lwe_judge", {**lwe_case(0), "session": "c", "batch_size": 4})
    await app.verdict_writes.settle(verdict.verdict_id, 5.0)

    def crash(*args, **kwargs):
        raise RuntimeError("the process died here")

    with monkeypatch.context() as patch:
        patch.setattr(LweRepository, "_insert_feedback", staticmethod(crash))
        with pytest.raises(RuntimeError):
            labels.record(store, RecordLabelArgs(verdict_id=verdict.verdict_id, label="B"), learners=label_feedback.LEARNERS)
    assert LabelTable(store).page() == [] and len(LweRepository(store).pending("c")) == 1  # neither the label nor its item
    result = labels.record(store, RecordLabelArgs(verdict_id=verdict.verdict_id, label="B"), learners=label_feedback.LEARNERS)
    assert result.label_feedback is True and result.replaced is False and len(LweRepository(store).pending("c")) == 2
    assert [f["source"] for f in LweRepository(store).pending("c")] == ["self", "label"]
    await app.aclose()
