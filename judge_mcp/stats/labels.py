"""Human labels of verdicts (the record_label tool): what a label means for each judging tool, and recording one.

A label is the correct answer in the verdict's own terms, stored as text:
- compare_pair, lwe_judge: "A", "B" or "tie" (case does not matter); the verdict's own answer is its `winner`, and
  a verdict without a winner (orders disagreed, unparsed) counts as "tie";
- grade_score_options: the best option's 0-based index, given as a number, or as the option's exact text (a string
  that is no option's text but is digits is read as the index); the verdict's answer is its `winner_index`, "none"
  when it named no single option (a tied mode, nothing parsed, the unrelated option);
- score_response: a whole number on the verdict's scale (given as a number or digits), the right overall score;
  the verdict's answer is its `overall` rounded to the nearest whole number (halves up), "none" when it has none;
  judge_stats compares the unrounded `overall` with the labels (mean absolute error, Spearman, Kendall);
- infer_instruction_reward: the index (or exact text) of the response that best follows the instruction, among 2 or
  more responses (one response leaves nothing to choose); the verdict's answer is its `best_index`, "none" when it
  named none (a tied top reward, an unparsed response).

Recording a label for a verdict that already has one replaces it (the label, the note and `updated_at`; the first
`created_at` stays): a correction, not a second vote. A label is kept for a verdict row that is in the log: an id
whose row is still being written in the background (the database was busy when the answer went out) is waited for a
few seconds (tools.record_label), then refused with a message saying to try again; an id no row has is refused.
Tools report labels only as counts and figures (judge_stats' `agreement`). One use leaves the database: on an
lwe_judge verdict a contradicting label becomes feedback for its session, so the right answer (A, B or tie; never
the note) reaches the model in the next refinement prompt, in the label's transaction: a hook the caller wires
(`learners`, by tool: the server and the bench pass methods/lwe/label_feedback.py's LEARNERS), so the report knows
no method.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, LweJudgeArgs, RecordLabelArgs,
)
from judge_mcp.contract.results import LabelResult
from judge_mcp.storage.engine import Engine
from judge_mcp.storage import verdict_facts
from judge_mcp.storage.label_rows import LabelTable

PAIRWISE = (ComparePairArgs.tool, LweJudgeArgs.tool)
SCORED = "score_response"  # ScoreResponseArgs.tool (score_models imports the args; labels stays light)
# tool -> the input holding the choices a label picks from
CHOICES = {GradeScoreOptionsArgs.tool: "options", InferInstructionRewardArgs.tool: "responses"}
PAIR_LABELS = ("A", "B", "tie")
NONE = "none"  # the verdict named no single option or response
# What a tool's verdicts learn from a label, in the label's transaction: (tx, tenant, verdict_id, the verdict's inputs,
# its output, the label, the label it replaces or None) -> whether the label was kept as feedback.
Learner = Callable[[Any, str, str, Any, Any, str, "str | None"], bool]


def inputs_label(inputs: Any) -> str:
    """A verdict's judge_stats group `inputs`: criteria, reference, images, conversation, trajectory joined by '+',
    or 'text' (verdict_facts.brought_label, as judge_stats groups the verdict)."""
    if not isinstance(inputs, dict):
        return "text"
    return verdict_facts.brought_label(verdict_facts.brought_flags(inputs))


def canonical(tool: str, inputs: Any, given: int | str) -> str:
    """The label `given` for a verdict of `tool` judged on `inputs`, as stored; an InputError when it does not fit."""
    if tool in PAIRWISE:
        word = given.strip() if isinstance(given, str) else given
        found = next((label for label in PAIR_LABELS if isinstance(word, str) and word.lower() == label.lower()), None)
        if found is None:
            raise InputError(f"'label' must be \"A\", \"B\" or \"tie\" for a {tool} verdict, got {_shown(given)}")
        return found
    if tool == SCORED:
        return _score_label(inputs, given)
    key = CHOICES.get(tool)
    if key is None:
        raise InputError(f"verdicts of {tool!r} take no labels (record_label labels {', '.join([*PAIRWISE, *CHOICES, SCORED])})")
    choices = inputs.get(key) if isinstance(inputs, dict) else None
    if not isinstance(choices, list) or len(choices) < 2:
        raise InputError(f"this {tool} verdict judged fewer than 2 {key}: there is no best one to label")
    if isinstance(given, str):
        if given in choices:
            return str(choices.index(given))
        if not (given.strip().isascii() and given.strip().isdigit()):
            raise InputError(f"'label' is not the text of any of this verdict's {len(choices)} {key} (give its exact text or its 0-based index)")
        given = int(given.strip())
    if not 0 <= given < len(choices):
        raise InputError(f"'label' {given} is not an index of this verdict's {len(choices)} {key} (0 to {len(choices) - 1})")
    return str(given)


def _score_label(inputs: Any, given: int | str) -> str:
    scale = inputs.get("scale") if isinstance(inputs, dict) else None
    low, high = scale if isinstance(scale, list) and len(scale) == 2 else (1, 10)
    word = given.strip() if isinstance(given, str) else None
    value = int(word) if word is not None and word.isascii() and word.isdigit() and len(word) <= 3 else given
    if not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"'label' must be a whole number from {low} to {high} (this score_response verdict's scale), got {_shown(given)}")
    return str(value)


def score_of(tool: str, output: dict[str, Any]) -> float | None:
    """A score_response verdict's `overall` (None for other tools, or without one)."""
    value = output.get("overall") if tool == SCORED else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def judged(tool: str, output: dict[str, Any]) -> str:
    """The verdict's own answer, in a label's terms."""
    if tool in PAIRWISE:
        winner = output.get("winner")
        return winner if winner in ("A", "B") else "tie"
    if tool == SCORED:
        overall = score_of(tool, output)
        return NONE if overall is None else str(math.floor(overall + 0.5))
    value = output.get("winner_index" if tool == GradeScoreOptionsArgs.tool else "best_index")
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else NONE


