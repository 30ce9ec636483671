"""Database bytes per verdict: N compare_pair calls (distinct pairs, answers of --chars characters each) through the
real App against a scripted OpenAI-compatible server on loopback; prints the file size after a WAL checkpoint,
per verdict, and how many times one judged answer's text is stored.

    .venv/bin/python -m bench.db_size --calls 50 --chars 2000 [--root PATH]     (from the checkout's root)

The calls run in a child process whose judge_mcp is `--root`'s (first on its PYTHONPATH; default this checkout), so
another checkout (e.g. a worktree of an older commit) is measured with this script and this checkout's scripted
server and judge (judge_mcp/bench/scripted_judges.UniversalJudge, served from this process): before and after by the
same procedure in one go.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent.parent
MARKER = "UNIQUEMARKER0"


async def judge_pairs(base_url: str, db: str, calls: int, chars: int) -> None:
    """In the child: `calls` compare_pair calls through the App of the judge_mcp its PYTHONPATH names."""
    from judge_mcp.app import App
    from judge_mcp.config import load_settings
    from judge_mcp.methods import registry

    env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": db}
    filler = "lorem ipsum dolor sit amet " * (chars // 27 + 1)
    app = App(load_settings(env))
    try:
        for k in range(calls):
            a = f"{MARKER if k == 0 else ''} Sydney {k}. {filler}"[:chars]
            b = f"Canberra {k}. {filler}"[:chars]
            inputs = {"prompt": f"What is the capital of Australia? ({k})", "response_a": a, "response_b": b}
            await registry.call(app, "compare_pair", inputs)
    finally:
        await app.aclose()


def copies_and_size(db: Path) -> tuple[int, int]:
    """How many times MARKER is stored, and the file's size, after a WAL checkpoint."""
    conn = sqlite3.connect(str(db))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copies = sum(
        str(value).count(MARKER)
        for table, cols in (("verdicts", "inputs, output, calls"), ("call_cache", "request, response"))
        for row in conn.execute(f"SELECT {cols} FROM {table}")
        for value in row
    )
    conn.close()
    return copies, db.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout whose judge_mcp is measured")
    parser.add_argument("--child", nargs=2, metavar=("BASE_URL", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        anyio.run(judge_pairs, args.child[0], args.child[1], args.calls, args.chars)
        return
    from judge_mcp.bench.scripted import ScriptedServer
    from judge_mcp.bench.scripted_judges import UniversalJudge

    root = args.root.resolve()
    with ScriptedServer(UniversalJudge()) as server, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "judge.db"
        child = [sys.executable, __file__, "--child", server.base_url, str(db), "--calls", str(args.calls), "--chars", str(args.chars)]
        subprocess.run(child, cwd=str(root), env={**os.environ, "PYTHONPATH": str(root)}, check=True)
        copies, size = copies_and_size(db)
    print(f"root={root} calls={args.calls} chars_per_answer={args.chars}")
    print(f"database bytes: {size:,}  per verdict: {size / args.calls:,.0f}  copies of one judged answer: {copies}")


if __name__ == "__main__":
    main()
