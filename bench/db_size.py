"""Database bytes per verdict: N compare_pair calls (distinct pairs, answers of --chars characters each) through the
real App against a scripted OpenAI-compatible server on loopback; prints the file size after a WAL checkpoint,
per verdict, and how many times one judged answer's text is stored.

    python bench/db_size.py --calls 50 --chars 2000 [--root PATH]

`--root` runs another checkout's code (e.g. a worktree of an older commit) with this script and test server, so
before and after are measured by the same procedure in one go.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout whose judge_mcp is measured")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))  # tests.scripted, tests.judge_script: the same server and judge either way
    sys.path.insert(0, str(args.root.resolve()))
    from judge_mcp.app import App
    from judge_mcp.config import load_settings
    from judge_mcp.methods import registry
    from tests.judge_script import UniversalJudge
    from tests.scripted import ScriptedServer

    with ScriptedServer(UniversalJudge()) as server, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "judge.db"
        env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": str(db)}
        marker = "UNIQUEMARKER0"
        filler = "lorem ipsum dolor sit amet " * (args.chars // 27 + 1)

        async def run() -> None:
            app = App(load_settings(env))
            try:
                for k in range(args.calls):
                    a = f"{marker if k == 0 else ''} Sydney {k}. {filler}"[: args.chars]
                    b = f"Canberra {k}. {filler}"[: args.chars]
                    inputs = {"prompt": f"What is the capital of Australia? ({k})", "response_a": a, "response_b": b}
                    await registry.call(app, "compare_pair", inputs)
            finally:
                await app.aclose()

        anyio.run(run)
        conn = sqlite3.connect(str(db))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        copies = sum(
            str(value).count(marker)
            for table, cols in (("verdicts", "inputs, output, calls"), ("call_cache", "request, response"))
            for row in conn.execute(f"SELECT {cols} FROM {table}")
            for value in row
        )
        conn.close()
        size = db.stat().st_size
    print(f"root={args.root} calls={args.calls} chars_per_answer={args.chars}")
    print(f"database bytes: {size:,}  per verdict: {size / args.calls:,.0f}  copies of one judged answer: {copies}")


if __name__ == "__main__":
    main()
