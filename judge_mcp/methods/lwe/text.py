"""The pure text side of Learning While Evaluating ("Becoming Experienced Judges: Selective Test-Time Learning for Evaluators"): building the
prompts of Figures 9-15, reading the judge's binary verdict (Appendix D, made stricter), reading the self-feedback
of Figure 12, cleaning a generated prompt, and packing a feedback batch for RefineMetaPrompt (Figure 13).

Everything here is a pure function, tested directly in tests/methods/test_lwe.py; methods/lwe/ does the calling.
"""

from __future__ import annotations

import re
from typing import Any

from judge_mcp import prompts
from judge_mcp.methods import transcript, user_inputs
from judge_mcp.methods.parsing import neutralise, parse_json_object

SIDES = ("A", "B")
CONFIDENT = "Absolutely confident the judgment is correct"
NOT_SURE = "Not sure"
CONDENSE_AT = 10_000  # Appendix A: summarise the meta-prompt once it passes this many characters
MAX_BATCH_CHARS = 48_000  # the refine prompt's batch section, all items together


# ---- schemas (used when the backend decodes under a JSON schema) -------------------------------------------------
# Free-text caps (characters), as every method's schema has them: each fits its request's budget (vanilla/judge 512+
# tokens, feedback 1024; ~4 characters a token), so a model that loops must still close the JSON.
EXPLANATION_MAX_CHARS = 1500
TIPS_MAX_CHARS = 2000
REASONING_MAX_CHARS = 1500


def verdict_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"explanation": {"type": "string", "maxLength": EXPLANATION_MAX_CHARS}, "verdict": {"type": "string", "enum": list(SIDES)}},
        "required": ["explanation", "verdict"],
        "additionalProperties": False,
    }


def feedback_schema() -> dict[str, Any]:
    """Figure 12's output format, field names as in the paper."""
    return {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
            "label": {"type": "string", "enum": [CONFIDENT, NOT_SURE]},
            "learned tips": {"type": "string", "maxLength": TIPS_MAX_CHARS},
            "reasoning": {"type": "string", "maxLength": REASONING_MAX_CHARS},
        },
        "required": ["score", "label", "learned tips", "reasoning"],
        "additionalProperties": False,
    }


# ---- prompts -------------------------------------------------------------------------------------------------------
def example_text(
    prompt: transcript.Value, first: transcript.Value, second: transcript.Value, *, criteria: str | None = None, reference: str | None = None
) -> str:
    """Figure 14: the case as shown to the model (judged content neutralised; a conversation or trajectory as its
    transcript), `first` as Assistant A; the caller's reference and criteria, when given, as fenced blocks between the
    question and the answers (user_inputs.py)."""
    shown = {"question": transcript.render(prompt, neutralise), "answer_a": transcript.render(first, neutralise),
             "answer_b": transcript.render(second, neutralise)}
    if not user_inputs.given(criteria, reference):
        return prompts.render("lwe_example.txt", **shown)
    return prompts.render(
        "lwe_example_inputs.txt",
        **shown,
        inputs=user_inputs.blocks(criteria, reference, neutralise, reference_block="lwe_reference.txt", criteria_block="lwe_criteria.txt"),
        notes=user_inputs.notes(criteria, reference, reference_note="lwe_reference_note.txt", criteria_note="lwe_criteria_note.txt"),
    )


def verdict_instruction(structured: bool) -> str:
    return prompts.load("lwe_verdict_json.txt" if structured else "lwe_verdict_text.txt").strip()


def vanilla_prompt(
    prompt: transcript.Value, first: transcript.Value, second: transcript.Value, structured: bool, *, criteria: str | None = None, reference: str | None = None
) -> str:
    """Figure 9 (the vanilla prompt), plus the JSON answer format when the backend decodes under a schema."""
    example = example_text(prompt, first, second, criteria=criteria, reference=reference)
    text = prompts.render("lwe_vanilla.txt", example=example).rstrip("\n")
    return text + ("\n\n" + verdict_instruction(True) if structured else "")


