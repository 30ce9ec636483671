"""Similarity between an original and an inferred instruction: FLIP's reward function `s(x, x')`.

Pure functions, tested against hand-computed values in tests/methods/test_similarity.py.

- `f1` (the default, the FLIP paper's best metric): word-level F1 after the usual answer normalisation (lowercase,
  drop ASCII punctuation, drop the articles a/an/the, collapse whitespace), computed on the multiset of words,
  exactly as in the authors' `metrics.py`.
- `rouge_l`: the F-measure of the longest common word subsequence (ROUGE-L, as in the paper's ablation), on
  lowercased words split at anything that is not a letter or digit (rouge-score's tokenizer, made Unicode-aware).
  The subsequence is exact, and its cost is the product of the two word counts: when that passes ROUGE_MAX_WORDS²
  (two texts of over 4,096 words each, some 25,000 characters), ROUGE-L is that of each text's first ROUGE_MAX_WORDS
  words, so that a long text costs time linear in its length (it was 3.2x per doubling).
- `token_sort`: rapidfuzz's `token_sort_ratio` (words sorted, then normalised Indel similarity) scaled to 0..1. Its
  cost is the product of the two sorted texts' lengths over 64: when that product passes TOKEN_SORT_MAX_CHARS²
  (both texts over some 25,000 characters; in FLIP one side is the inferred instruction, at most 512 tokens), it is
  the similarity of each sorted text's first TOKEN_SORT_MAX_CHARS characters, so a long text costs linear time.

Every metric returns a float in [0, 1]; two texts with no words at all score 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable

from judge_mcp.contract.fields import SIMILARITIES

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NON_WORD = re.compile(r"[\W_]+")


def normalize_answer(text: str) -> str:
    """SQuAD-style answer normalisation (the FLIP authors' `normalize_answer`)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def f1(prediction: str, reference: str) -> float:
    """Word-level F1 (harmonic mean of precision and recall over shared words, counted with multiplicity)."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred)
    recall = common / len(ref)
    return 2 * precision * recall / (precision + recall)


def rouge_tokens(text: str) -> list[str]:
    """Lowercased runs of letters/digits (rouge-score's default tokenizer, without stemming, Unicode-aware)."""
    return _NON_WORD.sub(" ", text.lower()).split()


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two word lists, exactly.

    Bit-parallel (Hyyrö's formulation of Allison and Dix): the row of the LCS table is one integer whose bits mark
    where it steps up, updated with a few whole-integer operations per word of `a` that occurs in `b`. That is
    len(a) * len(b) / 30 machine operations instead of len(a) * len(b) Python steps: two 50,000-character texts
    (about 10,000 words each) take milliseconds, not seconds.
    """
    if not a or not b:
        return 0
    if len(a) < len(b):
        a, b = b, a  # the shorter list is the bit row
    masks: dict[str, int] = {}
    for j, word in enumerate(b):
        masks[word] = masks.get(word, 0) | (1 << j)
    full = (1 << len(b)) - 1
    row = full
    for word in a:
        match = masks.get(word)
        if match is None:
            continue
        u = row & match
        row = ((row + u) | (row - u)) & full
    return len(b) - row.bit_count()


ROUGE_MAX_WORDS = 4096  # the words of each text rouge_l reads when both are longer (see the module doc)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure: LCS-based precision and recall over words, combined with equal weight (over each text's
    first ROUGE_MAX_WORDS words when the two word counts' product passes ROUGE_MAX_WORDS squared)."""
    pred = rouge_tokens(prediction)
    ref = rouge_tokens(reference)
    if len(pred) * len(ref) > ROUGE_MAX_WORDS * ROUGE_MAX_WORDS:
        pred, ref = pred[:ROUGE_MAX_WORDS], ref[:ROUGE_MAX_WORDS]
    lcs = lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    precision = lcs / len(pred)
    recall = lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


TOKEN_SORT_MAX_CHARS = 25_000  # the sorted characters of each text token_sort compares when both are longer


def token_sort(prediction: str, reference: str) -> float:
    """rapidfuzz `token_sort_ratio` / 100, after rapidfuzz's default processing (lowercase, non-alphanumerics out):
    the Indel ratio of the two texts' words sorted and joined by spaces (over each one's first TOKEN_SORT_MAX_CHARS
    characters when the two lengths' product passes TOKEN_SORT_MAX_CHARS squared)."""
    from rapidfuzz import fuzz, utils  # lazy: imported at the first use, not at the server's start

    pred = " ".join(sorted(utils.default_process(prediction).split()))
    ref = " ".join(sorted(utils.default_process(reference).split()))
    if not pred or not ref:
        return 0.0
    if len(pred) * len(ref) > TOKEN_SORT_MAX_CHARS * TOKEN_SORT_MAX_CHARS:
        pred, ref = pred[:TOKEN_SORT_MAX_CHARS], ref[:TOKEN_SORT_MAX_CHARS]
    return fuzz.ratio(pred, ref) / 100.0


METRICS: dict[str, Callable[[str, str], float]] = {"f1": f1, "rouge_l": rouge_l, "token_sort": token_sort}
NAMES: tuple[str, ...] = SIMILARITIES  # the tool's `similarity` choices (args.py), one metric each above


def score(name: str, prediction: str, reference: str) -> float:
    """The named metric, clamped to [0, 1]. Raises KeyError for an unknown name (validate first)."""
    value = METRICS[name](prediction, reference)
    return min(1.0, max(0.0, float(value)))
