"""Verdict probabilities from token log-probabilities (compare_pair's `p_better`). Pure functions.

A pairwise label `[[X>Y]]` is decided by its first letter: X names the better of the two answers as shown
(`[[A>B]]`: the first-shown answer is better, whatever the goal; under goal "worse" the prompt asks for
`[[B>A]]` when A is worse, so the letter still names the better one). At the token that writes that letter, the
backend's top alternatives give the probability of each letter: every alternative that continues the text before
the letter within that token (`[[` + `A`, or `[[A` as one token, or ` A` after `[[`) with `A` or `B` counts for that
letter, and the two masses are renormalised over the two letters. A letter absent from the alternatives counts as
probability 0: its true probability is below the least likely alternative listed.

`None` whenever a needed piece is missing: no log-probabilities, no alternatives at that token, the verdict's
label not found in the generated tokens, or a generated token that does not write the parsed letter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from judge_mcp.backends.base import TokenLogprob

# The first letter of any label as it stands in a text answer or in the JSON `verdict` field.
_SITE = re.compile(r"\[\[\s*([AB])")


def label_sites(text: str) -> list[int]:
    """Character offsets of the first letter of every `[[A...` / `[[B...` label in `text`."""
    return [m.start(1) for m in _SITE.finditer(text)]


def verdict_site(text: str, label: str, at: int | None = None) -> int | None:
    """Offset of the deciding letter of the verdict `label` in `text`: the label that starts at `at` when given
    (the text grammar's last plain label), else the last label in `text` (the JSON answer's verdict comes last).
    None when that label does not start with the verdict's letter."""
    if at is not None:
        m = _SITE.match(text, at)
        sites = [m.start(1)] if m else []
    else:
        sites = label_sites(text)
    if not sites or text[sites[-1]] != label[2]:
        return None
    return sites[-1]


def letter_probability(tokens: Sequence[TokenLogprob], text: str, site: int) -> float | None:
    """P(first letter = "A"), renormalised over A and B, at the label whose letter is at `site` in `text`.

    The generated tokens need not spell `text` exactly (llama.cpp strips a code fence it generated around a JSON
    answer; a token may hold half a character): the label is matched by its rank from the end among the labels in
    `text` and in the tokens' joined text, and only when both hold the same number of labels."""
    joined = "".join(t.token for t in tokens)
    text_sites, token_sites = label_sites(text), label_sites(joined)
    if site not in text_sites or len(text_sites) != len(token_sites):
        return None
    target = token_sites[text_sites.index(site)]
    if joined[target] != text[site]:
        return None  # the tokens wrote the other letter there
    start = 0
    for token in tokens:
        end = start + len(token.token)
        if start <= target < end:
            return _split(token, joined[start:target], joined[target])
        start = end
    return None  # pragma: no cover - target lies inside the joined tokens


def _letter(candidate: str, prefix: str) -> str | None:
    """The label letter a candidate token writes after `prefix` (the part of the token before the letter)."""
    if not candidate.startswith(prefix):
        return None
    rest = candidate[len(prefix) :].lstrip(" ")
    return rest[0] if rest and rest[0] in "AB" else None


def _split(token: TokenLogprob, prefix: str, chosen_letter: str) -> float | None:
    if not token.top or _letter(token.token, prefix) != chosen_letter:
        return None
    mass = {"A": 0.0, "B": 0.0}
    seen = set()
    for candidate, logprob in ((token.token, token.logprob), *token.top):
        if candidate in seen:
            continue
        seen.add(candidate)
        letter = _letter(candidate, prefix)
        if letter is not None:
            mass[letter] += math.exp(logprob)
    total = mass["A"] + mass["B"]
    return mass["A"] / total if total > 0 else None


def first_better(tokens: Sequence[TokenLogprob] | None, text: str, label: str, at: int | None = None) -> float | None:
    """P(the first-shown answer is better) from the verdict `label` found in `text`, or None (see module doc)."""
    if not tokens:
        return None
    site = verdict_site(text, label, at)
    return None if site is None else letter_probability(tokens, text, site)


def debiased(per_order: Sequence[float | None]) -> float | None:
    """The mean over the orders judged (position bias cancels when both orders are in); None if any is missing."""
    if not per_order or any(p is None for p in per_order):
        return None
    return sum(per_order) / len(per_order)  # type: ignore[arg-type]
