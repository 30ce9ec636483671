"""Every function that reads caller or model text runs in linear time, near its cost on prose (issue 38): on runs of
each special character (and on each grammar's opening words followed by such a run) at the input limit, it takes
no more than GOAL_RATIO times its time on plain prose of the same length, and on its worst such text four times as
long it takes no more than MAX_GROWTH times as long. Every figure is a ratio of times measured side by side in this
run, the best of several turns (testkit/hostile_texts.py says how), so a slow or busy machine does not decide it; a
quadratic reader is hundreds of times its baseline and grows ~16-fold (test_the_bounds_catch_a_quadratic_reader).
perf/text_linear.py prints the same figures."""

from __future__ import annotations

import functools

import pytest

from testkit.hostile_texts import (FUNCTIONS, SIZE, confirmed_ratio, growth, hostile_shapes, hostile_texts, prose_s, python_pass_s, shaped,
                                   worst_ratio)

GOAL_RATIO = 5.0  # issue 38's goal; the readers measure ~1-4.5 on the 2-core machine, the old quadratic ones 600 to 60,000
GROWTH_FACTOR = 4  # 50,000 -> 200,000 characters (trajectories make texts longer than one message)
MAX_GROWTH = 7.0  # linear: 4; quadratic: 16. Measured 3.0-8.6 at load 4-6: a text past ~100k characters leaves the
# cache (defuse_fences on repeated 'The End of Message 2': 50k -> 100k 3.8x, 100k -> 400k 4.0x, before and after issue 38)
GROWTH_EXEMPT: set[str] = set()  # token_sort was (rapidfuzz's Indel on two long texts: ~60 ms at 50k, ~920 ms at 200k),
# until it compared each sorted text's first similarity.TOKEN_SORT_MAX_CHARS characters past that product
ATTEMPTS = 5  # a figure over its bound is measured again, up to this many times in all: load only ever adds time
MAX_PROSE_PASSES = 400  # prose: up to ~120 plain passes (rapidfuzz's token_sort under load); the old rouge_l ~7,000
TEXTS = hostile_texts()
SHAPES = hostile_shapes()


@functools.cache
def _worst(name: str) -> tuple[float, str, float, float]:
    """(ratio, text, hostile s, baseline s) of the function's worst hostile text, measured again while over the goal."""
    ratio, text, worst_s, base_s = worst_ratio(FUNCTIONS[name], texts=TEXTS)
    for _ in range(ATTEMPTS - 1):
        if ratio <= GOAL_RATIO:
            break
        again = confirmed_ratio(FUNCTIONS[name], TEXTS[text])
        if again[0] < ratio:
            ratio, worst_s, base_s = again
    return ratio, text, worst_s, base_s


def _growth(fn, shape) -> float:
    times = growth(fn, functools.partial(shaped, shape), SIZE, GROWTH_FACTOR)
    for _ in range(ATTEMPTS - 1):
        if times <= MAX_GROWTH:
            break
        times = min(times, growth(fn, functools.partial(shaped, shape), SIZE, GROWTH_FACTOR))
    return times


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_no_hostile_text_costs_more_than_five_times_prose(name: str) -> None:
    ratio, text, worst_s, base_s = _worst(name)
    assert ratio <= GOAL_RATIO, f"{name}: {text} took {worst_s * 1000:.1f} ms, {ratio:.1f}x its prose baseline ({base_s * 1000:.2f} ms)"


@pytest.mark.parametrize("name", sorted(set(FUNCTIONS) - GROWTH_EXEMPT))
def test_the_worst_hostile_text_four_times_as_long_takes_about_four_times_as_long(name: str) -> None:
    text = _worst(name)[1]
    times = _growth(FUNCTIONS[name], SHAPES[text])
    assert times <= MAX_GROWTH, f"{name}: {text} at {SIZE * GROWTH_FACTOR:,} characters took {times:.1f}x its time at {SIZE:,}"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_prose_at_the_input_limit_costs_a_bounded_number_of_plain_passes(name: str) -> None:
    passes = prose_s(FUNCTIONS[name]) / python_pass_s()
    assert passes < MAX_PROSE_PASSES, f"{name}: prose took {passes:.0f} plain Python passes over the same text"


