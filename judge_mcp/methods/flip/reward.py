"""FLIP: reward by backward inference (the FLIP paper, "Small Reward Models via Backward Inference", §2.2 and Appendix F).

For each response the model infers the instruction that would most plausibly have produced it (the paper's
Prompt 1, 2 or 3); the reward is the similarity between the inferred and the given instruction (word-level F1 by
default, see similarity.py). With `context` (a user prompt or a conversation), the given instruction is a system
prompt and the model infers the system prompt from the context and the response, as in §2.2.

Answers are read from the paper's JSON (`{"REASONING": ..., "INFERRRED INSTRUCTION": ...}`; the paper's own
spelling, the correct one and the usual variants are all accepted). The default answer order is the paper's
(reasoning, then the instruction); `answer_order="instruction_first"` is an option for small models whose looping
explanation uses up the 512-token budget (prompt bullet, format and schema all follow the chosen order). An answer without a complete instruction
value is unparsed after one re-ask: its reward is 0.0 (the paper counts format failures as wrong), it ranks after
every parsed response, and the best text extraction is still shown with the similarity it would have scored.

The paper's known weak spot, a response that opens by repeating the instruction, is detected (`detect_echo`) and
reported as `echoes_instruction`; the reward itself is left as inferred (see the README).

Reading the answers (the JSON grammar, the best extraction of an unparsed one) is in flip/answers.py. Pure
functions (parsing, extraction, echo detection, ranking) are tested directly in tests/methods/test_flip.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


from judge_mcp import prompts
from judge_mcp.contract.fields import ANSWER_ORDERS as ANSWER_ORDERS  # the tool's choices, for this module's readers
from judge_mcp.contract.fields import FLIP_VARIANTS
from judge_mcp.contract.args import InferInstructionRewardArgs
from judge_mcp.backends.base import user
from judge_mcp.methods import text_work, transcript
from judge_mcp.methods.similarity import score as similarity_score
from judge_mcp.methods.ask import ask, bounded
from judge_mcp.calls.fanout import run_each
from judge_mcp.methods.ranking import rank_by_score
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.flip.answers import MAX_EXTRACTION_CHARS, extract_best, parse_inferred
from judge_mcp.methods.parsing import neutralise
from judge_mcp.contract.results import FlipItem, FlipResult

PROMPT_VARIANTS = FLIP_VARIANTS
PAPER_ORDER: str = InferInstructionRewardArgs.default("answer_order")  # the paper's answer order: reasoning, then instruction
MAX_TOKENS = 512  # the paper's token limit for every method (§3.1)
REWARD_DIGITS = 6  # rewards are rounded to this many digits; equal rounded rewards are ties

# The paper prints the key as "INFERRRED INSTRUCTION" (sic); the authors' code and our schema use the correct one.
PAPER_KEY = "INFERRRED INSTRUCTION"
SCHEMA_KEY = "INFERRED INSTRUCTION"
REASONING_KEY = "REASONING"

# maxLength (characters) of the answer's free-text fields under a JSON schema: together they fit the paper's
# 512-token budget (~4 characters per token), so a looping explanation must close and the instruction gets written.
FIELD_MAX_CHARS = {REASONING_KEY: 1000, SCHEMA_KEY: 1000}


def field_order(answer_order: str) -> tuple[str, str]:
    """The two answer fields ("reasoning", "instruction") in the order the model writes them."""
    return ("reasoning", "instruction") if answer_order == "reasoning_first" else ("instruction", "reasoning")


@lru_cache(maxsize=64)  # static text per (key, structured, order); so are answer_schema and system_prompt
def answer_format(key: str, *, structured: bool, answer_order: str = PAPER_ORDER) -> str:
    """The answer format the prompts show, in `answer_order`.

    Plain, reasoning first: the paper's own template (placeholders and key spelling as printed). Structured: a
    description without placeholders (tiny models copy `<instruction>` back verbatim) naming the same order as
    `answer_schema`. `instruction_first` (an option for small models whose looping explanation uses up the budget
    before the instruction is reached) swaps the two fields in both.
    """
    if not structured:
        parts = {"reasoning": '"%s": "<explanation>"' % REASONING_KEY, "instruction": '"%s": "<instruction>"' % key}
        return "{ " + ", ".join(parts[f] for f in field_order(answer_order)) + " }"
    parts = {
        "reasoning": '"%s" (a brief explanation of how you inferred the instruction)' % REASONING_KEY,
        "instruction": '"%s" (the single instruction you inferred)' % key,
    }
    first, second = (parts[f] for f in field_order(answer_order))
    return f"a JSON object with two string fields, in this order: {first} and {second}"


@lru_cache(maxsize=8)
def answer_schema(answer_order: str = PAPER_ORDER) -> dict:
    """The JSON schema for backends that constrain decoding: the fields in `answer_order`, each length-bounded."""
    keys = {"reasoning": REASONING_KEY, "instruction": SCHEMA_KEY}
    order = [keys[f] for f in field_order(answer_order)]
    schema = {
        "type": "object",
        "properties": {k: {"type": "string"} for k in order},
        "required": order,
        "additionalProperties": False,
    }
    return bounded(schema, FIELD_MAX_CHARS)


# ---- prompts ----------------------------------------------------------------------------------------------------
_FENCE_WORDS = re.compile(r"(?i)\b(BEGIN|END)(\s+)(RESPONSE|CONTEXT)\b")
_KEY_IN_TEXT = re.compile(r"""(?i)(["'])\s*+(inferr*+ed[ _]++instruction|reasoning)\s*+\1(\s*+):""")


@lru_cache(maxsize=256)  # pure: a shared context is defused once per call, not once per response
def defuse(text: str) -> str:
    """Judged content made safe to fence: verdict tokens neutralised, our fence lines and answer keys defused.

    `----- END RESPONSE -----` inside a response would close the fence early; `"INFERRED INSTRUCTION":` inside it
    would read like an answer the judge could copy. Both keep their words but lose their grammar.
    """
    text = neutralise(text)
    text = _FENCE_WORDS.sub(lambda m: f"{m.group(1)}-{m.group(3)}", text)
    return _KEY_IN_TEXT.sub(lambda m: f"{m.group(2)} -", text)


# The paper prompts' order bullet ("- Begin with a brief explanation ...", "- Start with a short explanation ...")
_ORDER_BULLET = re.compile(r"(?m)^- (?:Begin|Start) with [^\n]*explanation[^\n]*$")


@lru_cache(maxsize=64)
def system_prompt(variant: int, *, with_context: bool, structured: bool, answer_order: str = PAPER_ORDER) -> str:
    """The paper's Prompt `variant`, verbatim with `reasoning_first`; with `instruction_first` its order bullet
    (explanation first) is replaced by `flip_order_instruction_first.txt`, so prompt and schema agree."""
    fmt = answer_format(SCHEMA_KEY if structured else PAPER_KEY, structured=structured, answer_order=answer_order)
    text = prompts.render(f"flip_system_{variant}.txt", answer_format=fmt).rstrip("\n")
    if answer_order == "instruction_first":
        bullet = "- " + prompts.load("flip_order_instruction_first.txt").strip()
        text = _ORDER_BULLET.sub(lambda _: bullet, text, count=1)
    if with_context:
        text += "\n" + prompts.load("flip_context_note.txt").rstrip("\n")
    return text


def user_prompt(
    response: transcript.Value, *, context: transcript.Value | None, structured: bool, answer_order: str = PAPER_ORDER
) -> str:
    """The response (a trajectory as its transcript) and, in context mode, the user prompt or conversation before it."""
    fmt = answer_format(SCHEMA_KEY if structured else PAPER_KEY, structured=structured, answer_order=answer_order)
    if context is None:
        return prompts.render("flip_user.txt", response=transcript.render(response, defuse), answer_format=fmt)
    return prompts.render(
        "flip_context_user.txt", context=transcript.render(context, defuse), response=transcript.render(response, defuse), answer_format=fmt
    )


# ---- echo detection ---------------------------------------------------------------------------------------------
ECHO_THRESHOLD = 0.9
ECHO_SLACK_CHARS = 60  # room for a preface such as "Sure! You asked me to ..."
ECHO_MIN_WORDS = 3
# Partial matching costs about len(instruction) ** 3 / 64 steps (every alignment of the instruction against a window
# of its own length): 0.1 s at 2,000 characters, hours at 50,000. A longer instruction is represented by its first
# ECHO_MAX_CHARS characters when the response's opening is checked and by its last ones when its end is.
ECHO_MAX_CHARS = 600


@dataclass(frozen=True)
class Echo:
    score: float  # 0..1: partial-match score times the share of the required instruction words it covers
    echoes: bool


def _plain(text: str) -> str:
    from rapidfuzz import utils  # lazy: imported at the first FLIP call, not at the server's start

    return " ".join(utils.default_process(text).split())


def _echo_score(inst: str, stretch: str) -> float:
    if not inst or not stretch:
        return 0.0
    from rapidfuzz import fuzz  # lazy: imported at the first FLIP call, not at the server's start

    needed = max(ECHO_MIN_WORDS, math.ceil(len(inst.split()) / 2))
    alignment = fuzz.partial_ratio_alignment(inst, stretch)
    if alignment is None:
        return 0.0
    matched_words = len(inst[alignment.src_start : alignment.src_end].split())
    return alignment.score / 100.0 * min(1.0, matched_words / needed)


def detect_echo(instruction: str, response: str) -> Echo:
    """Does the response repeat (nearly all of) the instruction at its opening or its end?

    rapidfuzz partial matching of the instruction against the response's opening and its closing stretch (the
    first and the last len(instruction) + 60 characters, both lowercased with punctuation removed): the opening is
    the paper's echo, the end is where an injected copy of the instruction goes (see testkit/injections.py). The
    score is the partial-match ratio of the whole instruction against the best stretch of its own length there (a
    copy of part of the instruction scores about the share copied: 10 of 13 words, 0.89), scaled down when the
    response is shorter than the instruction and the matched stretch of it holds fewer than max(3, half its words)
    words; an echo scores >= 0.9. Instructions of fewer than 3 words are never flagged (too
    short to tell an echo from an answer). An instruction longer than ECHO_MAX_CHARS (600) characters is compared by
    its first 600 characters with the response's opening and by its last 600 with the response's end (the time of
    partial matching grows with the cube of the instruction's length).
    """
    inst = _plain(instruction)
    words = len(inst.split())
    plain = _plain(response)
    if not inst or not plain:
        return Echo(0.0, False)
    head, tail = inst[:ECHO_MAX_CHARS], inst[-ECHO_MAX_CHARS:]
    opening = plain[: len(head) + ECHO_SLACK_CHARS]
    closing = plain[-(len(tail) + ECHO_SLACK_CHARS) :]
    score = max(_echo_score(head, opening), _echo_score(tail, closing) if closing != opening or tail != head else 0.0)
    score = round(score, 4)
    return Echo(score, score >= ECHO_THRESHOLD and words >= ECHO_MIN_WORDS)


def context_warnings(context: transcript.Value | None) -> list[str]:
    """With a context, `instruction` is the system prompt the model infers (§2.2): a system message in a context
    conversation is shown to the model, which can copy it back, so every response may score near 1 whatever it says.
    The contract lets a context hold one; the result says what it costs."""
    found = [i for i, m in enumerate(context) if getattr(m, "role", None) == "system"] if isinstance(context, list) else []
    if not found:
        return []
    which = ", ".join(map(str, found))
    return [
        f"'context' message{'s' if len(found) > 1 else ''} {which} {'are system messages' if len(found) > 1 else 'is a system message'}: "
        "the model sees it while inferring the system prompt, so a response can be rewarded for the prompt it was shown "
        "rather than for what it says; leave system messages out of 'context' (the system prompt is 'instruction')"
    ]


# ---- ranking ----------------------------------------------------------------------------------------------------
def rank(items: list[FlipItem]) -> tuple[list[int], int | None, list[int]]:
    """(ranking, best_index, tied_best) by reward; unparsed responses last (see ranking.rank_by_score). No response
    is named best while any stayed unparsed: its reward is unknown (its 0.0 is no judgment), so a parsed response,
    even one rewarded 0.0, may not be the best; `ranking` still orders the parsed ones."""
    ranking, best, tied = rank_by_score([(it.index, it.reward if it.parse_ok else None) for it in items])
    return ranking, best if all(it.parse_ok for it in items) else None, tied


# ---- the tool ---------------------------------------------------------------------------------------------------
async def infer_one(
    judge: CallContext,
    *,
    index: int,
    instruction: str,
    response: transcript.Value,
    context: transcript.Value | None,
    similarity: str,
    prompt_variant: int,
    answer_order: str = PAPER_ORDER,
) -> FlipItem:
    """Infer the instruction behind one response and score it."""
    structured = judge.structured
    size = text_work.chars(response, context)
    request = user(
        await text_work.run(user_prompt, response, context=context, structured=structured, answer_order=answer_order, size=size),
        images=transcript.message_images(context, transcript.owner("owner_context.txt"))
        + transcript.message_images(response, transcript.owner("owner_response.txt")),
        system=system_prompt(prompt_variant, with_context=context is not None, structured=structured, answer_order=answer_order),
        max_tokens=MAX_TOKENS,
        json_schema=answer_schema(answer_order) if structured else None,
        schema_name="flip_inferred_instruction",
        purpose=f"infer_instruction_reward:{index}",
    )
    reminder = prompts.render("flip_reask.txt", answer_format=answer_format(SCHEMA_KEY, structured=True, answer_order=answer_order))
    result = await ask(judge, request, parse_inferred, reminder)
    echo = await text_work.run(detect_echo, instruction, transcript.plain(response), size=text_work.chars(instruction, response))
    if result.value is not None:
        inferred = result.value.instruction
        score = await text_work.run(similarity_score, similarity, inferred, instruction, size=text_work.chars(inferred, instruction))
        reward = round(score, REWARD_DIGITS)
        return FlipItem(
            index=index,
            inferred_instruction=result.value.instruction,
            reward=reward,
            parse_ok=True,
            echoes_instruction=echo.echoes,
            echo_score=echo.score,
            reasoning=result.value.reasoning[:4000],
            reasked=result.reasked,
            continued=result.continued,
            truncated=result.truncated,
        )
    extracted = extract_best(result.text)
    return FlipItem(
        index=index,
        inferred_instruction=extracted,
        reward=0.0,
        parse_ok=False,
        echoes_instruction=echo.echoes,
        echo_score=echo.score,
        reasoning="",
        reasked=result.reasked,
        extraction_reward=round(similarity_score(similarity, extracted, instruction), REWARD_DIGITS) if extracted else 0.0,
        raw_answer=result.text[-MAX_EXTRACTION_CHARS:],
        continued=result.continued,
        truncated=result.truncated,
        unparsed_reason="truncated" if result.truncated else "no_instruction",
    )


async def infer_instruction_reward(
    judge: CallContext, args: InferInstructionRewardArgs | None = None, /, **fields: Any
) -> FlipResult:
    """FLIP reward for 1..16 responses: one inference per response, concurrently; ranked by reward. `args`, or
    InferInstructionRewardArgs's fields as keywords (checked the same way)."""
    args = InferInstructionRewardArgs.of(args, fields)
    responses = args.responses

    async def one(index: int) -> FlipItem:
        return await infer_one(
            judge,
            index=index,
            instruction=args.instruction,
            response=responses[index],
            context=args.context,
            similarity=args.similarity,
            prompt_variant=args.prompt_variant,
            answer_order=args.answer_order,
        )

    def done(index: int, item: FlipItem) -> str:
        return f"response {index}: instruction inferred ({'parsed' if item.parse_ok else 'unparsed'})"

    results = await run_each(judge, len(responses), one, done)
    ranking, best_index, tied_best = rank(results)
    return FlipResult(
        warnings=context_warnings(args.context),
        results=results,
        ranking=ranking,
        best_index=best_index,
        tied_best=tied_best,
        similarity=args.similarity,
        prompt_variant=args.prompt_variant,
        answer_order=args.answer_order,
        context_mode=args.context is not None,
        unparsed=[it.index for it in results if not it.parse_ok],
        echoes=[it.index for it in results if it.echoes_instruction],
        model=judge.model_id,
        usage=judge.usage(),
    )
