"""The Arena-Hard pairwise judge exactly as JudgeBench runs it: the baseline the goal-reversed prompting paper
compares against (the goal-reversed prompting paper uses JudgeBench's Arena-Hard judge as "SOP, better").

Source: ScalerLab/JudgeBench (MIT), `utils/judges.py` class `ArenaHard` and the templates
`utils/templates/arena_hard_judge_system.jinja2` / `arena_hard_judge_prompt.jinja2`, which follow
lmarena/arena-hard-auto `gen_judgment.py` (Apache-2.0). The prompt texts are copied unchanged into
`judge_mcp/prompts/arena_hard_system.txt`, `arena_hard_user.txt` and `arena_hard_continue.txt`.

Protocol (JudgeBench): system + user message, temperature 0, 4096 tokens. Every `[[...]]` label in the judgment
(pattern `\\[\\[([AB<>=]+)\\]\\]`) is collected; none: the model is asked once more in the same conversation to
"continue your judgment and finish by outputting a final verdict label" and the two answers are read together;
several different labels: unparsed; one label: the decision, with `>>` read as `>`. `A=B` is a tie: no winner, and
the bench counts it wrong, like an unparsed judgment. With `judge.no_reask` the continuation is not sent.

o1-family judges (a model name starting with "o1"): as JudgeBench's client sends them (judgebench_api.py), the
system text opens the first user message between `<|BEGIN_SYSTEM_MESSAGE|>` markers, and neither temperature nor
max_tokens is sent; the continuation follows the folded message, as JudgeBench's (mutated) message list does.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from judge_mcp import prompts
from judge_mcp.contract.args import PairArgs
from judge_mcp.backends.base import Message
from judge_mcp.bench.judgebench_api import judge_request
from judge_mcp.methods import registry, transcript
from judge_mcp.calls.context import CallContext
from judge_mcp.contract.results import JudgedResult


# ---- the result model (a bench baseline, not an MCP tool) -------------------------------------------------------
class ArenaHardResult(JudgedResult):
    decision: str | None = Field(description="A>B, B>A, A=B (or another single label as printed); null when unparsed")
    winner: Literal["A", "B"] | None = Field(description="A or B for A>B / B>A; null for a tie or an unparsed judgment")
    tie: bool
    parse_ok: bool
    continued: bool = Field(description="the first answer had no label and the continuation was asked")
    judgment: str


MAX_TOKENS = 4096
ATTEMPTS = 2  # JudgeBench's number_of_judgment_attempts: the first answer and one continuation
LABEL = re.compile(r"\[\[([AB<>=]+)\]\]")


def parse_decision(judgment: str) -> tuple[str | None, bool]:
    """(decision, try_again), JudgeBench's `get_score`: no label -> (None, True); one distinct label -> (it with
    `>>` read as `>`, False); several distinct labels -> (None, False)."""
    matches = {m for m in LABEL.findall(judgment) if m != ""}
    if not matches:
        return None, True
    if len(matches) == 1:
        return matches.pop().strip("\n").replace(">>", ">").strip(), False
    return None, False


def winner_of(decision: str | None) -> Literal["A", "B"] | None:
    return {"A>B": "A", "B>A": "B"}.get(decision or "")  # type: ignore[return-value]


class ArenaHardArgs(PairArgs):
    """The baseline's arguments: the prompt and two answers, judged in the order given."""

    tool: ClassVar[str] = "arena_hard"


async def arena_hard_judge(judge: CallContext, args: ArenaHardArgs | None = None, /, **fields: Any) -> ArenaHardResult:
    """One Arena-Hard judgment of (A, B) in the order given."""
    args = ArenaHardArgs.of(args, fields)
    messages: tuple[Message, ...] = (
        Message("user", prompts.render(  # the baseline shows its texts as they are (a conversation: its transcript, not defused)
            "arena_hard_user.txt", prompt=transcript.text(args.prompt), answer_a=transcript.text(args.response_a),
            answer_b=transcript.text(args.response_b),
        )),
    )
    system = prompts.load("arena_hard_system.txt")
    judgment, decision, continued = "", None, False
    attempts = 1 if judge.no_reask else ATTEMPTS
    for attempt in range(attempts):
        purpose = "arena_hard" if attempt == 0 else "arena_hard:continue"
        request = judge_request(judge.backend, messages, system, temperature=0.0, max_tokens=MAX_TOKENS, purpose=purpose)
        completion = await judge.complete(request)
        judgment += "\n" + completion.text
        decision, try_again = parse_decision(judgment)
        messages = messages + (Message("assistant", completion.text),)
        if not try_again or attempt == attempts - 1:
            break
        messages = messages + (Message("user", prompts.load("arena_hard_continue.txt")),)
        continued = True
    winner = winner_of(decision)
    return ArenaHardResult(
        decision=decision,
        winner=winner,
        tie=decision == "A=B",
        parse_ok=decision is not None,
        continued=continued,
        judgment=judgment.lstrip("\n"),
        model=judge.model_id,
        usage=judge.usage(),
    )


registry.register(arena_hard_judge, ArenaHardArgs, ArenaHardResult)
