"""What a caller brings besides the judged answers: a rubric (`criteria`) and a reference answer (`reference`).

Absent, a method's prompt is the paper's, byte for byte. Present, each enters the user message as a fenced block
between the prompt and the answers (where FastChat's reference-guided pairwise judge puts its reference answer),
defused like the judged texts so it cannot close a fence or write a verdict, and a closing note after the answers
tells the judge how to use it. The system prompt, the verdict grammar and the aggregation do not change.

Images go after the message's text in captioned groups (the prompt's, then each answer's in the order shown), so an
answer's images move with it when the order is swapped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from judge_mcp import prompts
from judge_mcp.contract.images import Image


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


Images = tuple[Image, ...]
ImageGroups = tuple[tuple[str, Images], ...]


def _caption(name: str, **values: str) -> str:
    return prompts.render(name, **values).strip("\n")


def pair_images(prompt_images: Images, first: Images, second: Images) -> ImageGroups:
    """The image groups of a pairwise request, answers in the order shown: an answer's images go with it."""
    groups = (
        (_caption("images_prompt.txt"), prompt_images),
        (_caption("images_answer_a.txt"), first),
        (_caption("images_answer_b.txt"), second),
    )
    return tuple(g for g in groups if g[1])


def option_images(prompt_images: Images, shown: Sequence[Images]) -> ImageGroups:
    """The image groups of a Grade Score request: the prompt's, then each shown option's, numbered as shown."""
    groups = [(_caption("images_prompt.txt"), prompt_images)]
    groups += [(_caption("images_option.txt", number=str(k)), imgs) for k, imgs in enumerate(shown, start=1)]
    return tuple(g for g in groups if g[1])
