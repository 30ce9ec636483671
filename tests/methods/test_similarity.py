"""FLIP's similarity metrics against hand-computed values (and the FLIP paper's own reported F1 scores)."""

from __future__ import annotations

import random

import pytest
from rapidfuzz import fuzz, utils

from judge_mcp.methods import similarity as sim


# ---- normalisation ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Cat sat on a mat.", "cat sat on mat"),
        ("  An   apple,\tthe  pear! ", "apple pear"),
        ("Theatre and anthem", "theatre and anthem"),  # articles only as whole words
        ("what's (in) [the] box?", "whats in box"),
        ("", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert sim.normalize_answer(text) == expected


# ---- word-level F1 ---------------------------------------------------------------------------------------------
def test_f1_hand_computed():
    # "cat sat on mat" vs "cat sat on hat": 3 shared of 4 each -> P = R = 3/4 -> F1 = 0.75
    assert sim.f1("The cat sat on the mat", "A cat sat on a hat") == pytest.approx(0.75)
    # "write poem about cats" (4) vs "write short poem" (3): 2 shared -> P = 2/4, R = 2/3 -> F1 = 4/7
    assert sim.f1("Write a poem about cats", "write a short poem") == pytest.approx(4 / 7)


def test_f1_counts_words_with_multiplicity():
    # prediction "go go go", reference "go": 1 shared -> P = 1/3, R = 1 -> F1 = 0.5
    assert sim.f1("go go go", "go") == pytest.approx(0.5)
    assert sim.f1("go", "go go go") == pytest.approx(0.5)


def test_f1_ignores_case_punctuation_and_articles():
    assert sim.f1("Summarise THE article, please!", "summarise article please") == 1.0


def test_f1_no_overlap_and_empty_are_zero():
    assert sim.f1("alpha beta", "gamma delta") == 0.0
    assert sim.f1("", "gamma") == 0.0
    assert sim.f1("the a an", "the") == 0.0  # nothing left after normalisation


# The FLIP paper's Tables 16 and 17 print instruction, inferred instruction and F1 (3 decimals).
PAPER_EXAMPLES = [
    (
        "Write a list of 20 animated films from the 1990s, in the following format: “[TITLE] ([YEAR]), by "
        "[DIRECTORS]”. Do not write any descriptions, or sort in any order.",
        "List 20 popular animated films from the 1990s that were produced by Disney, Pixar, or other animation studios.",
        0.381,
    ),
    (
        "Write a list of 20 animated films from the 1990s, in the following format: “[TITLE] ([YEAR]), by "
        "[DIRECTORS]”. Do not write any descriptions, or sort in any order.",
        "List the 20 most popular animated films released between 1991 and 2005, with a focus on American and "
        "American-influenced films.",
        0.186,
    ),
    (
        "What's the root meaning of politics Please use an emoji at the end of every sentence.",
        "Explain the meaning and development of the term 'politics' over time, including an emoji representation "
        "of politics.",
        0.370,
    ),
    (
        "What's the root meaning of politics Please use an emoji at the end of every sentence.",
        "Define politics, including its origins and main topics of study.",
        0.174,
    ),
]


@pytest.mark.parametrize("instruction, inferred, reported", PAPER_EXAMPLES)
def test_f1_reproduces_the_papers_reported_scores(instruction, inferred, reported):
    assert round(sim.f1(inferred, instruction), 3) == reported


# ---- ROUGE-L -----------------------------------------------------------------------------------------------------
def test_lcs_length_hand_computed():
    assert sim.lcs_length("a b c d".split(), "a c d".split()) == 3
    assert sim.lcs_length("w x y z".split(), "z y x w".split()) == 1
    assert sim.lcs_length("a b a".split(), "b a b a".split()) == 3
    assert sim.lcs_length([], ["a"]) == 0


def test_rouge_l_hand_computed():
    # 6 words each, LCS "the cat on the mat" = 5 -> P = R = 5/6
    assert sim.rouge_l("the cat sat on the mat", "the cat lay on the mat") == pytest.approx(5 / 6)
    # [write a short haiku about leaves] vs [write a haiku about autumn leaves]: LCS 5 of 6 each
    assert sim.rouge_l("Write a short haiku about leaves", "write a haiku about autumn leaves.") == pytest.approx(5 / 6)
    # prediction 2 words inside a 4-word reference: P = 1, R = 1/2 -> F = 2/3
    assert sim.rouge_l("quick fox", "the quick brown fox") == pytest.approx(2 / 3)


def test_rouge_l_is_order_sensitive_where_f1_is_not():
    assert sim.f1("wolf xray yak zebu", "zebu yak xray wolf") == 1.0
    assert sim.rouge_l("wolf xray yak zebu", "zebu yak xray wolf") == pytest.approx(0.25)


def test_rouge_l_tokenises_unicode_words():
    assert sim.rouge_l("Café au lait!", "café au lait") == 1.0
    assert sim.rouge_l("Übersetze den Text", "übersetze den text ins englische") == pytest.approx(2 * 1 * 0.6 / 1.6)
    assert sim.rouge_l("!!!", "text") == 0.0


# ---- rapidfuzz token_sort ----------------------------------------------------------------------------------------
def test_token_sort_hand_computed():
    assert sim.token_sort("york new", "New York!") == 1.0  # same words in another order
    # "cat" vs "cut": Indel distance 2 over 6 characters -> 1 - 2/6
    assert sim.token_sort("cat", "cut") == pytest.approx(4 / 6)
    # "ab" vs "abcd": Indel distance 2 over 6 characters
    assert sim.token_sort("ab", "abcd") == pytest.approx(4 / 6)
    assert sim.token_sort("", "anything") == 0.0
    assert sim.token_sort("...", "...") == 0.0


def test_token_sort_equals_rapidfuzz_below_the_cap_and_reads_the_sorted_texts_first_characters_past_it():
    rng = random.Random(7)
    words = ["york", "New", "cat", "cut", "Café", "x1", "...", "a-b", "ÉTÉ", "中文"]
    for _ in range(300):
        a, b = (" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(2))
        assert sim.token_sort(a, b) == fuzz.token_sort_ratio(a, b, processor=utils.default_process) / 100.0
    cap = sim.TOKEN_SORT_MAX_CHARS
    long_a, long_b = "b " * cap, "a " * 10 + "b " * cap  # sorted: only the second starts with "a"s
    assert sim.token_sort(long_a, long_b) == fuzz.ratio(("b " * cap)[:cap], ("a " * 10 + "b " * cap)[:cap]) / 100.0
    short = "a " * 10 + "b b"  # one short side: the whole texts, as rapidfuzz
    assert sim.token_sort(long_a, short) == fuzz.token_sort_ratio(long_a, short) / 100.0


# ---- the registry ------------------------------------------------------------------------------------------------
def test_score_by_name_and_names():
    assert sim.NAMES == ("f1", "rouge_l", "token_sort")
    assert sim.score("f1", "go go go", "go") == pytest.approx(0.5)
    assert sim.score("rouge_l", "quick fox", "the quick brown fox") == pytest.approx(2 / 3)
    assert sim.score("token_sort", "cat", "cut") == pytest.approx(4 / 6)
    with pytest.raises(KeyError):
        sim.score("bleu", "a", "b")


@pytest.mark.parametrize("name", sim.NAMES)
def test_every_metric_is_one_on_identity_and_within_bounds(name):
    text = "Explain photosynthesis to a ten-year-old in three sentences."
    assert sim.score(name, text, text) == pytest.approx(1.0)
    assert 0.0 <= sim.score(name, text, "Write a limerick about a cat.") < 0.5