def build_eval_prompt_request(meta_prompt: str, example: str) -> str:
    """BuildEvalPrompt: the meta-prompt, followed by the example it should tailor the evaluation prompt to."""
    return prompts.render("lwe_build_eval_prompt.txt", meta_prompt=meta_prompt.strip(), example=example).rstrip("\n")


def judge_prompt(eval_prompt: str, example: str, structured: bool) -> str:
    """Judge: the case-specific evaluation prompt with the example appended (Figure 14) and the answer format."""
    text = prompts.render("lwe_judge.txt", eval_prompt=eval_prompt.strip(), example=example).rstrip("\n")
    return text + "\n\n" + verdict_instruction(structured)


def feedback_prompt(meta_prompt: str, judge_prompt_text: str, judgment: str) -> str:
    """Figure 12: self-feedback on one judgment, with the current meta-prompt for reference."""
    return prompts.render(
        "lwe_feedback.txt",
        meta_prompt=meta_prompt.strip(),
        evaluation_prompt=judge_prompt_text.strip(),
        judgment=judgment.strip() or "(the judge's answer was empty)",
    ).rstrip("\n")


def refine_prompt(meta_prompt: str, batch: str) -> str:
    """Figure 13: RefineMetaPrompt from one batch of examples and their feedback."""
    return prompts.render("lwe_refine.txt", meta_prompt=meta_prompt.strip(), batch=batch).rstrip("\n")


def condense_prompt(meta_prompt: str) -> str:
    """Figure 15: halve a meta-prompt that grew past CONDENSE_AT characters."""
    return prompts.render("lwe_condense.txt", meta_prompt=meta_prompt.strip()).rstrip("\n")


def clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping its head and tail and saying how much was left out."""
    if len(text) <= limit:
        return text
    keep = max(limit - 60, 20)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    return f"{text[:head]}\n[... {len(text) - head - tail:,} characters omitted ...]\n{text[len(text) - tail:]}"


def batch_text(items: list[dict[str, Any]], max_chars: int = MAX_BATCH_CHARS) -> str:
    """The batch of Figure 13: for each buffered item its evaluation prompt, example, judgment and feedback.

    Each item gets an equal share of `max_chars`; long fields are clipped (head and tail kept), so the refine
    prompt stays bounded whatever the batch size.
    """
    if not items:
        return ""
    share = max(max_chars // len(items), 800)
    parts = []
    for index, item in enumerate(items, start=1):
        example = example_text(
            clip(item["prompt"], share // 8), clip(item["response_a"], share // 8), clip(item["response_b"], share // 8)
        )
        parts.append(
            prompts.render(
                "lwe_label_item.txt" if item.get("source") == "label" else "lwe_batch_item.txt",  # a human label's correction
                index=str(index),
                eval_prompt=clip(item["eval_prompt"].strip(), share // 4) or "(empty)",
                example=example,
                judgment=clip(item["judgment"].strip(), share // 6) or "(empty)",
                feedback=clip(item["feedback"].strip(), share // 6) or "(empty)",
            ).rstrip("\n")
        )
    return "\n\n".join(parts)


# ---- answer grammars ---------------------------------------------------------------------------------------------
_DOUBLE = {side: re.compile(r"\[\[\s*" + side + r"\s*\]\]") for side in SIDES}
# `\[(?<!\[\[)`, not `(?<!\[)\[`: a pattern that opens with its `[` is searched for it, not tried at every position
_SINGLE = {side: re.compile(r"\[(?<!\[\[)\s*" + side + r"\s*\](?!\])") for side in SIDES}


def extract_judgment(text: str) -> str | None:
    """Appendix D's extract_judgment, stricter: both [[A]] and [[B]] present is unparsed, and the single-bracket
    fallback ([A] / [B]) counts only when exactly one of the two appears."""
    if not text:
        return None
    double = [side for side in SIDES if _DOUBLE[side].search(text)]
    if len(double) == 2:
        return None
    if double:
        return double[0]
    single = [side for side in SIDES if _SINGLE[side].search(text)]
    return single[0] if len(single) == 1 else None


def parse_verdict(text: str) -> str | None:
    """"A" / "B" from a JSON answer's `verdict` (a JSON answer with any other verdict is unparsed), else from the
    text grammar; None when unreadable. The JSON answer is the last top-level object carrying `verdict` (see
    parsing.answer_object), so an object quoted from a judged answer before the judge's own does not decide."""
    data = parse_json_object(text or "", ("explanation", "verdict"))
    if data is not None and "verdict" in data:
        value = data["verdict"]
        if not isinstance(value, str):
            return None
        value = re.sub(r"[\s\[\]\"']", "", value).upper()
        return value if value in SIDES else None
    return extract_judgment(text)


