"""What a caller brings besides the judged answers: a rubric (`criteria`) and a reference answer (`reference`).

Absent, a method's prompt is the paper's, byte for byte. Present, each enters the user message as a fenced block
between the prompt and the answers (where FastChat's reference-guided pairwise judge puts its reference answer),
defused like the judged texts so it cannot close a fence or write a verdict, and a closing note after the answers
tells the judge how to use it. The system prompt, the verdict grammar and the aggregation do not change.
"""

from __future__ import annotations

from collections.abc import Callable

from judge_mcp import prompts


def given(criteria: str | None, reference: str | None) -> bool:
    return criteria is not None or reference is not None


def blocks(
    criteria: str | None, reference: str | None, defuse: Callable[[str], str], *,
    reference_block: str = "input_reference.txt", criteria_block: str = "input_criteria.txt",
) -> str:
    """The fenced reference block, then the criteria block (only those given), blank-line separated; the fences
    are the prompt's own style (prompt file names)."""
    parts = []
    if reference is not None:
        parts.append(prompts.render(reference_block, reference=defuse(reference).strip("\n")).rstrip("\n"))
    if criteria is not None:
        parts.append(prompts.render(criteria_block, criteria=defuse(criteria).strip("\n")).rstrip("\n"))
    return "\n\n".join(parts)


def notes(criteria: str | None, reference: str | None, *, reference_note: str, criteria_note: str) -> str:
    """The closing instructions for the blocks given: the reference's, then the criteria's (prompt file names)."""
    parts = []
    if reference is not None:
        parts.append(prompts.load(reference_note).rstrip("\n"))
    if criteria is not None:
        parts.append(prompts.load(criteria_note).rstrip("\n"))
    return "\n".join(parts)