def _quadratic_reader(text: str) -> list[int]:
    """A reader that re-reads the rest of the text from every `{` (as the old JSON readers did): quadratic on a run."""
    return [text.count('"', i) for i, c in enumerate(text) if c == "{"]


def test_the_bounds_catch_a_quadratic_reader() -> None:
    size = 8_000  # quadratic work is cheap enough here to time, and already over both bounds (~65x; growth ~10)
    texts = {name: text for name, text in hostile_texts(size).items() if "run of '{'" in name}
    ratio, text, _, _ = worst_ratio(_quadratic_reader, size, texts)
    assert ratio > 4 * GOAL_RATIO
    assert growth(_quadratic_reader, functools.partial(shaped, SHAPES[text]), size, GROWTH_FACTOR) > MAX_GROWTH


# ---- linear up to 200,000 characters: doubling a hostile text at most about doubles the time (issue 38) ----------------
# (a reader can be a small multiple of prose at 50,000 characters and still grow faster than the text: rouge_l
# measured 3.2x per doubling on repeated 'a ' while within the old bound of 60x)
DOUBLED = {"similarity.rouge_l": "a ", "parsing.json_objects": '{"a":"{', "parsing.answer_object": '{"', "score.parse_score": '{"a":"{'}
MAX_DOUBLING = 3.0  # linear: ~2; quadratic: 4


@pytest.mark.parametrize("name", sorted(DOUBLED))
def test_doubling_a_hostile_text_at_most_about_doubles_the_time(name: str) -> None:
    unit = DOUBLED[name]
    times = growth(FUNCTIONS[name], functools.partial(shaped, ("", unit, "")), 100_000, 2)
    for _ in range(ATTEMPTS - 1):
        if times < MAX_DOUBLING:
            break
        times = min(times, growth(FUNCTIONS[name], functools.partial(shaped, ("", unit, "")), 100_000, 2))
    assert times < MAX_DOUBLING, f"{name}: {times:.1f}x the time for twice the text ({unit!r} repeated, 100,000 -> 200,000 characters)"


def test_rouge_l_reads_every_word_of_texts_whose_product_of_word_counts_is_in_bounds() -> None:
    short, long = "alpha beta gamma " * 10, "beta gamma delta " * 3000  # 30 x 9,000 words: exact, not cut
    assert similarity.rouge_l(short, long) == pytest.approx(2 * 20 / 30 * 20 / 9000 / (20 / 30 + 20 / 9000))
    over = similarity.ROUGE_MAX_WORDS + 10
    a, b = " ".join(["x"] * over), " ".join(["x"] * (over - 10) + ["y"] * 10)  # both cut to their first 4,096 words
    assert similarity.rouge_l(a, b) == 1.0


# ---- the rewritten readers answer as the quadratic ones did ----------------------------------------------------------
import json  # noqa: E402
import re  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from judge_mcp.methods.flip import reward as flip  # noqa: E402
from judge_mcp.methods import similarity  # noqa: E402
from judge_mcp.methods import json_scan  # noqa: E402
from judge_mcp.methods.json_scan import top_level_objects  # noqa: E402

_PIECES = ['{', '}', '[', ']', '"', ':', ',', ' ', '\n', '\\', 'a', '1', '0', '-', '.', 'e', 'true', 'null', 'NaN', '-Infinity',
           '\\u00e9', '\\"', '\x01', '{"a":', '"b"', '{"verdict": "A"}', '{"x": [1, {"y": null}]}', 'prose ',
           # nesting near and past the regular expressions' depth (json_scan._REGEX_DEPTH), numbers at their edges
           '[', '{"a":[', '{"b":{', '],', '},', '"x",', '1e5', '01', '1.', '12', '"\\', '\t', 'false', 'Infinity', '{}', '[]', '"{"']


