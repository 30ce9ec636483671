"""LWE learns from labels (the contract (docs/tools.md) "Learning from labels"): a human label that contradicts an lwe_judge verdict,
or meets one without a winner, becomes a feedback item in that verdict's session's buffer, beside the judge's own
self-feedback; the next refinement (refine.py, prompts/lwe_label_item.txt) is told which verdict was wrong and what
the right answer is. The paper's prompts are unchanged.

The item is written in the label's own transaction (labels.record -> LabelTable.put), so a label never lands without
its item or the other way round; it is then an ordinary pending item, used by exactly one refinement
(LweRepository.commit_version). A label recorded again unchanged changes nothing; a replaced label discards the
verdict's pending label item and buffers the new one (none when the new label agrees). A session created with
`learn_from_labels: false` ignores labels.
"""

from __future__ import annotations

import json
from typing import Any

from judge_mcp import prompts
from judge_mcp.contract.messages import Message
from judge_mcp.methods import transcript
from judge_mcp.storage import texts
from judge_mcp.storage.engine import Tx
from judge_mcp.storage.lwe_sessions import LweRepository

SAID = {"A": "Assistant A's answer is better", "B": "Assistant B's answer is better", "tie": "no winner (a tie)"}


def _text(value: Any) -> str:
    """A logged judged value as the feedback buffer keeps it: a string as it is, a conversation or trajectory (logged
    as its messages) as its transcript, the way the meta path stores one (methods/transcript.py)."""
    if value is None or isinstance(value, str):
        return value or ""
    try:
        return transcript.text([Message.model_validate(m) for m in value])
    except (TypeError, ValueError):  # a logged message that no longer validates (an image kept as its hash): as JSON
        return json.dumps(value, ensure_ascii=False)


def item(inputs: dict[str, Any], output: dict[str, Any], label: str) -> dict[str, Any] | None:
    """The feedback item a label makes of an lwe_judge verdict; None when the label agrees with a decided verdict.
    The label's note stays in the database (record_label's promise): the model is told only the right answer."""
    winner = output.get("winner")
    if winner in ("A", "B") and winner == label:
        return None
    found = output.get("vanilla")
    vanilla: dict[str, Any] = found if isinstance(found, dict) else {}
    judgment = output.get("judgment") or f"Vanilla verdicts: {vanilla.get('ab')} with A shown first, {vanilla.get('ba')} with B shown first."
    verdict = SAID[winner] if winner in ("A", "B") else "no verdict (the judgment did not decide)"
    feedback = prompts.render("lwe_label_feedback.txt", verdict=verdict, label=SAID[label]).rstrip("\n")
    return {
        "meta_version": int(output.get("meta_prompt_version") or 1),
        "prompt": _text(inputs.get("prompt")),
        "response_a": _text(inputs.get("response_a")),
        "response_b": _text(inputs.get("response_b")),
        "eval_prompt": str(output.get("eval_prompt") or ""),
        "judgment": str(judgment),
        "winner": winner if winner in ("A", "B") else None,
        "feedback": feedback,
        "feedback_parse_ok": True,
    }


def buffer(tx: Tx, tenant: str, verdict_id: str, inputs: Any, output: Any, label: str, previous: str | None) -> bool:
    """Inside the label's transaction: buffer the label's feedback item in the verdict's session, `tenant`'s (see the
    module doc). Whether an item was buffered."""
    if previous == label or not isinstance(inputs, dict) or not isinstance(output, dict):
        return False
    session = output.get("session") or inputs.get("session")
    if not isinstance(session, str):
        return False
    texts.resolve(tx, [inputs, output])
    return LweRepository.label_feedback(tx, tenant, session, verdict_id, item(inputs, output, label))


LEARNERS = {"lwe_judge": buffer}  # what stats/labels.record's `learners` hook takes: LWE learns from its verdicts' labels
