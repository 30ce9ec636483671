"""Fan-out of the largest judgments, this checkout against another, in alternating fresh processes.

    .venv/bin/python -m perf.fan_out [--base OLD_CHECKOUT] [--rounds 4] [--repeats 9] [--latency 0.2]   (from the checkout's root)

Not a test: it prints figures. Each round runs every checkout in a process of its own (`python perf/fan_out.py
--child` with the checkout first on PYTHONPATH, so each imports its own `judge_mcp`) against the same scripted backend
(testkit/scripted_servers.py in a third process, fixed latency). A process
runs, `--repeats` times and interleaved call by call: one backend call, `infer_instruction_reward` with 16
responses, `grade_score_options` with 10 options, `score_response` with 5 criteria x 2 samples and with 10 criteria x 3 samples (30
calls), and `compare_pair` over two agent runs of 100 messages each (trajectories: tool calls and their results) as a tool
call runs them (runtime/run.py, default concurrency), and 16 requests through the backend alone. Printed per round and checkout: the median wall
time of each as a ratio to the one backend call, and the client CPU per call (this process, all threads).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def fresh() -> str:
    return uuid.uuid4().hex[:8]


def trajectory(n: int, chars: int = 300) -> list[dict]:
    """`n` messages of an agent run (as perf/transcript_cost.py builds them): an assistant turn with one tool call,
    then the tool's result of `chars` characters; distinct per call, so no answer comes from the call cache."""
    out: list[dict] = []
    for k in range(n // 2):
        call_id, tag = f"call_{k}", fresh()
        out.append({"role": "assistant", "content": f"Step {k}: reading the log again ({tag}).",
                    "tool_calls": [{"id": call_id, "name": "read_file", "arguments": {"path": f"logs/job_{k}.txt"}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": (f"line {k} of the job's log {tag}. " * chars)[:chars]})
    return out


async def measure(base_url: str, repeats: int) -> dict[str, dict[str, float]]:
    """In the child: the rows above for the judge_mcp its PYTHONPATH names."""
    from judge_mcp.runtime.app import App
    from judge_mcp.backends.base import user
    from judge_mcp.config.settings import load_settings
    from judge_mcp.runtime.run import run_method

    gc.collect()
    gc.freeze()  # as `judge-mcp serve` does once started
    with tempfile.TemporaryDirectory() as tmp:
        app = App(load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted",
                                 "JUDGE_MCP_DB": str(Path(tmp) / "fan.db")}))
        backend = app.backend(None)

        async def one() -> None:
            await backend.complete(user(f"direct {fresh()}"))

        async def flip16() -> None:
            await run_method(app, "infer_instruction_reward", dict(instruction="Write a haiku", responses=[f"response {c} {fresh()}" for c in range(16)]))

        async def grade10() -> None:
            await run_method(app, "grade_score_options", dict(instruction=f"q {fresh()}", options=[f"option {c} {fresh()}" for c in range(10)]))

        async def score5x2() -> None:
            await run_method(app, "score_response", dict(instruction=f"q {fresh()}", response=f"r {fresh()}",
                                                            criteria=[{"name": f"c{c}"} for c in range(5)], samples=2))

        async def score10x3() -> None:
            await run_method(app, "score_response", dict(instruction=f"q {fresh()}", response=f"r {fresh()}",
                                                            criteria=[{"name": f"c{c}"} for c in range(10)], samples=3))

        async def pair_traj100() -> None:
            await run_method(app, "compare_pair", dict(prompt=f"Fix the build {fresh()}", response_a=trajectory(100), response_b=trajectory(100)))

        async def direct16() -> None:
            await asyncio.gather(*(one() for _ in range(16)))

        rows = {"one backend call": one, "FLIP n = 16": flip16, "Grade Score n = 10": grade10, "score_response 5 criteria x 2 samples": score5x2,
                "score_response 10 criteria x 3 samples": score10x3, "compare_pair, two 100-message trajectories": pair_traj100,
                "16 requests, backend alone": direct16}
        for fn in rows.values():  # warm: connections, prompt caches
            await fn()
        walls: dict[str, list[float]] = {name: [] for name in rows}
        cpus: dict[str, float] = {name: 0.0 for name in rows}
        for _ in range(repeats):
            for name, fn in rows.items():
                cpu, start = time.process_time(), time.perf_counter()
                await fn()
                walls[name].append(time.perf_counter() - start)
                cpus[name] += time.process_time() - cpu
        await app.aclose()
    unit = statistics.median(walls["one backend call"])
    return {name: {"ratio": statistics.median(walls[name]) / unit, "cpu_ms": cpus[name] / repeats * 1000.0} for name in rows}


def run_child(root: Path, base_url: str, repeats: int) -> dict[str, dict[str, float]]:
    out = subprocess.run([sys.executable, __file__, "--child", base_url, str(repeats)], cwd=str(root), env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="an older checkout (e.g. `git archive` of a commit, unpacked)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--latency", type=float, default=0.2, help="scripted backend latency in seconds")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child[0], int(args.child[1])))))
        return
    from testkit.scripted_servers import ExternalScripted  # this checkout's scripted server, whatever the children run
    from testkit.scripted_judges import UNIVERSAL_ANSWER

    roots = {"this checkout": HERE} | ({"base": args.base.resolve()} if args.base else {})
    print(f"fan-out at the default concurrency; scripted backend latency {args.latency * 1000:.0f} ms; {args.rounds} rounds of "
          f"{args.repeats}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with ExternalScripted(UNIVERSAL_ANSWER, args.latency) as server:
        for r in range(args.rounds):
            for label, root in roots.items():
                rows = run_child(root, server.base_url, args.repeats)
                cells = "   ".join(f"{name} {row['ratio']:.3f} ({row['cpu_ms']:.1f} ms)" for name, row in rows.items() if name != "one backend call")
                print(f"round {r + 1} {label:<14} {cells}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
