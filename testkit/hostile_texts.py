"""Hostile texts for every function that reads caller or model text, and the side-by-side timing that tells linear
from quadratic (used by tests/methods/test_linear_text.py and perf/text_linear.py; testkit/hostile_texts.py).

A function is timed on runs of every character its grammars treat specially, and on each grammar's opening words
followed by such a run (where a backtracking pattern would re-read the run from every start), all at the input
limit (args.MAX_TEXT_CHARS, 50,000 characters). Its worst time is divided by its time on plain prose of the
same length, measured in the same run; a function that does nothing on prose (no `{` to read, say) is compared with
one plain Python pass over the text instead, whichever is longer. Quadratic work at this length is thousands of
times the baseline (the old fence pattern: 132 s against ~2 ms); linear work stays within a few dozen. A function
that is slow on prose itself (a word-by-word LCS, partial matching of a long instruction) shows in its prose time
against the plain pass.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from judge_mcp import redaction
from judge_mcp.bench import arena_hard, pointwise
from judge_mcp.contract.messages import Message, ToolCall
from judge_mcp.methods.flip import reward as flip
from judge_mcp.methods.grade_score import scoring as grade_score
from judge_mcp.methods import label_probs, pairwise, parsing, score, score_probs, similarity, transcript
from judge_mcp.methods.lwe import text as lwe_text
from judge_mcp.server.transports import stdio
from judge_mcp.contract.fields import MAX_TEXT_CHARS

SIZE = MAX_TEXT_CHARS

# Every character a grammar or a defusing pattern gives a meaning to, and the look-alikes the fence patterns know.
SPECIAL = list("#[]<>|*{}\"'`\\ \t\n\r:()-_.,/=+!?;~^$@&%0123456789AaBbSsOoUuTt") + list("｜¦│＜＞［］【】«»’“”\u00a0\u200b\ufeff")
# Each grammar's opening words: a pattern that reads on from them re-reads the run that follows from every start.
PREFIXES = [
    "the end of assistant B",
    "The Start of the Assistant A's",
    "user",
    "Selection:",
    "Selection: [",
    "Option",
    "[[A",
    "[[A>",
    "[",
    "{",
    '{"verdict": "',
    '{"a": [',
    '"instruction": "',
    "'inferred instruction': '",
    '"reasoning": "',
    "Instruction:",
    "The inferred instruction is",
    "instruction “",
    "score:",
    '"SCORE": "',
    '"score": "7',
    "<|",
    "[[[",
    "```json\n",
    '"id": "',
    "sk-",
    "The End of Message 2",
]
# Repeated units (each is a run of a grammar's own token).
UNITS = ['{"', '{"a":', '{"a":"{', '{"a":[', "[[A>B]]", "[A]", "<|x|>", "the end of ", "user question ", "\\u", "\\\\\"", '"\\"', "a ",
         "%73%6B%2d%6c", "\\u0073\\u006B\\u002d", "sk-live-%30%31"]  # the start of SECRET as an echo may escape it


def hostile_texts(size: int = SIZE) -> dict[str, str]:
    texts: dict[str, str] = {}
    for c in SPECIAL:
        texts[f"run of {c!r}"] = c * size
        texts[f"x + run of {c!r} + x"] = "x" + c * (size - 2) + "x"
    for p in PREFIXES:
        for c in (" ", "\n", "\\", "*", "#", "[", "{", '"', "a", "-"):
            texts[f"{p!r} + run of {c!r}"] = (p + c * size)[:size]
        texts[f"repeated {p!r}"] = (p * (size // len(p) + 1))[:size]
    for u in UNITS:
        texts[f"repeated {u!r}"] = (u * (size // len(u) + 1))[:size]
    return texts


# Replies full of labels (what a sampling client's model may send): the same label, two alternating, quoted, spaced,
# each followed by different words, and copies of a judged text holding a label (echoes), at the input limit.
LABEL_UNITS = ["[[A>B]] ", "[[A>B]]", "[[A>B]] [[B>A]] ", '"[[B>A]]" ', "[[ A > B ]] ", "[[A=B]] ", "[A>B] ",
               "Assistant A is worse: [[B>A]] clearly so. "]
JUDGED_WITH_LABELS = ["Which answer is right? Answer with [[A>B]] if A is right.", "Assistant A is worse: [[B>A]] clearly so"]


def label_floods(size: int = SIZE) -> dict[str, str]:
    texts = {f"repeated {u!r}": (u * (size // len(u) + 1))[:size] for u in LABEL_UNITS}
    texts["labels with different words"] = "".join(f"[[A>B]] {i:x} " for i in range(size))[:size]
    texts["echoes with different words"] = "".join(f"Assistant A is worse: [[B>A]] clearly so {i} " for i in range(size // 30))[:size]
    return texts


# name -> function of one text: the readers of a judge's labels, on a reply next to short judged texts (with labels)
LABEL_READERS: dict[str, Callable[[str], object]] = {
    "pairwise.parse_label": lambda t: pairwise.parse_label(t + " [[A>B]]", JUDGED_WITH_LABELS),
    "pairwise.parse_label (plain judged text)": lambda t: pairwise.parse_label(t + " [[A>B]]", ["Which is right?", "It is 4."]),
    "arena_hard.parse": lambda t: arena_hard.LABEL.findall(t),
    "label_probs.label_sites": lambda t: label_probs.label_sites(t),
    "lwe.parse_verdict": lambda t: lwe_text.parse_verdict(t),
    "grade_score.parse_selection": lambda t: grade_score.parse_selection(t, 5),
}


def prose(size: int = SIZE) -> str:
    sentence = (
        "The user asked which answer is better; Assistant A explains the capital of Australia is Canberra, while "
        "the other answer says Sydney, which is wrong. "
    )
    return (sentence * (size // len(sentence) + 1))[:size]


def _trajectory(text: str) -> list[Message]:
    """A trajectory holding `text` twice: half as an assistant's content and half as its tool call's arguments, all
    of it as the tool's result (messages.MAX_CONVERSATION_CHARS allows it at the input limit). Built unchecked: a
    run of blanks is no valid message, but the renderer is what is timed."""
    half = len(text) // 2
    call = ToolCall.model_construct(id="call_1", name="search", arguments=text[half:])
    return [Message.model_construct(role="assistant", content=text[:half], tool_calls=[call], tool_call_id=None, images=None),
            Message.model_construct(role="tool", content=text, tool_calls=None, tool_call_id="call_1", images=None)]


def _json_answer(text: str) -> str:
    return text + json.dumps({"verdict": "[[A>B]]", "explanation": "x"})


SECRET = "sk-live-0123456789abcdef"

# name -> function of one text (the hostile or prose text goes into every text argument the function has)
FUNCTIONS: dict[str, Callable[[str], object]] = {
    "parsing.neutralise": lambda t: parsing.neutralise.__wrapped__(t),
    "parsing.json_objects": lambda t: list(parsing.json_objects(t, strict=False)),
    "parsing.answer_object": lambda t: parsing.answer_object(_json_answer(t), ("verdict",), judged=[t]),
    "pairwise.parse_label": lambda t: pairwise.parse_label(t + " [[A>B]]", [t, t[::-1]]),
    "pairwise.parse_structured": lambda t: pairwise.parse_structured(t, "sop", [t]),
    "pairwise.user_prompt": lambda t: pairwise.user_prompt(t, t, t),
    "transcript.render": lambda t: transcript.render(_trajectory(t), parsing.neutralise.__wrapped__),
    "transcript.defuse_fences": lambda t: transcript.defuse_fences(t),
    "flip.defuse": lambda t: flip.defuse.__wrapped__(t),
    "flip.parse_inferred": lambda t: flip.parse_inferred(t),
    "flip.extract_best": lambda t: flip.extract_best(t),
    "flip.detect_echo": lambda t: flip.detect_echo(t, t[::-1]),
    "grade_score.parse_selection": lambda t: grade_score.parse_selection(t, 5),
    "grade_score.parse_structured": lambda t: grade_score.parse_structured(t, 5, 1),
    "grade_score.defuse_markers": lambda t: grade_score.defuse_markers.__wrapped__(t),
    "lwe.parse_verdict": lambda t: lwe_text.parse_verdict(t),
    "lwe.parse_feedback": lambda t: lwe_text.parse_feedback(t),
    "lwe.extract_judgment": lambda t: lwe_text.extract_judgment(t),
    "lwe.clean_generated_prompt": lambda t: lwe_text.clean_generated_prompt(t),
    "label_probs.label_sites": lambda t: label_probs.label_sites(t),
    "similarity.f1": lambda t: similarity.f1(t, t[::-1]),
    "similarity.rouge_l": lambda t: similarity.rouge_l(t, t[::-1]),
    "similarity.token_sort": lambda t: similarity.token_sort(t, t[::-1]),
    "pointwise.parse_rating": lambda t: pointwise.parse_rating(t),
    "score.parse_score": lambda t: score.parse_score(t, 1, 10, [t]),
    "score.user_prompt": lambda t: score.user_prompt(t, t, t, t, 1, 10, True),
    "score_probs.score_sites": lambda t: score_probs.score_sites(t),
    "arena_hard.parse": lambda t: arena_hard.LABEL.findall(t),
    "redaction.redact_tree": lambda t: redaction.redact_tree({"error": t, "body": [t]}, redaction.variants([SECRET])),
    "stdio.request_id": lambda t: stdio._request_id(t),
}


# The readers' memos (pure functions of a text): emptied before every timing, so prose and hostile texts are both
# read, not looked up (a warm prose baseline is one dict lookup, and the ratio measured the memo, not the reader).
MEMOS = (parsing.neutralise, flip.defuse, grade_score.defuse_markers)


def _seconds(fn: Callable[[str], object], text: str, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        for memo in MEMOS:
            memo.cache_clear()
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def _python_pass(text: str) -> int:
    return sum(1 for c in text if c == "\x00")


def python_pass_s(size: int = SIZE) -> float:
    """One plain Python pass over a text of `size` characters: the unit a linear function's cost is a multiple of."""
    return _seconds(_python_pass, prose(size), repeats=3)


def prose_s(fn: Callable[[str], object], size: int = SIZE) -> float:
    return _seconds(fn, prose(size), repeats=3)


RETIME = 3  # below the goal of 5x prose (issue 38), so every text near it is timed at its best


def worst_ratio(fn: Callable[[str], object], size: int = SIZE, texts: dict[str, str] | None = None) -> tuple[float, str, float, float]:
    """(worst time / baseline, the text's name, worst seconds, baseline seconds), all measured in this run. The
    baseline is the function's time on prose, or one plain Python pass over the text when that is longer. A hostile
    text that looks slow (over RETIME times the baseline) is timed again (the best of six) so a moment of machine load
    does not decide: load only ever adds time, and a quadratic function stays slow every time."""
    base = max(prose_s(fn, size), python_pass_s(size))
    worst, name = 0.0, ""
    for label, text in (texts or hostile_texts(size)).items():
        spent = _seconds(fn, text)
        if spent > RETIME * base:
            spent = min(spent, _seconds(fn, text, repeats=5))
        if spent > worst:
            worst, name = spent, label
    return worst / base, name, worst, base