def _decode_at_every_brace(text: str, strict: bool) -> list:
    """The reference: raw_decode tried at every `{` (quadratic on hostile text, exact on any)."""
    decoder, found, i = json.JSONDecoder(strict=strict), [], text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        found.append(value)
        i = text.find("{", end)
    return found


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40), st.booleans())
def test_the_linear_json_scan_finds_the_objects_raw_decode_finds(pieces: list[str], strict: bool) -> None:
    text = "".join(pieces)
    assert json.dumps(list(top_level_objects(text, strict=strict))) == json.dumps(_decode_at_every_brace(text, strict))
    # the scan alone (what reads a text once its first objects are not read whole by raw_decode) answers alike
    scanned = json_scan._scanned(text, strict, json.JSONDecoder(strict=strict), text.find("{")) if "{" in text else iter(())
    assert json.dumps(list(scanned)) == json.dumps(_decode_at_every_brace(text, strict))


def test_a_reply_made_of_whole_objects_is_read_without_compiling_the_scan() -> None:
    json_scan._regexes.cache_clear()
    assert list(top_level_objects('Sure. {"verdict": "[[A>B]]"} and {"b": [1, {"c": 2}]}')) == [{"verdict": "[[A>B]]"}, {"b": [1, {"c": 2}]}]
    assert json_scan._regexes.cache_info().misses == 0  # the regular expressions cost ~30 ms to compile: a first call's
    assert list(top_level_objects('{"a": 1} {"b": ')) == [{"a": 1}]  # an object that fails: the scan takes over
    assert json_scan._regexes.cache_info().misses == 1


@pytest.mark.parametrize("depth", [json_scan.MAX_DEPTH - 1, json_scan.MAX_DEPTH, json_scan.MAX_DEPTH + 1, 2000])
def test_nesting_past_max_depth_stops_the_reading_whichever_path_reads_it(depth: int) -> None:
    text = 'x {"a": 1} ' + '{"k":' * (depth - 1) + "{}" + "}" * (depth - 1) + ' {"b": 2}'
    expected = [{"a": 1}] if depth > json_scan.MAX_DEPTH else [{"a": 1}, json.loads(text[11:-9]), {"b": 2}]
    assert list(top_level_objects(text)) == expected


def _lcs_table(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        new = [0]
        for j, y in enumerate(b, start=1):
            new.append(row[j - 1] + 1 if x == y else max(row[j], new[j - 1]))
        row = new
    return row[-1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=40), st.lists(st.sampled_from("abcde"), max_size=40))
def test_the_bit_parallel_lcs_is_exact(a: list[str], b: list[str]) -> None:
    assert similarity.lcs_length(a, b) == _lcs_table(a, b)


def test_an_echo_of_a_long_instruction_is_found_at_either_end() -> None:
    instruction = " ".join(f"step {i}: do the thing number {i} carefully." for i in range(150))  # ~6,000 characters
    assert len(instruction) > 4 * flip.ECHO_MAX_CHARS
    assert flip.detect_echo(instruction, instruction + " Here is my answer.").echoes
    assert flip.detect_echo(instruction, "Here is my answer. " + instruction).echoes
    assert not flip.detect_echo(instruction, "Here is my answer, which repeats nothing of the task at all.").echoes


# ---- replies full of labels (issue 34): a label reader costs about what prose does -----------------------------------
from testkit.hostile_texts import LABEL_READERS, label_floods  # noqa: E402
from judge_mcp.methods import pair_labels, pairwise  # noqa: E402

MAX_LABEL_RATIO = 40  # the label readers measure up to ~15 (echoes of a judged text); the old parse_label 150 to 300
FLOODS = label_floods()


@pytest.mark.parametrize("name", sorted(LABEL_READERS))
def test_a_reply_full_of_labels_costs_a_small_multiple_of_prose(name: str) -> None:
    ratio, text, worst_s, base_s = worst_ratio(LABEL_READERS[name], texts=FLOODS)
    assert ratio < MAX_LABEL_RATIO, f"{name}: {text} took {worst_s * 1000:.1f} ms, {ratio:.0f}x its prose baseline ({base_s * 1000:.2f} ms)"


