"""Pointwise 1-10 rating: the baseline of the FLIP paper (the FLIP paper, "Small Reward Models via Backward Inference", Table 5,
"Prompt 1: Pointwise Rating"). Each response is rated alone, concurrently; the best is the single highest score.

The answer is the paper's JSON `{ "REASONING": "[...]", "SCORE": "<your-score>" }`. With a backend that decodes
under a JSON schema, SCORE is constrained to the strings "1".."10" (REASONING first, as in the paper). A score
outside 1..10 or a missing one is unparsed after one re-ask and never turned into a rating. This is a benchmark
baseline (`judge-mcp bench --method pointwise`), not an MCP tool.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field

from judge_mcp import prompts
from judge_mcp.contract.fields import JUDGED, MAX_RESPONSES, Prompt, Text
from judge_mcp.contract.args import JudgingArgs
from judge_mcp.backends.base import user
from judge_mcp.methods.ask import ask
from judge_mcp.calls.fanout import run_each
from judge_mcp.methods.ranking import rank_by_score
from judge_mcp.methods import registry
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.parsing import neutralise, parse_json_object
from judge_mcp.contract.results import JudgedResult


# ---- the result model (a bench baseline, not an MCP tool) -------------------------------------------------------
class PointwiseItem(BaseModel):
    index: int = Field(description="0-based index of the response in the caller's list")
    score: float | None = Field(description="the rating, 1..10; null when unparsed")
    parse_ok: bool
    reasoning: str = ""
    reasked: bool = False
    raw_answer: str | None = Field(None, description="unparsed only: the model's last answer (tail)")


class PointwiseResult(JudgedResult):
    results: list[PointwiseItem]
    ranking: list[int] = Field(description="parsed responses by score, highest first (ties in index order), then unparsed")
    best_index: int | None = Field(description="the single highest-rated response; null when tied or nothing parsed")
    tied_best: list[int] = Field(default_factory=list)
    unparsed: list[int] = Field(default_factory=list)


MAX_TOKENS = 512  # the FLIP paper's limit for every method (§3.1)
MIN_SCORE, MAX_SCORE = 1, 10
SCORE_KEY, REASONING_KEY = "SCORE", "REASONING"
PAPER_FORMAT = '{ "REASONING": "[...]", "SCORE": "<your-score>" }'


# ---- prompts -----------------------------------------------------------------------------------------------------
def answer_format(structured: bool) -> str:
    if not structured:
        return PAPER_FORMAT
    return (
        'a JSON object with two string fields, in this order: "REASONING" (your short explanation) and "SCORE" '
        "(your score, a whole number from 1 to 10)"
    )


def answer_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            REASONING_KEY: {"type": "string"},
            SCORE_KEY: {"type": "string", "enum": [str(k) for k in range(MIN_SCORE, MAX_SCORE + 1)]},
        },
        "required": [REASONING_KEY, SCORE_KEY],
        "additionalProperties": False,
    }


def system_prompt(structured: bool) -> str:
    return prompts.render("flip_pointwise_system.txt", answer_format=answer_format(structured)).rstrip("\n")


def user_prompt(prompt: str, response: str, structured: bool) -> str:
    return prompts.render(
        "flip_pointwise_user.txt",
        prompt=neutralise(prompt).strip("\n"),
        response=neutralise(response).strip("\n"),
        answer_format=answer_format(structured),
    ).rstrip("\n")


# ---- the answer grammar --------------------------------------------------------------------------------------------
_NUMBER = re.compile(r"^\s*+(\d{1,2}(?:\.\d++)?+)\s*+(?:/\s*+10)?+\s*+$")
# (no optional quote before `score`: only group 1 of the first match is read, the same with or without it, and a
# pattern that opens with its letter is searched for it, not tried at every position)
_KEYED = re.compile(
    r"""score["']?+\s*+:\s*+(?:["']\s*+)?+(\d{1,2}(?:\.\d++)?+)[ \t\r]*+(?:/\s*+10)?+[ \t\r]*+(?:["'][ \t\r]*+)?+[,}\n]""", re.I
)
_KEYED_REASONING = re.compile(r'"reasoning"\s*:\s*"((?:\\.|[^"\\])*)"', re.I | re.S)


def _score(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        m = _NUMBER.match(value)
        if not m:
            return None
        number = float(m.group(1))
    else:
        return None
    return number if MIN_SCORE <= number <= MAX_SCORE else None


def parse_rating(text: str) -> tuple[float, str] | None:
    """(score, reasoning) from the paper's JSON answer, or None.

    The SCORE key in any case; its value a number or a numeric string ("7", "7.5", "7/10") within 1..10. A JSON
    object that has a SCORE key is judged on it alone; broken JSON is read from a keyed `"SCORE": "7"` pair.
    """
    if not text or not text.strip():
        return None
    data = parse_json_object(text)
    if data is not None:
        keys = {str(k).strip().lower(): k for k in data}
        if "score" in keys:
            score = _score(data[keys["score"]])
            if score is None:
                return None
            reasoning = data.get(keys["reasoning"]) if "reasoning" in keys else ""
            return score, str(reasoning or "").strip()
    m = _KEYED.search(text + "\n")
    if m is None:
        return None
    score = _score(m.group(1))
    if score is None:
        return None
    r = _KEYED_REASONING.search(text)
    return score, (r.group(1).strip() if r else "")


def rank(items: list[PointwiseItem]) -> tuple[list[int], int | None, list[int]]:
    """(ranking, best_index, tied_best) by score; unparsed responses last (see ranking.rank_by_score)."""
    return rank_by_score([(it.index, it.score if it.parse_ok else None) for it in items])


# ---- the method ------------------------------------------------------------------------------------------------------
async def rate_one(judge: CallContext, *, index: int, prompt: str, response: str) -> PointwiseItem:
    structured = judge.structured
    request = user(
        user_prompt(prompt, response, structured),
        system=system_prompt(structured),
        max_tokens=MAX_TOKENS,
        json_schema=answer_schema() if structured else None,
        schema_name="pointwise_rating",
        purpose=f"pointwise:{index}",
    )
    reminder = prompts.render("flip_pointwise_reask.txt", answer_format=answer_format(structured)).rstrip("\n")
    result = await ask(judge, request, parse_rating, reminder)
    if result.value is None:
        return PointwiseItem(index=index, score=None, parse_ok=False, reasked=result.reasked, raw_answer=result.text[-2000:])
    score, reasoning = result.value
    return PointwiseItem(index=index, score=score, parse_ok=True, reasoning=reasoning[:4000], reasked=result.reasked)


class PointwiseArgs(JudgingArgs):
    """The baseline's arguments: a prompt and the responses to rate (as many as infer_instruction_reward takes)."""

    tool: ClassVar[str] = "pointwise"

    prompt: Prompt
    responses: Annotated[list[Text], JUDGED, Field(min_length=1, max_length=MAX_RESPONSES)]


async def pointwise_scores(judge: CallContext, args: PointwiseArgs | None = None, /, **fields: Any) -> PointwiseResult:
    """Rate each response 1..10 on its own (concurrently) and rank them."""
    args = PointwiseArgs.of(args, fields)
    prompt, responses = args.prompt, args.responses
    results = await run_each(
        judge,
        len(responses),
        lambda index: rate_one(judge, index=index, prompt=prompt, response=responses[index]),
        lambda index, _: f"response {index} rated",
    )
    ranking, best, tied = rank(results)
    return PointwiseResult(
        results=results,
        ranking=ranking,
        best_index=best,
        tied_best=tied,
        unparsed=[it.index for it in results if not it.parse_ok],
        model=judge.model_id,
        usage=judge.usage(),
    )


registry.register(pointwise_scores, PointwiseArgs, PointwiseResult)