def p_label(tool: str, output: dict[str, Any], label: str) -> float | None:
    """The probability the verdict's `p_better` gave the labelled answer (an A/B label of a verdict carrying one)."""
    p = output.get("p_better") if tool in PAIRWISE and label in ("A", "B") else None
    value = p.get(label) if isinstance(p, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def record(store: Engine, args: RecordLabelArgs, *, pending: bool = False, learners: Mapping[str, Learner] | None = None) -> LabelResult:
    """Check the label against its verdict and store it (replacing an earlier one). `pending`: the verdict's row was
    still being written when the wait ran out. `learners`: by tool, what its verdicts learn from a label (Learner).
    Blocking: from async code run it in a worker thread."""
    table = LabelTable(store)
    row = table.verdict(args.verdict_id)
    if row is None:
        if pending:
            raise InputError(
                f"the verdict {args.verdict_id} is not in the verdict log yet (its row is still being written: the database "
                "was busy); try record_label again in a few seconds"
            )
        raise InputError(
            f"unknown verdict_id {args.verdict_id!r}: no verdict in the log has it (a verdict_id from another server's database, "
            "a verdict trimmed by retention, or one whose log row was lost)"
        )
    inputs, output = _load(row["inputs"]), _load(row["output"])
    label = canonical(row["tool"], inputs, args.label)
    learned: list[bool] = []
    learner = (learners or {}).get(row["tool"])

    def learn(tx: Any, earlier: str | None) -> None:  # in the label's transaction
        assert learner is not None
        learned.append(learner(tx, table.tenant, args.verdict_id, inputs, output, label, earlier))

    replaced = table.put(args.verdict_id, row["tool"], label, inputs_label(inputs), args.note, None if learner is None else learn)
    if replaced is None:  # trimmed between the two reads
        raise InputError(f"unknown verdict_id {args.verdict_id!r}: its verdict was just deleted by retention")
    verdict = judged(row["tool"], output if isinstance(output, dict) else {})
    return LabelResult(
        verdict_id=args.verdict_id, tool=row["tool"], label=label, verdict=verdict, agrees=verdict == label, replaced=replaced,
        label_feedback=any(learned),
    )


def _load(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