def _old_canon(text: str) -> str:
    import re

    text = pair_labels._REF_LABEL.sub(lambda m: f"⟨{m.group(1)}{m.group(2)}{m.group(3)}⟩", text)
    return re.sub(r"\s+", " ", text).lower()


class _OldEchoIndex:
    """pair_labels._EchoIndex as it was: a Python step per label of the references."""

    def __init__(self, references: list[str]) -> None:
        self.long: set[tuple[str, str, str]] = set()
        self.short: dict[tuple[str, str], set[str]] = {}
        for ref in references:
            for m in pair_labels._CANON_LABEL.finditer(ref):
                after = ref[m.end() : m.end() + 8]
                if len(after) < 8:
                    continue
                before = ref[max(0, m.start() - 8) : m.start()]
                if len(before) == 8:
                    self.long.add((m.group(0), after, before))
                else:
                    self.short.setdefault((m.group(0), after), set()).add(before)

    def holds(self, label: str, before: str, after: str) -> bool:
        if len(after) < 8:
            return False
        after = after[:8]
        if len(before) >= 8 and (label, after, before[-8:]) in self.long:
            return True
        return any(before.endswith(b) for b in self.short.get((label, after), ()))


def _old_parse_label(text: str, judged: list[str]) -> pairwise.Verdict | None:
    """parse_label as it was before the one-pass reading: every label classified, in order."""
    if not text:
        return None
    judged = [t for t in judged if t]
    index = _OldEchoIndex([_old_canon(t) for t in judged] + [_old_canon(_old_neutralise(t)) for t in judged])
    plain, mentions = [], []
    for m in pair_labels._ANY_LABEL.finditer(text):
        before_ctx = _old_canon(text[max(0, m.start() - pair_labels._CONTEXT) : m.start()])
        if index.holds(_old_canon(m.group(0)), before_ctx, _old_canon(text[m.end() : m.end() + pair_labels._CONTEXT])):
            continue
        before, after = text[max(0, m.start() - 1) : m.start()], text[m.end() : m.end() + 1]
        (mentions if before and after and before in pair_labels._QUOTES and after in pair_labels._QUOTES else plain).append(m)
    labels = {pair_labels._label_of(m) for m in plain}
    if len(labels) != 1:
        return None
    label = labels.pop()
    if label not in pairwise.LABELS:
        return None
    last = plain[-1]
    if any(m.start() > last.start() and pair_labels._label_of(m) != label for m in mentions):
        return None
    return pairwise.Verdict(label, text[: last.start()].strip(), last.start())


_LABEL_PIECES = ["[[A>B]]", "[[B>A]]", "[[A=B]]", "[[A>>B]]", "[[ A > B ]]", "[B>A]", "[[", "]]", "[", "A", "B", ">", '"', "'",
                 "`", "“", "”", " ", "\n", "x", "Assistant A is worse: ", " clearly so.", "My final verdict is ", "abcdefghij"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_LABEL_PIECES), max_size=40), st.lists(st.lists(st.sampled_from(_LABEL_PIECES), max_size=20), max_size=3))