def to_caller(side: str | None, order: str) -> str | None:
    """A verdict about the order shown ("A" = first shown) in the caller's A/B."""
    if side is None or order == "AB":
        return side
    return "B" if side == "A" else "A"


_TIP_KEYS = ("learned tips", "learned_tips", "tips", "Learned tips")


def parse_feedback(text: str) -> str | None:
    """Figure 12's JSON feedback as readable lines (score, label, learned tips, reasoning); None when the answer is
    not such an object (it needs at least the learned tips or a score). The object read is the last top-level one
    carrying Figure 12's keys (parsing.answer_object), not one quoted from the judgment."""
    data = parse_json_object(text or "", tuple(feedback_schema()["required"]))
    if data is None:
        return None
    tips = next((data[k] for k in _TIP_KEYS if k in data), None)
    if tips is None and "score" not in data:
        return None
    lines = []
    if "score" in data:
        lines.append(f"Score: {data['score']}")
    if data.get("label"):
        lines.append(f"Label: {data['label']}")
    if isinstance(tips, list):
        tips = "\n" + "\n".join(f"- {str(t).strip()}" for t in tips)
    if tips:
        lines.append(f"Learned tips: {str(tips).strip()}")
    if data.get("reasoning"):
        lines.append(f"Reasoning: {str(data['reasoning']).strip()}")
    return "\n".join(lines)


# Marks and spaces stay on the marker's line ([ \t], not \s): a run of blank lines is not re-read from each line start.
_MARKER_LINE = re.compile(
    r"^[ \t]*+\[\[\[\s*+(optimized meta prompt|the (start|end) of (the )?current meta prompt)\s*+\]\]\][ \t]*+$", re.I | re.M
)
# A whole-answer fence's opening: its backticks, a language name and the blanks after it, read once (possessive); the
# blanks must hold a line break. (`^```[a-z]*\s*\n(.*?)\n?```$` re-read the text after each blank it gave back: quadratic.)
_FENCE_OPENING = re.compile(r"```[a-z]*+\s*+", re.I)


def _inside_whole_fence(text: str) -> str | None:
    """The text inside a fence around all of `text` (stripped text: ```lang, a line break, ..., ```), else None."""
    opening = _FENCE_OPENING.match(text)
    if opening is None or "\n" not in opening.group() or not text.endswith("```") or len(text) - 3 < opening.end():
        return None
    return text[opening.end():len(text) - 3]


def clean_generated_prompt(text: str) -> str | None:
    """A generated evaluation prompt or meta-prompt without the scaffolding a model tends to echo (the
    `[[[Optimized Meta Prompt]]]` header, start/end markers, a fence around everything); None when nothing is left."""
    if not text:
        return None
    cleaned = text.strip()
    fenced = _inside_whole_fence(cleaned)
    if fenced is not None:
        cleaned = fenced.strip()
    cleaned = _MARKER_LINE.sub("", cleaned).strip()
    return cleaned or None
