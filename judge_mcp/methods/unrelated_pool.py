"""Unrelated-option sampling (shared/papers/grade_score.txt §4.6): pick one option that answers a *different*
instruction, to add to a `grade_score_options` call as a sanity check on the judge.

Candidates come from `BUILTIN_POOL` below. The option pool in SQLite (options of earlier calls for other
instructions, from every client of the database) is drawn from only when the operator sets
`JUDGE_MCP_SHARED_OPTION_POOL=1`: by default one client's option text is never shown to another client's judge
(nor returned in its `unrelated_option`). Options are still stored, so enabling the setting later finds a pool. The pick is deterministic for a given call and pool: each candidate is ranked by a
hash of (call seed, candidate text) and the lowest wins (rendezvous hashing), so a repeated call draws the same
option, and hence sends the same requests and hits the call cache, unless a newer pool entry happens to rank lower.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from judge_mcp.storage.sqlite import OffLoop, Store, migration


@migration
def m003_option_pool(db: sqlite_utils.Database) -> None:
    """The option pool: each grade_score_options call's options under its instruction's hash (databases made before
    this migration got the table from m001_core: IF NOT EXISTS)."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS option_pool (
            id INTEGER PRIMARY KEY,
            instruction_hash TEXT NOT NULL,
            instruction TEXT NOT NULL,
            option TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE(instruction_hash, option)
        )"""
    )


def _instruction_hash(instruction: str) -> str:
    return hashlib.sha256(instruction.strip().encode("utf-8")).hexdigest()


class OptionPool:
    """The option pool's reads and writes (`pool.aio.NAME(...)` runs one in a worker thread)."""

    def __init__(self, store: Store):
        self.store = store
        self.aio = OffLoop(self)

    def add(self, instruction: str, options: list[str]) -> None:
        digest, now = _instruction_hash(instruction), time.time()
        with self.store.transaction() as db:
            for option in options:
                db.execute(
                    "INSERT OR IGNORE INTO option_pool (instruction_hash, instruction, option, created_at) VALUES (?, ?, ?, ?)",
                    [digest, instruction, option, now],
                )

    def others(self, exclude_instruction: str, limit: int = 200) -> list[dict[str, Any]]:
        """Stored options that answer a different instruction (newest first)."""
        return self.store.query(
            "SELECT instruction, option FROM option_pool WHERE instruction_hash != ? ORDER BY id DESC LIMIT ?",
            [_instruction_hash(exclude_instruction), limit],
        )

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
SHARED_POOL_ENV = "JUDGE_MCP_SHARED_OPTION_POOL"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def shared_pool_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the stored option pool (earlier calls of any client) may be drawn from: JUDGE_MCP_SHARED_OPTION_POOL
    = 1/true/yes/on; unset or 0/false/no/off: built-in pool only. Any other value is an error naming the variable."""
    raw = (os.environ if environ is None else environ).get(SHARED_POOL_ENV, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    from judge_mcp.args import InputError

    raise InputError(f"{SHARED_POOL_ENV} must be 1 or 0 (true/false), got {raw!r}")


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


def choose_unrelated(store: Store | None, instruction: str, options: list[str], shared: bool | None = None) -> UnrelatedOption:
    """Draw the unrelated option: from the SQLite option pool when sharing it is enabled (`shared`, by default the
    JUDGE_MCP_SHARED_OPTION_POOL setting) and it has a usable entry, else the built-in pool. Reads the database:
    async callers run it in a worker thread."""
    seed = call_seed(instruction, options)
    if shared is None:
        shared = shared_pool_enabled()
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
