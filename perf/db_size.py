"""Database bytes per verdict: N compare_pair calls (distinct pairs, answers of --chars characters of prose each) through the
real App against a scripted OpenAI-compatible server on loopback; prints the file size after a WAL checkpoint, per
verdict (the whole file, and its growth over a database that has had no call, divided by N), and how many times one
judged answer's text and one model reply are stored.

    .venv/bin/python -m perf.db_size --calls 50 --chars 2000 [--root PATH]     (from the checkout's root)
    .venv/bin/python -m perf.db_size --calls 1 --reply-chars 7500000 [--root PATH]

Prose here is words drawn at random (seeded) from a vocabulary of a few thousand made-up words: text that zlib
compresses about as well as English (2.3x; this README: 2.7x), not a repeated string any compressor folds to nothing.
The judged answers are such prose, a different one each; with `--reply-chars N` the judge's every reply is a valid
verdict whose evaluation is N characters of it, a different one per request (else its replies are short, 75
characters).

The calls run in a child process whose judge_mcp is `--root`'s (first on its PYTHONPATH; default this checkout), so
another checkout (e.g. a worktree of an older commit) is measured with this script and this checkout's scripted
server and judge (judge_mcp/bench/scripted_judges.UniversalJudge, served from this process): before and after by the
same procedure in one go.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent.parent
MARKER = "UNIQUEMARKER0"
REPLY_MARKER = "REPLYMARKER0"


async def judge_pairs(base_url: str, db: str, calls: int, chars: int) -> None:
    """In the child: `calls` compare_pair calls through the App of the judge_mcp its PYTHONPATH names."""
    from judge_mcp.runtime.app import App
    from judge_mcp.config.settings import load_settings
    from judge_mcp.methods import registry

    env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": db}
    app = App(load_settings(env))
    try:
        for k in range(calls):
            a = f"{MARKER if k == 0 else ''} Sydney {k}. {prose(chars, seed=-2 * k - 1)}"[:chars]
            b = f"Canberra {k}. {prose(chars, seed=-2 * k - 2)}"[:chars]
            inputs = {"prompt": f"What is the capital of Australia? ({k})", "response_a": a, "response_b": b}
            await registry.call(app, "compare_pair", inputs)
    finally:
        await app.aclose()


def prose(chars: int, seed: int = 0) -> str:
    """`chars` characters of made-up words drawn at random from a fixed vocabulary (compresses like prose)."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 1, 1, 2, 1, 1, 1, 1, 1]
    vocabulary = ["".join(rng.choices(letters, weights, k=rng.randint(2, 9))) for _ in range(4000)]
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(vocabulary) + rng.choices([" ", ", ", ". "], [20, 2, 1])[0]
        words.append(word)
        size += len(word)
    return "".join(words)[:chars]


class LongReplies:
    """UniversalJudge, with an evaluation of `chars` characters of prose in every compare_pair reply, a different one
    per request (REPLY_MARKER first, so the copies can be counted)."""

    def __init__(self, chars: int):
        from testkit.scripted_judges import UniversalJudge

        self.judge = UniversalJudge()
        self.chars = chars
        self.sent = 0

    def __call__(self, payload: dict[str, Any]) -> Any:
        answer = self.judge(payload)
        if isinstance(answer, str) and answer.startswith("{") and '"verdict"' in answer:
            self.sent += 1
            return json.dumps({**json.loads(answer), "evaluation": f"{REPLY_MARKER} " + prose(self.chars, seed=self.sent)})
        return answer


def count(value: Any, marker: str) -> int:
    """How often `marker` occurs in a stored value (text, or a zlib-compressed text)."""
    if isinstance(value, bytes):
        try:
            value = zlib.decompress(value).decode("utf-8")
        except zlib.error:
            value = value.decode("utf-8", "replace")
    return str(value).count(marker)


def copies_and_size(db: Path) -> tuple[int, int, int]:
    """How many times MARKER and REPLY_MARKER are stored (in any table), and the file's size, after a WAL checkpoint."""
    conn = sqlite3.connect(str(db))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    answers = replies = 0
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            for value in row:
                answers += count(value, MARKER)
                replies += count(value, REPLY_MARKER)
    conn.close()
    return answers, replies, db.stat().st_size


def run(root: Path, base_url: str, db: Path, calls: int, chars: int) -> tuple[int, int, int]:
    child = [sys.executable, __file__, "--child", base_url, str(db), "--calls", str(calls), "--chars", str(chars)]
    subprocess.run(child, cwd=str(root), env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    return copies_and_size(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--chars", type=int, default=2000, help="characters per judged answer")
    parser.add_argument("--reply-chars", type=int, default=0, help="make every reply this long (0: the judge's short replies)")
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout whose judge_mcp is measured")
    parser.add_argument("--child", nargs=2, metavar=("BASE_URL", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the parent's first child judges nothing (--calls 0): the unused database
        anyio.run(judge_pairs, args.child[0], args.child[1], args.calls, args.chars)
        return
    if args.calls < 1 or args.chars < 1 or args.reply_chars < 0:
        parser.error("--calls and --chars must be at least 1, --reply-chars at least 0")
    from testkit.scripted_servers import ScriptedServer
    from testkit.scripted_judges import UniversalJudge

    root = args.root.resolve()
    responder = LongReplies(args.reply_chars) if args.reply_chars else UniversalJudge()
    with ScriptedServer(responder) as server, tempfile.TemporaryDirectory() as tmp:
        _, _, empty = run(root, server.base_url, Path(tmp) / "empty.db", 0, args.chars)
        answers, replies, size = run(root, server.base_url, Path(tmp) / "judge.db", args.calls, args.chars)
    sent = getattr(responder, "sent", 0)
    print(f"root={root} calls={args.calls} chars_per_answer={args.chars} reply_chars={args.reply_chars or 'short'}")
    print(
        f"database bytes: {size:,}  per verdict: {size / args.calls:,.0f}  growth over an unused database: {size - empty:,}"
        f" ({(size - empty) / args.calls:,.0f} per verdict)  copies of one judged answer: {answers}"
        + (f"  copies of the {sent} long replies: {replies} (each {args.reply_chars:,} characters)" if args.reply_chars else "")
    )


if __name__ == "__main__":
    main()
