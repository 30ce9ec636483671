"""Multiple-choice judging scored by the Grade Score ("Grade Score: Quantifying LLM Performance in Option Selection").

One trial per cyclic rotation of the options (§3.2–3.3), so every option sits at every shown position exactly once;
the paper's printed generator yields only once (its `yield` is outside the loop), so `rotations` implements what
its text describes. The trials run concurrently. From the parsed trials:

- LLM Score (§4.2): entropy of the chosen *positions* divided by log2(number of positions). High = no order bias.
- Choice Score (§4.3): frequency of the most chosen *option* divided by the number of parsed trials. High = stable.
- Grade Score (§4.4): harmonic mean of the two; 0 when either is 0.

Unparsed trials (after one re-ask) are excluded from the counts and reported. The normaliser stays log2 of the
number of positions even then, as in the paper, so a judge with unparsed trials cannot reach an LLM Score of 1.

The text grammar is the paper's `Selection: Option N` (markdown emphasis around the words is tolerated, as the
paper's prompts 3 and 4 are themselves written in markdown). Every occurrence in an answer must name the same
option: an answer whose selections conflict, or name a number outside 1..n, is unparsed rather than guessed at.
With a backend that decodes under a JSON schema, the answer is a JSON object whose `selection` is one of the
strings "Option 1".."Option n" (the paper's fields, in the paper's order, around it).

With `unrelated_option`, one option answering a different instruction is added (§4.6, see unrelated_pool.py); it
gets index n (after the caller's indices, which keep their meaning) and a seeded place in the rotation cycle.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from functools import lru_cache, partial

import anyio.to_thread

from judge_mcp.contract import images as imagelib
from judge_mcp import prompts
from judge_mcp.contract.fields import GRADE_VARIANTS
from judge_mcp.contract.args import GradeScoreOptionsArgs
from judge_mcp.backends.base import user
from judge_mcp.methods import text_work, transcript
from judge_mcp.methods.ask import ask
from judge_mcp.methods import user_inputs
from judge_mcp.calls.fanout import run_each
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.parsing import neutralise, parse_json_object
from judge_mcp.methods.grade_score.unrelated_pool import call_seed, choose_unrelated, insertion_position
from judge_mcp.storage.option_pool import OptionPool
from judge_mcp.contract.results import GradeScoreResult, GradeTrial

VARIANTS = GRADE_VARIANTS
# Free-text fields the paper's prompt asks for before the selection (the explanation always comes after it).
REASONING_FIELDS = {1: (), 2: ("evaluation",), 3: (), 4: ("grading",)}
MAX_TOKENS = {1: 512, 2: 1024, 3: 512, 4: 1024}
EXPLANATION_CHARS = 4000
TOOL = "grade_score_options"


# ---- pure scoring ------------------------------------------------------------------------------------------------
def rotations(n: int) -> list[list[int]]:
    """The n cyclic rotations of [0..n-1], starting with the identity; each moves the last element to the front of
    the previous one (as the paper's generator intends), so every element takes every position exactly once."""
    if n < 1:
        raise ValueError(f"rotations needs n >= 1, got {n}")
    return [[(p - k) % n for p in range(n)] for k in range(n)]


def _clean(value: float) -> float:
    """Clamp to [0, 1] and drop float noise (so a uniform spread scores exactly 1.0)."""
    return min(1.0, max(0.0, round(value, 10)))


def llm_score(position_counts: Sequence[int]) -> float | None:
    """Normalised entropy of the chosen positions: H(X) / log2 n with n = len(position_counts); None if no picks."""
    n = len(position_counts)
    total = sum(position_counts)
    if total == 0 or n < 2:
        return None
    entropy = -sum((c / total) * math.log2(c / total) for c in position_counts if c > 0)
    return _clean(entropy / math.log2(n))


def choice_score(option_counts: Sequence[int]) -> float | None:
    """Mode frequency over the number of picks; None if no picks."""
    total = sum(option_counts)
    if total == 0:
        return None
    return _clean(max(option_counts) / total)


def grade_score(llm: float | None, choice: float | None) -> float | None:
    """Harmonic mean of the two scores; 0 when either is 0; None when either is missing."""
    if llm is None or choice is None:
        return None
    if llm <= 0 or choice <= 0:
        return 0.0
    return _clean(2 * llm * choice / (llm + choice))


def mode(option_counts: Sequence[int]) -> tuple[int | None, list[int]]:
    """(lowest index with the top count, all indices with the top count when more than one has it)."""
    if not option_counts or max(option_counts) == 0:
        return None, []
    top = max(option_counts)
    tied = [i for i, c in enumerate(option_counts) if c == top]
    return tied[0], (tied if len(tied) > 1 else [])


# ---- the answer grammars ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Selection:
    number: int  # 1-based, as shown to the model
    explanation: str


# Possessive quantifiers, each followed by a character it cannot take: no match attempt backtracks (linear time).
# (`S(?<=\bS)`, not `\bS`: a pattern that opens with a letter is searched for that letter first, ~3x faster on text without it)
_TEXT_SELECTION = re.compile(r"S(?<=\bS)election\b[*_ \t]*+:[*_\s]*+(?:\[[ \t]*+)?+Option[ \t]*+(\d{1,4})(?!\d)", re.I)
_JSON_SELECTION = re.compile(r'"selection"\s*+:\s*+"\s*+Option\s*+(\d{1,4})\s*+"', re.I)
_STRUCT_VALUE = re.compile(r"^\s*+(?:Option\s*+)?+(\d{1,4})\s*+$", re.I)


def _single(numbers: list[int], n: int) -> int | None:
    """The one number all occurrences agree on, if it lies in 1..n."""
    distinct = set(numbers)
    if len(distinct) != 1:
        return None
    number = distinct.pop()
    return number if 1 <= number <= n else None


def parse_selection(text: str, n: int) -> Selection | None:
    """The paper's `Selection: Option N` grammar (1 <= N <= n). None when absent, conflicting or out of range."""
    if not text:
        return None
    number = _single([int(m.group(1)) for m in _TEXT_SELECTION.finditer(text)], n)
    if number is None:
        return None
    return Selection(number, text.strip()[:EXPLANATION_CHARS])


def _structured_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _STRUCT_VALUE.match(value)
        return int(m.group(1)) if m else None
    return None


def parse_structured(text: str, n: int, variant: int) -> Selection | None:
    """The `selection` field of the JSON answer ("Option k", or k) with 1 <= k <= n.

    A JSON object with a `selection` key is judged on that key alone. An answer cut off after a complete
    `"selection": "Option k"` (the explanation truncated by max_tokens) still counts; otherwise the text
    grammar is tried, for servers that ignored the schema.
    """
    data = parse_json_object(text, ("selection",))  # the last object carrying `selection`, not the first anywhere
    if data is not None and "selection" in data:
        number = _structured_number(data["selection"])
        if number is None or not 1 <= number <= n:
            return None
        parts = [
            f"{name.capitalize()}: {str(data[name]).strip()}"
            for name in (*REASONING_FIELDS[variant], "explanation")
            if str(data.get(name) or "").strip()
        ]
        return Selection(number, "\n\n".join(parts)[:EXPLANATION_CHARS])
    if "lect" not in (text or "").lower():  # both grammars below need "Selection" (only ASCII letters fold to l, e, c, t)
        return None
    if data is None:
        number = _single([int(m.group(1)) for m in _JSON_SELECTION.finditer(text or "")], n)
        if number is not None:
            return Selection(number, (text or "").strip()[:EXPLANATION_CHARS])
    return parse_selection(text, n)


# ---- prompts -----------------------------------------------------------------------------------------------------
_MARKER = re.compile(r"\[\s*+(?:(\\)\s*+)?+(Option\s*+\d++|User\s++Instruction)\s*+\]", re.I)


@lru_cache(maxsize=256)  # pure: every option is shown in every rotation, defused once per call
def defuse_markers(text: str) -> str:
    """Turn `[Option 2]`, `[\\Option 2]` and `[User Instruction]` inside judged text into `(Option 2)` etc., so
    content cannot fake the boundaries of the options; then neutralise verdict tokens (`Selection: Option 2`)."""
    text = _MARKER.sub(lambda m: "(" + ("/" if m.group(1) else "") + m.group(2) + ")", text)
    return neutralise(text)


def choices(n: int) -> list[str]:
    return [f"Option {k}" for k in range(1, n + 1)]


@lru_cache(maxsize=128)  # static per (variant, n): so are system_prompt and reminder
def selection_schema(variant: int, n: int) -> dict:
    props: dict[str, dict] = {name: {"type": "string"} for name in REASONING_FIELDS[variant]}
    props["selection"] = {"type": "string", "enum": choices(n)}
    props["explanation"] = {"type": "string"}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _quoted_choices(n: int) -> str:
    return ", ".join(f'"{c}"' for c in choices(n))


@lru_cache(maxsize=128)
def system_prompt(variant: int, structured: bool, n: int) -> str:
    text = prompts.load(f"grade_score_judge_{variant}.txt").rstrip("\n")
    if structured:
        text += "\n" + prompts.render(f"grade_score_json_{variant}.txt", choices=_quoted_choices(n)).rstrip("\n")
    return text


def user_prompt(instruction: transcript.Value, shown: Sequence[transcript.Value], *, criteria: str | None = None, reference: str | None = None) -> str:
    """§4.5: the instruction, then the options numbered from 1 in the order shown; the caller's reference and
    criteria, when given, as fenced blocks between them (user_inputs.py); a conversation or trajectory as its
    transcript (transcript.py)."""
    blocks = [
        prompts.render("grade_score_option.txt", number=str(k), content=transcript.render(text, defuse_markers).strip("\n")).rstrip("\n")
        for k, text in enumerate(shown, start=1)
    ]
    shown_instruction = transcript.render(instruction, defuse_markers).strip("\n")
    if not user_inputs.given(criteria, reference):
        return prompts.render(
            "grade_score_user.txt", instruction=shown_instruction, options="\n\n".join(blocks)
        ).rstrip("\n")
    return prompts.render(
        "grade_score_user_inputs.txt",
        instruction=shown_instruction,
        inputs=user_inputs.blocks(criteria, reference, defuse_markers),
        options="\n\n".join(blocks),
        notes=user_inputs.notes(
            criteria, reference, reference_note="grade_score_reference_note.txt", criteria_note="grade_score_criteria_note.txt"
        ),
    ).rstrip("\n")


@lru_cache(maxsize=128)
def reminder(structured: bool, n: int) -> str:
    if structured:
        return prompts.render("grade_score_reask_json.txt", choices=_quoted_choices(n)).rstrip("\n")
    return prompts.render("grade_score_reask.txt", n=str(n)).rstrip("\n")


# ---- aggregation -------------------------------------------------------------------------------------------------
@dataclass
class Summary:
    position_counts: list[int]
    option_counts: list[int]
    parsed: int
    unparsed: int
    llm_score: float | None
    choice_score: float | None
    grade_score: float | None
    mode_index: int | None
    tied_indices: list[int]


def score_fields(s: Summary) -> dict[str, Any]:
    """The result fields that come from a Summary (one judge's trials, or a panel's pooled)."""
    return dict(
        position_counts=s.position_counts,
        option_counts=s.option_counts,
        parsed_trials=s.parsed,
        unparsed_trials=s.unparsed,
        llm_score=s.llm_score,
        choice_score=s.choice_score,
        grade_score=s.grade_score,
    )


def summarise(trials: Sequence[GradeTrial], n: int) -> Summary:
    """Counts and scores over the parsed trials; n = number of options shown (positions)."""
    positions = [0] * n
    options = [0] * n
    parsed = 0
    for t in trials:
        if t.parse_ok and t.selected_position is not None and t.selected_index is not None:
            positions[t.selected_position] += 1
            options[t.selected_index] += 1
            parsed += 1
    llm, choice = llm_score(positions), choice_score(options)
    top, tied = mode(options)
    return Summary(positions, options, parsed, len(trials) - parsed, llm, choice, grade_score(llm, choice), top, tied)


# ---- the method --------------------------------------------------------------------------------------------------
def _as_texts(instruction: transcript.Value, options: Sequence[transcript.Value]) -> tuple[str, list[str]]:
    return transcript.text(instruction), [transcript.text(o) for o in options]


async def judge_rotation(
    judge: CallContext, *, rotation: int, order: list[int], texts: Sequence[transcript.Value], instruction: transcript.Value, variant: int, structured: bool,
    criteria: str | None = None, reference: str | None = None, images: tuple = (), answer_images: Sequence[tuple] = (),
) -> GradeTrial:
    n = len(order)
    shown = [answer_images[i] if i < len(answer_images) else () for i in order]
    shown_texts = [texts[i] for i in order]
    prompt = await text_work.run(
        user_prompt, instruction, shown_texts, criteria=criteria, reference=reference,
        size=text_work.chars(instruction, *shown_texts, criteria, reference),
    )
    request = user(
        prompt,
        images=transcript.option_images(instruction, images, shown_texts, shown),
        system=system_prompt(variant, structured, n),
        max_tokens=MAX_TOKENS[variant],
        json_schema=selection_schema(variant, n) if structured else None,
        schema_name="grade_selection",
        purpose=f"{TOOL}:rotation{rotation}",
    )
    if structured:
        parse = lambda t: parse_structured(t, n, variant)  # noqa: E731
    else:
        parse = lambda t: parse_selection(t, n)  # noqa: E731
    result = await ask(judge, request, parse, reminder(structured, n))
    if result.value is None:
        return GradeTrial(
            order=order, selected_position=None, selected_index=None, parse_ok=False,
            explanation=result.text.strip()[-2000:], reasked=result.reasked,
        )
    position = result.value.number - 1
    return GradeTrial(
        order=order, selected_position=position, selected_index=order[position], parse_ok=True,
        explanation=result.value.explanation, reasked=result.reasked,
    )


async def grade_score_options(judge: CallContext, args: GradeScoreOptionsArgs | None = None, /, **fields: Any) -> GradeScoreResult:
    """`args`, or GradeScoreOptionsArgs's fields as keywords (checked the same way)."""
    args = GradeScoreOptionsArgs.of(args, fields)
    instruction, options, prompt_variant = args.instruction, args.options, args.prompt_variant
    n = len(options)
    texts: list[transcript.Value] = list(options)
    base = list(range(n))
    unrelated = None
    if args.unrelated_option:  # drawn and placed by the call's texts (a conversation or trajectory: its transcript)
        seed_instruction, seed_options = await text_work.run(_as_texts, instruction, options, size=text_work.chars(instruction, *options))
        unrelated = await anyio.to_thread.run_sync(
            partial(choose_unrelated, judge.store, seed_instruction, seed_options, shared=judge.shared_option_pool)
        )
        texts.append(unrelated.text)
        base.insert(insertion_position(call_seed(seed_instruction, seed_options), n), n)
    m = len(texts)
    orders = [[base[i] for i in rotation] for rotation in rotations(m)]
    structured = judge.structured
    prompt_images = args.image_list("images")
    answer_images = [tuple(imagelib.decode(uri) for uri in uris or ()) for uris in args.option_images or ()]  # the unrelated option has none

    trials = await run_each(
        judge,
        m,
        lambda k: judge_rotation(
            judge, rotation=k, order=orders[k], texts=texts, instruction=instruction, variant=prompt_variant, structured=structured,
            criteria=args.criteria, reference=args.reference, images=prompt_images, answer_images=answer_images,
        ),
        lambda k, _: f"rotation {k + 1} of {m} judged",
    )

    pooled = [o for o in options if isinstance(o, str)]
    if judge.store is not None and isinstance(instruction, str) and len(pooled) == n:  # the option pool keeps texts only
        await OptionPool(judge.store).aio.add(instruction, pooled)

    s = summarise(trials, m)
    unrelated_index = n if unrelated is not None else None
    unrelated_picked = s.option_counts[n] if unrelated is not None else 0
    winner = s.mode_index
    warnings: list[str] = []
    if s.unparsed:
        warnings.append(f"{s.unparsed} of {m} trials stayed unparsed after a re-ask and are left out of the counts")
    if s.parsed == 0:
        warnings.append("no trial parsed: there is no winner and no score")
    if unrelated_picked:
        warnings.append(
            f"the judge picked the unrelated option (index {n}) in {unrelated_picked} of {s.parsed} parsed trials, "
            "so its choices here are unreliable"
        )
    if winner is not None and winner == unrelated_index:
        winner = None
        warnings.append("the most chosen option is the unrelated one, so winner_index is null")
    if s.tied_indices:  # no option won: the lowest index would hand a purely position-biased judge option 0
        winner = None
        warnings.append(f"the mode is tied between options {s.tied_indices}; winner_index is null (no option won)")
    return GradeScoreResult(
        winner_index=winner,
        tied_indices=s.tied_indices,
        trials=trials,
        **score_fields(s),
        unrelated_index=unrelated_index,
        unrelated_picked=unrelated_picked,
        unrelated_option=unrelated.text if unrelated is not None else None,
        unrelated_source=unrelated.source if unrelated is not None else None,
        prompt_variant=prompt_variant,
        warnings=warnings,
        model=judge.model_id,
        usage=judge.usage(),
    )