def test_the_one_pass_label_reading_answers_as_the_old_one(pieces: list[str], judged: list[list[str]]) -> None:
    text, refs = "".join(pieces), ["".join(j) for j in judged]
    if refs:  # a reply quoting a judged text, as the echo rule is about
        text = text[: len(text) // 2] + refs[0] + text[len(text) // 2 :]
    assert pairwise.parse_label(text, refs) == _old_parse_label(text, refs)


# ---- the fence walks at C speed (issue 38) answer as the per-character walks did ---------------------------------------
from judge_mcp.methods import parsing, transcript  # noqa: E402
from judge_mcp.methods.grade_score import scoring as grade_score  # noqa: E402


def _old_fence_spans(text: str, phrase, *, delimited_only: bool) -> list[tuple[int, int, re.Match]]:
    """parsing._fence_spans as it was: one Python step per character walked."""
    spans, floor, n = [], 0, len(text)
    for m in phrase.finditer(text):
        s, e = m.start(), m.end()
        if s < floor:
            continue
        left = s
        while left > floor and (text[left - 1] in parsing._OPENERS or text[left - 1] in " \t\\"):
            left -= 1
        while left < s and text[left] in " \t":
            left += 1
        right = e
        while right < n and (text[right] in parsing._CLOSERS or text[right] in " \t"):
            right += 1
        while right > e and text[right - 1] in " \t":
            right -= 1
        if delimited_only and not (any(c in parsing._OPENERS for c in text[left:s]) and any(c in parsing._CLOSERS for c in text[e:right])):
            i = s
            while i > floor and text[i - 1] in " \t":
                i -= 1
            if i > 0 and text[i - 1] != "\n":
                continue
            j = e
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == ":":
                j += 1
            k = j
            while k < n and text[k] in " \t":
                k += 1
            if not (k == n or text[k] == "\n"):
                continue
            left, right = s, j
        spans.append((left, right, m))
        floor = right
    return spans


_FENCE_PIECES = ["The End of Assistant A's Answer", "the start of the assistant b answer", "User Question", "user prompt", "USER_instruction",
                 "The End of Message 2", "the start of tool call 1.2", "The End of the Reference Answer", "<|", "|>", "<", ">",
                 "[", "]", "**", "#", "### ", " ", "  ", "\t", "\n", ":", "\\", "｜", "【", "】", "»", "x", "word ", " " * 40, "*" * 30]
_PHRASES = [parsing._ANSWER_PHRASE, parsing._INPUT_PHRASE, parsing._SECTION_PHRASE, transcript._FENCE_PHRASE]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(_FENCE_PIECES), max_size=30), st.booleans())
def test_the_fence_walks_find_the_spans_the_per_character_walks_found(pieces: list[str], delimited_only: bool) -> None:
    text = "".join(pieces)
    for phrase in _PHRASES:
        new = [(s, e) for s, e, _ in parsing._fence_spans(text, phrase, delimited_only=delimited_only)]
        assert new == [(s, e) for s, e, _ in _old_fence_spans(text, phrase, delimited_only=delimited_only)]
    # the section phrase as neutralise reads it: only where the rule can take it, the same spans
    new = [(s, e) for s, e, _ in parsing._fence_spans(text, parsing._SECTION_DELIMITED, delimited_only=True)]
    assert new == [(s, e) for s, e, _ in _old_fence_spans(text, parsing._SECTION_PHRASE, delimited_only=True)]


_OLD_TEXT_SELECTION = re.compile(r"\bSelection\b[*_ \t]*+:[*_\s]*+(?:\[[ \t]*+)?+Option[ \t]*+(\d{1,4})(?!\d)", re.I)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["Selection", "selection", "SELECTION", "xSelection", "_", "ſelection", "é", ":", " ", "**", "[",
                                 "Option", "option ", "3", "12345", "\n", "{", '"']), max_size=25))
def test_the_selection_pattern_reads_as_before(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert [m.span() for m in grade_score._TEXT_SELECTION.finditer(text)] == [m.span() for m in _OLD_TEXT_SELECTION.finditer(text)]


def _old_defuse(text: str, phrase, words, delimited_only: bool) -> str:
    parts, last = [], 0
    for start, end, m in _old_fence_spans(text, phrase, delimited_only=delimited_only):
        parts += [text[last:start], words(m)]
        last = end
    return "".join(parts + [text[last:]])


def _old_neutralise(text: str) -> str:
    """parsing.neutralise as it was: a function passed to each `sub`, the walks one character a step."""
    text = _old_defuse(text, parsing._ANSWER_PHRASE, parsing._answer_words, False)
    text = _old_defuse(text, parsing._INPUT_PHRASE, parsing._input_words, False)
    text = _old_defuse(text, parsing._SECTION_PHRASE, parsing._section_words, True)
    text = parsing._PIPE_MARKER.sub(lambda m: f"<{m.group(1)}>", text)
    text = re.sub(r"\[\[\s*+([AB])\s*+([<>=])\s*+([AB])\s*+\]\]", lambda m: "[" + m.group(0).strip("[]").strip() + "]", text, flags=re.I)
    text = parsing._SIDE_TOKEN.sub(lambda m: f"({m.group(1)})", text)
    return parsing._SELECTION.sub(lambda m: f"{m.group(1)} - {m.group(3)}", text)


_NEUTRALISE_PIECES = _FENCE_PIECES + ["[[A>B]]", "[[ b < a ]]", "[[A]]", "[B]", "[ A ]]", "[[[A]]]", "A", "B", ">", "=", "<|im_end|>",
                                      "<｜x｜>", "Selection: Option 2", "**Selection:** [Option 3", "selection", ": ", "Option"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(_NEUTRALISE_PIECES), max_size=30))
