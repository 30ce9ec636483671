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
from judge_mcp.backends import reasoning
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
         "%73%6B%2d%6c", "\\u0073\\u006B\\u002d", "sk-live-%30%31",  # the start of SECRET as an echo may escape it
         "SK-LIVE-%53%4B", "&#115;&#x6B;&#45;", "&#0000", "&#x0000",  # upper-cased, as HTML character references
         "<think>", "</think>", "<think></think>"]  # reasoning blocks: nested, unclosed, closed again and again


Shape = tuple[str, str, str]  # (head, unit, tail): the head, the unit repeated, the tail; cut to any size by shaped()


def hostile_shapes() -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    for c in SPECIAL:
        shapes[f"run of {c!r}"] = ("", c, "")
        shapes[f"x + run of {c!r} + x"] = ("x", c, "x")
    for p in PREFIXES:
        for c in (" ", "\n", "\\", "*", "#", "[", "{", '"', "a", "-"):
            shapes[f"{p!r} + run of {c!r}"] = (p, c, "")
        for c in (" ", "\n"):  # a reader that strips its text first never sees a trailing blank run: end it with a word
            shapes[f"{p!r} + run of {c!r} + x"] = (p, c, "x")
        shapes[f"repeated {p!r}"] = ("", p, "")
    for u in UNITS:
        shapes[f"repeated {u!r}"] = ("", u, "")
    return shapes


def shaped(shape: Shape, size: int) -> str:
    """The text of `shape` at `size` characters."""
    head, unit, tail = shape
    body = size - len(head) - len(tail)
    return head + (unit * (body // len(unit) + 1))[:body] + tail


def hostile_texts(size: int = SIZE) -> dict[str, str]:
    return {name: shaped(shape, size) for name, shape in hostile_shapes().items()}


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
    "reasoning.split_think": lambda t: (reasoning.split_think(t), reasoning.split_think("<think>" + t)),
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
CANDIDATES = 3  # the texts that looked worst in the scan, each then timed in turn with the baselines
ROUNDS = 5  # turns of a side-by-side timing (the best of each is kept)


def side_by_side(runs: list[tuple[Callable[[str], object], str]], rounds: int = ROUNDS) -> list[float]:
    """The best time of each (function, text), timed in turn `rounds` times: a moment of machine load falls on one
    turn of each, not on one of the things compared (load only ever adds time)."""
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for i, (fn, text) in enumerate(runs):
            best[i] = min(best[i], _seconds(fn, text))
    return best


def confirmed_ratio(fn: Callable[[str], object], text: str, size: int = SIZE, rounds: int = ROUNDS) -> tuple[float, float, float]:
    """(hostile time / baseline, hostile seconds, baseline seconds), the hostile text, prose and the plain pass timed
    side by side; the baseline is the function's prose time or the plain pass, whichever is longer."""
    plain = prose(size)
    hostile, on_prose, unit = side_by_side([(fn, text), (fn, plain), (_python_pass, plain)], rounds)
    base = max(on_prose, unit)
    return hostile / base, hostile, base


def worst_ratio(fn: Callable[[str], object], size: int = SIZE, texts: dict[str, str] | None = None) -> tuple[float, str, float, float]:
    """(worst time / baseline, the text's name, worst seconds, baseline seconds). A scan times every text once (a
    text over RETIME times the baseline again, the best of six); the CANDIDATES slowest are then each timed side by
    side with the baselines (confirmed_ratio), and the worst of those is the answer. A quadratic function stays slow
    every time; a linear one is not made to look slow by a moment of load."""
    texts = texts or hostile_texts(size)
    base = max(prose_s(fn, size), python_pass_s(size))
    scanned: list[tuple[float, str]] = []
    for label, text in texts.items():
        spent = _seconds(fn, text)
        if spent > RETIME * base:
            spent = min(spent, _seconds(fn, text, repeats=5))
        scanned.append((spent, label))
    worst: tuple[float, str, float, float] = (0.0, "", 0.0, base)
    for _, label in sorted(scanned, reverse=True)[:CANDIDATES]:
        ratio, spent, base = confirmed_ratio(fn, texts[label], size)
        if ratio > worst[0]:
            worst = (ratio, label, spent, base)
    return worst


def growth(fn: Callable[[str], object], make: Callable[[int], str], size: int = SIZE, factor: int = 4, rounds: int = ROUNDS) -> float:
    """Time on make(size * factor) / time on make(size), timed side by side: `factor` for linear work, factor squared
    for quadratic."""
    small, large = side_by_side([(fn, make(size)), (fn, make(size * factor))], rounds)
    return large / small
