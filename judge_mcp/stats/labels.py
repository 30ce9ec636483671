"""Human labels of verdicts (the record_label tool): what a label means for each judging tool, and recording one.

A label is the correct answer in the verdict's own terms, stored as text:
- compare_pair, lwe_judge: "A", "B" or "tie" (case does not matter); the verdict's own answer is its `winner`, and
  a verdict without a winner (orders disagreed, unparsed) counts as "tie";
- grade_score_options: the best option's 0-based index, given as a number, or as the option's exact text (a string
  that is no option's text but is digits is read as the index); the verdict's answer is its `winner_index`, "none"
  when it named no single option (a tied mode, nothing parsed, the unrelated option);
- infer_instruction_reward: the index (or exact text) of the response that best follows the instruction, among 2 or
  more responses (one response leaves nothing to choose); the verdict's answer is its `best_index`, "none" when it
  named none (a tied top reward, an unparsed response).

Recording a label for a verdict that already has one replaces it (the label, the note and `updated_at`; the first
`created_at` stays): a correction, not a second vote. A label is kept for a verdict row that is in the log: an id
whose row is still being written in the background (the database was busy when the answer went out) is waited for a
few seconds (tools.record_label), then refused with a message saying to try again; an id no row has is refused.
Labels never leave the database: tools report them only as counts and figures (judge_stats' `agreement`).
"""

from __future__ import annotations

import json
from typing import Any

from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, LweJudgeArgs, RecordLabelArgs,
)
from judge_mcp.contract.results import LabelResult
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.label_rows import LabelTable

PAIRWISE = (ComparePairArgs.tool, LweJudgeArgs.tool)
# tool -> the input holding the choices a label picks from
CHOICES = {GradeScoreOptionsArgs.tool: "options", InferInstructionRewardArgs.tool: "responses"}
PAIR_LABELS = ("A", "B", "tie")
NONE = "none"  # the verdict named no single option or response
# what callers brought besides the judged texts, as judge_stats groups verdicts by (stats.BROUGHT's flags)
IMAGE_INPUTS = ("images", "response_a_images", "response_b_images", "option_images")


def inputs_label(inputs: Any) -> str:
    """A verdict's judge_stats group `inputs`: criteria, reference, images joined by '+', or 'text'."""
    if not isinstance(inputs, dict):
        return "text"
    names = [name for name, keys in (("criteria", ("criteria",)), ("reference", ("reference",)), ("images", IMAGE_INPUTS))
             if any(key in inputs for key in keys)]
    return "+".join(names) or "text"


def canonical(tool: str, inputs: Any, given: int | str) -> str:
    """The label `given` for a verdict of `tool` judged on `inputs`, as stored; an InputError when it does not fit."""
    if tool in PAIRWISE:
        word = given.strip() if isinstance(given, str) else given
        found = next((label for label in PAIR_LABELS if isinstance(word, str) and word.lower() == label.lower()), None)
        if found is None:
            raise InputError(f"'label' must be \"A\", \"B\" or \"tie\" for a {tool} verdict, got {_shown(given)}")
        return found
    key = CHOICES.get(tool)
    if key is None:
        raise InputError(f"verdicts of {tool!r} take no labels (record_label labels {', '.join([*PAIRWISE, *CHOICES])})")
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


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def judged(tool: str, output: dict[str, Any]) -> str:
    """The verdict's own answer, in a label's terms."""
    if tool in PAIRWISE:
        winner = output.get("winner")
        return winner if winner in ("A", "B") else "tie"
    value = output.get("winner_index" if tool == GradeScoreOptionsArgs.tool else "best_index")
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else NONE


def p_label(tool: str, output: dict[str, Any], label: str) -> float | None:
    """The probability the verdict's `p_better` gave the labelled answer (an A/B label of a verdict carrying one)."""
    p = output.get("p_better") if tool in PAIRWISE and label in ("A", "B") else None
    value = p.get(label) if isinstance(p, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def record(store: Engine, args: RecordLabelArgs, *, pending: bool = False) -> LabelResult:
    """Check the label against its verdict and store it (replacing an earlier one). `pending`: the verdict's row was
    still being written when the wait ran out. Blocking: from async code run it in a worker thread."""
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
    replaced = table.put(args.verdict_id, row["tool"], label, inputs_label(inputs), args.note)
    if replaced is None:  # trimmed between the two reads
        raise InputError(f"unknown verdict_id {args.verdict_id!r}: its verdict was just deleted by retention")
    verdict = judged(row["tool"], output if isinstance(output, dict) else {})
    return LabelResult(verdict_id=args.verdict_id, tool=row["tool"], label=label, verdict=verdict, agrees=verdict == label, replaced=replaced)


def _load(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