def test_neutralise_answers_as_the_old_one(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert parsing.neutralise.__wrapped__(text) == _old_neutralise(text)


# ---- patterns searched by their first character (issue 38) find what the old ones found ------------------------------
from judge_mcp.bench import pointwise  # noqa: E402
from judge_mcp.methods.flip import answers as flip_answers  # noqa: E402
from judge_mcp.methods.lwe import text as lwe_text  # noqa: E402

_OLD_SINGLE = {side: re.compile(r"(?<!\[)\[\s*" + side + r"\s*\](?!\])") for side in "AB"}
_OLD_KEYED_SCORE = re.compile(
    r"""["']?+score["']?+\s*+:\s*+(?:["']\s*+)?+(\d{1,2}(?:\.\d++)?+)[ \t\r]*+(?:/\s*+10)?+[ \t\r]*+(?:["'][ \t\r]*+)?+[,}\n]""", re.I
)
_OLD_LABELLED = re.compile(
    r"""(?im)^[ \t>*#_-]*+(?:the\s++)?+(?:inferr*+ed\s++|reconstructed\s++|likely\s++|original\s++)?+"""
    r"""(?:system\s++prompt|instruction|prompt)\s*+(?:is)?+[*_]*+\s*+[:\-][*_\s]*+(.+)$"""
)
_ANSWER_PIECES = ["[", "]", "[[", "]]", "A", "B", " ", "\n", "\t", '"', "'", ":", "score", "SCORE", "ſcore", "7", "10", "/", ",", "}", "{",
                  "the ", "The ", "inferred ", "INFERRRED ", "reconstructed ", "likely ", "original ", "system prompt", "instruction",
                  "Instruction", "prompt", " is", "**", "#", "> ", "-", "_", "İnstruction", "ınstruction", "x", "Tell me a joke.",
                  '"INFERRED INSTRUCTION": "', '"reasoning": "', "'instruction': '", "\\", '\\"',
                  # whole answers' pieces, so that matches are common
                  '"score": 7,', "SCORE: '10'\n", '"Score" : " 7 / 10 "}', "score:7.5\n", "\nPrompt: write a poem\n",
                  "\n**Inferred instruction:** do it\n", "The likely system prompt is: be kind", "> original instruction - x\n",
                  "[A]", "[ B ]", "[[A]", "[B]]"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(_ANSWER_PIECES), max_size=30))
def test_the_answer_patterns_read_as_the_old_ones(pieces: list[str]) -> None:
    text = "".join(pieces)
    for side in "AB":
        assert [m.span() for m in lwe_text._SINGLE[side].finditer(text)] == [m.span() for m in _OLD_SINGLE[side].finditer(text)]
    old, new = _OLD_KEYED_SCORE.search(text + "\n"), pointwise._KEYED.search(text + "\n")
    assert (old and old.group(1)) == (new and new.group(1))
    assert [m.group(0, 1) for m in flip_answers._LABELLED.finditer(text)] == [m.group(0, 1) for m in _OLD_LABELLED.finditer(text)]
    m = flip_answers._KEYED_VALUE.search(text)
    assert m is None or flip_answers._KEY_WORD.search(text)  # the filter never hides a keyed value
