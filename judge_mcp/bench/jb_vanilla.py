"""JudgeBench's vanilla judge exactly as JudgeBench runs it (`judge-mcp bench --method jb-vanilla`), so that its
published score (50.86 for GPT-4o on the GPT-4o pairs, JudgeBench's README table) can be checked the way the
Arena-Hard judge's is.

Source: ScalerLab/JudgeBench @ e2c52c28 (MIT per the HF dataset card ScalerLab/JudgeBench; the GitHub repository
has no LICENSE file), `utils/judges.py` class `Vanilla` and the template `utils/templates/vanilla_prompt.jinja2`,
copied byte for byte into `judge_mcp/prompts/jb_vanilla.txt` (provenance: judge_mcp/prompts/PUBLISHED.md). The
template has no Jinja blocks, only the `{{question}}`, `{{answer_a}}` and `{{answer_b}}` variables, so
prompts.render gives what JudgeBench's Jinja environment gives.

Protocol (JudgeBench): one user message (no system message), temperature 0.0, top_p 1.0, max_tokens 1024. The
answer, stripped of surrounding whitespace, must be exactly "Output (a)" (A>B) or "Output (b)" (B>A); anything
else raises in JudgeBench (`Cannot parse output`), which records a failed judgment: here unparsed, never a verdict.
There is no re-ask and no continuation. JudgeBench judges both orders (its `reverse_order`) and scores them with
`compute_final_metrics`: the bench's two placements and its JudgeBench score. For o1-family judges (a model name
starting with "o1") JudgeBench's client sends none of temperature, top_p and max_tokens, and so does this
(judgebench_api.py). Not followed: to Anthropic JudgeBench sends an empty `system`; judge-mcp sends none.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from judge_mcp import prompts
from judge_mcp.contract.args import PairArgs
from judge_mcp.backends.base import Backend, ChatRequest, Message
from judge_mcp.bench.judgebench_api import judge_request
from judge_mcp.calls.context import CallContext
from judge_mcp.methods import registry, transcript
from judge_mcp.contract.results import JudgedResult

TEMPLATE = "jb_vanilla.txt"
MAX_TOKENS = 1024
TEMPERATURE = 0.0
TOP_P = 1.0
DECISIONS = {"Output (a)": "A>B", "Output (b)": "B>A"}


def parse_decision(output: str) -> str | None:
    """JudgeBench's `extract_pairwise_result` on `output.strip()`: "A>B", "B>A", or None (it raises there)."""
    return DECISIONS.get(output.strip())


class JbVanillaArgs(PairArgs):
    """The baseline's arguments: the question and two answers, judged in the order given."""

    tool: ClassVar[str] = "jb_vanilla"


class JbVanillaResult(JudgedResult):
    decision: Literal["A>B", "B>A"] | None = Field(description="A>B for Output (a), B>A for Output (b); null when unparsed")
    winner: Literal["A", "B"] | None
    parse_ok: bool
    judgment: str = Field(description="the model's answer as sent")


def request(args: JbVanillaArgs, backend: Backend | None = None) -> ChatRequest:
    """JudgeBench's request for (question, A, B) (to `backend`: an o1-family judge gets JudgeBench's o1 request)."""
    prompt = prompts.render(
        TEMPLATE, question=transcript.text(args.prompt), answer_a=transcript.text(args.response_a), answer_b=transcript.text(args.response_b)
    )
    messages = (Message("user", prompt),)
    if backend is not None:
        return judge_request(backend, messages, None, temperature=TEMPERATURE, top_p=TOP_P, max_tokens=MAX_TOKENS, purpose="jb_vanilla")
    return ChatRequest(messages=messages, temperature=TEMPERATURE, top_p=TOP_P, max_tokens=MAX_TOKENS, purpose="jb_vanilla", cache_hints=False)


async def jb_vanilla_judge(judge: CallContext, args: JbVanillaArgs | None = None, /, **fields: Any) -> JbVanillaResult:
    """One vanilla judgment of (A, B) in the order given."""
    args = JbVanillaArgs.of(args, fields)
    completion = await judge.complete(request(args, judge.backend))
    decision = parse_decision(completion.text)
    return JbVanillaResult(
        decision=decision,  # type: ignore[arg-type]
        winner={"A>B": "A", "B>A": "B"}.get(decision or ""),  # type: ignore[arg-type]
        parse_ok=decision is not None,
        judgment=completion.text,
        model=judge.model_id,
        usage=judge.usage(),
    )


registry.register(jb_vanilla_judge, JbVanillaArgs, JbVanillaResult)
