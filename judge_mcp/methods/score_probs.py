"""The probability of each scale point from token log-probabilities (score_response's `distribution`; G-Eval's
probability-weighted score, Liu et al. 2023). Pure functions, the same way label_probs.py reads a pairwise label.

At the token that writes the score's digits (the value of the answer's SCORE key), the backend's top alternatives
give each scale point's probability: every alternative that continues the text before the digits within that token
with a whole number inside the scale counts for that number (`"` + `7`, or `"7` as one token, or ` 7`), and the
masses are renormalised over the scale. A number the alternatives do not list counts as probability 0. An
alternative's digits are read as the whole number (a tokenizer that splits `10` into `1`, `0` would make `1`
ambiguous: the chosen token must then hold the score's every digit, else there is no distribution).

`None` whenever a needed piece is missing: no log-probabilities, no alternatives at that token, the score not found
in the generated tokens (or found a different number of times than in the text), or a token that does not write the
parsed score whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from judge_mcp.backends.base import TokenLogprob

# The first digit of a SCORE value, as it stands in a JSON answer or a keyed text answer ("SCORE": "7", score: 7).
_SITE = re.compile(r"""["']?+score["']?+[ \t]*+:[ \t]*+["']?+[ \t]*+(\d)""", re.I)
_DIGITS = re.compile(r"[ \t]*+(\d++)")


def score_sites(text: str) -> list[int]:
    """Offsets of the first digit of every keyed score in `text`."""
    return [m.start(1) for m in _SITE.finditer(text)]


def distribution(tokens: Sequence[TokenLogprob] | None, text: str, site: int | None, low: int, high: int) -> list[float] | None:
    """P(score = v) for v in low..high, renormalised over the scale, at the score whose first digit is at `site` in
    `text`; None (see the module doc)."""
    if not tokens or site is None:
        return None
    joined = "".join(t.token for t in tokens)
    text_sites, token_sites = score_sites(text), score_sites(joined)
    if site not in text_sites or len(text_sites) != len(token_sites):
        return None
    target = token_sites[text_sites.index(site)]
    wanted = _DIGITS.match(text, site)
    start = 0
    for token in tokens:
        end = start + len(token.token)
        if start <= target < end:
            prefix = joined[start:target]
            written = _number(token.token, prefix)
            whole = end >= len(joined) or not joined[end].isdigit()
            if wanted is None or written != int(wanted.group(1)) or not whole or not token.top:
                return None
            return _spread(token, prefix, low, high)
        start = end
    return None  # pragma: no cover - target lies inside the joined tokens


def _number(candidate: str, prefix: str) -> int | None:
    """The whole number a candidate token writes after `prefix`, or None."""
    if not candidate.startswith(prefix):
        return None
    m = _DIGITS.match(candidate, len(prefix))
    return int(m.group(1)) if m and len(m.group(1)) <= 3 else None


def _spread(token: TokenLogprob, prefix: str, low: int, high: int) -> list[float] | None:
    mass = [0.0] * (high - low + 1)
    seen = set()
    for candidate, logprob in ((token.token, token.logprob), *token.top):
        if candidate in seen:
            continue
        seen.add(candidate)
        value = _number(candidate, prefix)
        if value is not None and low <= value <= high:
            mass[value - low] += math.exp(logprob)
    total = sum(mass)
    return [round(m / total, 6) for m in mass] if total > 0 else None


def expected(probabilities: Sequence[float], low: int) -> float:
    """The probability-weighted score: sum over the scale of p(v) * v."""
    return sum(p * (low + i) for i, p in enumerate(probabilities))
