"""Unrelated-option sampling ("Grade Score: Quantifying LLM Performance in Option Selection" §4.6): pick one option that answers a *different*
instruction, to add to a `grade_score_options` call as a sanity check on the judge.

Candidates come from `BUILTIN_POOL` below. The stored option pool (storage/option_pool.py: options of earlier calls
for other instructions, from every client of the database) is drawn from only when the operator sets
`JUDGE_MCP_SHARED_OPTION_POOL=1` (read by config/settings.py, passed down as `CallContext.shared_option_pool`): by default one
client's option text is never shown to another client's judge (nor returned in its `unrelated_option`). Options
are still stored, so enabling the setting later finds a pool. The pick is deterministic for a given call and pool:
each candidate is ranked by a hash of (call seed, candidate text) and the lowest wins (rendezvous hashing), so a
repeated call draws the same option, and hence sends the same requests and hits the call cache, unless a newer
pool entry happens to rank lower.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from judge_mcp.storage.engine import Engine
from judge_mcp.storage.option_pool import OptionPool

# (instruction, answer) pairs on everyday topics: each is a plausible answer, but to its own instruction only.
BUILTIN_POOL: tuple[tuple[str, str], ...] = (
    (
        "Give me a simple recipe for pancakes.",
        "Whisk 1 cup of flour, 1 tablespoon of sugar, 2 teaspoons of baking powder and a pinch of salt. Add 1 cup of "
        "milk, 1 egg and 2 tablespoons of melted butter and stir until just combined. Cook ladlefuls on a hot greased "
        "pan until bubbles form, then flip and cook for another minute.",
    ),
    ("What is the capital of Australia?", "The capital of Australia is Canberra, not Sydney as many people assume."),
    (
        "How often should I water a cactus?",
        "Water a cactus deeply about once every two to three weeks in spring and summer, letting the soil dry out "
        "completely in between, and about once a month or less in winter.",
    ),
    (
        "Explain what a leap year is.",
        "A leap year has 366 days instead of 365: February gets a 29th day. Years divisible by 4 are leap years, "
        "except those divisible by 100, unless they are also divisible by 400.",
    ),
    (
        "Suggest a name for a small coffee shop.",
        "How about \"The Daily Grind Corner\"? It is friendly, easy to remember, and hints at both coffee and routine.",
    ),
    (
        "How do I change a flat bicycle tyre?",
        "Remove the wheel, lever one side of the tyre off the rim, pull out the inner tube, find and patch the hole "
        "(or use a new tube), check the tyre for thorns, refit the tube and tyre, inflate, and put the wheel back on.",
    ),
    (
        "Translate 'good morning' into Spanish.",
        "\"Good morning\" in Spanish is \"buenos días\".",
    ),
    (
        "Why is the sky blue?",
        "Sunlight is scattered by the molecules of the air, and shorter blue wavelengths scatter much more than red "
        "ones (Rayleigh scattering), so blue light reaches our eyes from every direction of the sky.",
    ),
    (
        "Write a haiku about autumn.",
        "Crimson leaves let go\nthe wind carries them softly\ninto quiet streams",
    ),
    (
        "What are the rules of tic-tac-toe?",
        "Two players take turns marking X or O in a 3x3 grid. The first to get three of their marks in a row, "
        "column or diagonal wins; if all nine squares fill up without that, the game is a draw.",
    ),
    (
        "Recommend a stretching routine for the morning.",
        "Try five minutes: neck rolls, shoulder circles, a standing forward fold, a cat-cow stretch on hands and "
        "knees, a hip-flexor lunge on each side, and finish with a gentle spinal twist.",
    ),
    (
        "How many planets are in the solar system?",
        "There are eight planets: Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus and Neptune.",
    ),
)

# How many of the newest pool entries are considered (the store returns newest first).
POOL_LIMIT = 1000


@dataclass(frozen=True)
class UnrelatedOption:
    text: str
    instruction: str  # the instruction it actually answers
    source: str  # "pool" (earlier calls, from SQLite) or "builtin"


def call_seed(instruction: str, options: list[str]) -> bytes:
    """A digest of the call's inputs; everything random about the unrelated option derives from it."""
    payload = "\x1f".join([instruction, *options]).encode("utf-8")
    return hashlib.sha256(payload).digest()


def _rank(seed: bytes, text: str) -> bytes:
    return hashlib.sha256(seed + b"\x1e" + text.encode("utf-8")).digest()


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def pick(seed: bytes, instruction: str, options: list[str], candidates: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The (instruction, option) candidate ranked first for `seed`, skipping any that answer the same instruction
    or repeat one of `options` (ignoring case and spacing); None when nothing is left."""
    usable = [
        (ins, opt)
        for ins, opt in candidates
        if opt.strip() and not _same(ins, instruction) and not any(_same(opt, o) for o in options)
    ]
    if not usable:
        return None
    return min(usable, key=lambda c: _rank(seed, c[1]))


def choose_unrelated(store: Engine | None, instruction: str, options: list[str], *, shared: bool) -> UnrelatedOption:
    """Draw the unrelated option: from the stored option pool when sharing it is enabled (`shared`: the operator's
    JUDGE_MCP_SHARED_OPTION_POOL, `Settings.shared_option_pool`) and it has a usable entry, else the built-in pool.
    Reads the database: async callers run it in a worker thread."""
    seed = call_seed(instruction, options)
    if store is not None and shared:
        rows = OptionPool(store).others(instruction, limit=POOL_LIMIT)
        chosen = pick(seed, instruction, options, [(r["instruction"], r["option"]) for r in rows])
        if chosen is not None:
            return UnrelatedOption(text=chosen[1], instruction=chosen[0], source="pool")
    chosen = pick(seed, instruction, options, list(BUILTIN_POOL))
    if chosen is None:  # pragma: no cover - only if a caller's options repeat every built-in answer
        raise RuntimeError("no unrelated option available")
    return UnrelatedOption(text=chosen[1], instruction=chosen[0], source="builtin")


def insertion_position(seed: bytes, n: int) -> int:
    """Where in the base cycle of n caller options the unrelated option goes (0..n), derived from the seed."""
    return int.from_bytes(hashlib.sha256(seed + b"\x1dposition").digest()[:8], "big") % (n + 1)
