"""Where the server's CPU goes per tool call: a default compare_pair, profiled inside `judge-mcp serve`.

    .venv/bin/python -m perf.profile_call [--calls 300] [--top 20]     (from the checkout's root)
    .venv/bin/python -m perf.profile_call --compare OLD_CHECKOUT [--calls 300] [--rounds 6]

With --compare (e.g. a `git archive` of main unpacked in a folder), only judge-mcp's own CPU per call in process
(`ours_in_process`: `App.run` of a default compare_pair against its two backend requests sent directly) is measured,
for this checkout and OLD_CHECKOUT alternately, each run in a fresh process, the order flipped every round: the
least noisy before/after on a loaded machine. Printed: each run with the load average, then the medians.

The server under test runs in its own process (`judge-mcp serve`, streamable HTTP with a bearer token)
against testkit/scripted_servers.py in a third process at zero latency, driven by the official MCP client from this one. So
what is measured is the server's CPU alone: no client, no backend. Each call is a default compare_pair (both
orders, sop template, distinct prompts: no cache hits). The same is done for perf/noop_server.py (the SDK floor:
the same SDK and transport serving a tool that does nothing, `noop`, and one of compare_pair's shape that returns a
fixed result, `shaped`), so the table shows what compare_pair adds per package.

Printed: the server process's CPU per call (utime + stime from /proc, no profiler), for judge-mcp and for the
floor; then a cProfile of the server's main thread (timer: that thread's CPU time, so waiting is not counted),
its own time (tottime) summed per package (the groups add up to the whole), the heaviest functions by own time,
and judge-mcp's own functions by cumulative time. The profiler's timer is the wall clock (a CPU-time timer costs
far more than the calls it times); the time the event loop sleeps in epoll is idle, not CPU, and is left out.
Worker threads (SQLite runs in them) are not in the profile; their CPU is the process CPU minus the main thread's,
printed as its own line. The profiler slows every Python call, so read the shares, not the absolute times.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import runpy
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent  # this checkout

# This module runs three ways: imported (by perf/ratios.py), as the parent (`python -m perf.profile_call`), and as the
# children it starts (`python perf/profile_call.py --child|--ours`), whose judge_mcp is the checkout under test, put
# first by PYTHONPATH in their environment. So nothing at module level imports judge_mcp: a child would import it
# before that choice mattered, and an older checkout may not have the modules this one uses.

# (group, substrings of a function's file path or of a builtin's name), first match wins
GROUPS = (
    ("ours (judge_mcp)", ("/judge_mcp/",)),
    ("mcp SDK", ("/mcp/", "/mcp_types/")),
    ("pydantic", ("/pydantic/", "/pydantic_core/", "pydantic_core")),
    ("aiohttp (backend client; httpx in older checkouts)", ("/aiohttp/", "/yarl/", "/multidict/", "/aiohappyeyeballs/", "/propcache/",
                                                            "/frozenlist/", "/aiosignal/", "/httpx/", "/httpcore/", "/h11/")),
    ("uvicorn/starlette (HTTP server)", ("/uvicorn/", "/starlette/", "/sse_starlette/")),
    ("sqlite3 (+ sqlite_utils, thread hand-off)", ("sqlite3", "/sqlite_utils/", "threading.py", "/concurrent/", "queue.py", "_thread")),
    ("json", ("/json/", "_json", "json.")),
    ("anyio/asyncio (event loop)", ("/anyio/", "/asyncio/", "selectors.py", "select.epoll", "/sniffio/", "socket.py", "_socket", "_asyncio", "ssl.py")),
)


def group_of(path: str, name: str) -> str:
    where = path if path != "~" else name
    for group, marks in GROUPS:
        if any(mark in where for mark in marks):
            return group
    if "site-packages" in path:
        return "other packages"
    return "other (stdlib, builtins)"


def label(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name
    if "/judge_mcp/" in path:
        short = "judge_mcp/" + path.split("/judge_mcp/")[-1]
    elif "site-packages/" in path:
        short = path.split("site-packages/")[-1]
    else:
        short = path.rsplit("/", 1)[-1]
    return f"{short}:{line}({name})"


# ---- the child: a server with a profiler switched on and off by SIGUSR1 ------------------------------------------
def child(out: str, argv: list[str]) -> None:
    profiler = cProfile.Profile()  # the default (wall-clock) timer: a CPU-time timer costs more than what it measures
    state = {"on": False, "t0": 0.0, "p0": 0.0}

    def toggle(signum: int, frame: object) -> None:
        if not state["on"]:
            state.update(on=True, t0=time.thread_time(), p0=time.process_time())
            profiler.enable()
        else:
            profiler.disable()
            thread, process = time.thread_time() - state["t0"], time.process_time() - state["p0"]
            profiler.dump_stats(out)
            Path(out + ".json").write_text(json.dumps({"main_thread_s": thread, "process_s": process}))
            state["on"] = False

    signal.signal(signal.SIGUSR1, toggle)
    sys.argv = argv
    if argv[0].endswith(".py"):
        runpy.run_path(argv[0], run_name="__main__")
    else:
        from judge_mcp.cli.main import main

        sys.exit(main(argv[1:]))


def trimmed_mean(values: list[float], cut: float = 0.1) -> float:
    """The mean without the lowest and highest `cut` share of the values."""
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    kept = ordered[k : len(ordered) - k] or ordered
    return sum(kept) / len(kept)


# ---- judge-mcp's own CPU, in process --------------------------------------------------------------------------------
async def ours_in_process(base_url: str, calls: int, rounds: int) -> dict[str, float]:
    """CPU per call (this process, all threads, in ms) of `App.run` for a default compare_pair, and of the same two
    requests sent straight to the backend, interleaved `rounds` times: the difference is judge-mcp's own work per
    tool call (method, cache, call records, SQLite, tasks), without the MCP SDK and transport and without the HTTP client's."""
    import tempfile

    from judge_mcp.runtime.app import App
    from judge_mcp.backends.base import user
    from judge_mcp.config.settings import load_settings
    from judge_mcp.methods import pairwise
    from testkit.runs import run_once

    with tempfile.TemporaryDirectory() as tmp:
        app = App(load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted",
                                 "JUDGE_MCP_DB": str(Path(tmp) / "ours.db")}))
        backend = app.backend(None)
        system, schema = pairwise.system_prompt("worse", "sop", True), pairwise.verdict_schema("sop")

        async def tool_call() -> None:
            inputs = dict(prompt=f"q {uuid.uuid4().hex}", response_a="a", response_b="b", goal="worse", template="sop", swap=True, max_tokens=None)
            await run_once(app, "compare_pair", inputs, lambda j: pairwise.compare_pair(j, **inputs))

        async def two_calls() -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(backend.complete, user(pairwise.user_prompt(f"q {uuid.uuid4().hex}", "a", "b"), system=system, json_schema=schema, max_tokens=pairwise.MAX_TOKENS["sop"]))

        for fn in (tool_call, two_calls):
            for _ in range(20):
                await fn()
        gc.collect()  # as `judge-mcp serve` does after start-up (runtime/startup.py's settle_heap), for every checkout measured
        gc.freeze()
        # Interleaved call by call, so a drift in the machine's load hits both alike; each kind's CPU per call is the
        # mean of its calls without the slowest and fastest 10% (a preempted call, an unlucky hand-off), which keeps
        # the garbage collector's and the worker threads' share but not the outliers of a shared machine.
        out: dict[str, list[float]] = {"tool": [], "direct": []}
        clock = time.process_time
        for _ in range(rounds * calls):
            for name, fn in (("tool", tool_call), ("direct", two_calls)):
                start = clock()
                await fn()
                out[name].append(clock() - start)
        await app.aclose()
    tool, direct = (trimmed_mean(out[k]) * 1000 for k in ("tool", "direct"))
    return {"tool": tool, "direct": direct, "ours": tool - direct}


def ours_child(base_url: str, calls: int, rounds: int) -> None:
    print(json.dumps(anyio.run(ours_in_process, base_url, calls, rounds)))


def ours_of(root: Path, base_url: str, calls: int, rounds: int) -> dict[str, float]:
    """ours_in_process in a fresh process running `root`'s judge_mcp."""
    out = subprocess.run([sys.executable, __file__, "--ours", base_url, str(calls), str(rounds)], env={**os.environ, "PYTHONPATH": str(root)},
                         cwd=str(root), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the parent ----------------------------------------------------------------------------------------------------
def server_env(base_url: str, db: Path | str, **extra: str) -> dict[str, str]:
    """The environment of a `judge-mcp` server process talking to an OpenAI-compatible backend at `base_url`, with its
    database at `db`: this process's environment without judge-mcp or provider settings, plus these and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    return {**env, "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted-model",
            "JUDGE_MCP_DB": str(db), **extra}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_port(port: int) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            await anyio.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


async def measure(server_argv: list[str], env: dict[str, str], tool: str, args: dict, calls: int, out: str | None = None,
                  root: Path = ROOT, rounds: int = 1, fresh_key: str = "prompt", warm_up: int = 30) -> dict:
    """Server CPU and round-trip wall time per call without the profiler (`rounds` runs of `calls` calls each, for
    medians), then, with `out`, a profiled run of the same calls whose stats go to `out`. `root`: the checkout whose
    judge_mcp the server runs. Each call's argument `fresh_key` is a new text (no call-cache hits)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    token = "profile-" + uuid.uuid4().hex
    env = {**env, "JUDGE_MCP_HTTP_TOKEN": token, "PYTHONPATH": str(root)}
    argv = [a.replace("PORT", str(port)) for a in server_argv]
    proc = subprocess.Popen([sys.executable, __file__, "--child", out or "-", "--", *argv], env=env, cwd=str(root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_port(port)
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60) as http:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:

                async def run(n: int) -> float:
                    start = time.perf_counter()
                    for _ in range(n):
                        r = await client.call_tool(tool, {**args, fresh_key: f"q {uuid.uuid4().hex}"})
                        assert not r.is_error, r.content
                    return (time.perf_counter() - start) / n

                await run(warm_up)  # warm up: imports, connection pool, templates
                cpus, walls = [], []
                for _ in range(rounds):
                    c0 = cpu_s(proc.pid)
                    walls.append(await run(calls))
                    cpus.append((cpu_s(proc.pid) - c0) / calls)
                if out is None:
                    return {"cpu": statistics.median(cpus), "wall": statistics.median(walls), "cpus": cpus, "walls": walls}
                cpu, wall = statistics.median(cpus), statistics.median(walls)
                proc.send_signal(signal.SIGUSR1)
                await anyio.sleep(0.2)
                await run(calls)
                proc.send_signal(signal.SIGUSR1)
                for _ in range(100):
                    if Path(out + ".json").exists():
                        break
                    await anyio.sleep(0.1)
        return {"cpu": cpu, "wall": wall, **json.loads(Path(out + ".json").read_text())}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def grouped(stats_file: str) -> tuple[pstats.Stats, dict[str, float], float]:
    """The stats without epoll's idle wait, their own time summed per group, and the total."""
    stats = pstats.Stats(stats_file)
    for func in [f for f in stats.stats if f[2] == "<method 'poll' of 'select.epoll' objects>"]:
        del stats.stats[func]
    groups: dict[str, float] = {}
    for func, (cc, nc, tt, ct, callers) in stats.stats.items():
        g = group_of(func[0], func[2])
        groups[g] = groups.get(g, 0.0) + tt
    return stats, groups, sum(groups.values())


def report(stats_file: str, shaped_file: str, calls: int, top: int, measured: dict, shaped: dict, floor: dict) -> None:
    stats, groups, total = grouped(stats_file)
    _, shaped_groups, shaped_total = grouped(shaped_file)
    ms = lambda s: s / calls * 1000  # noqa: E731
    workers = measured["process_s"] - measured["main_thread_s"]
    shaped_workers = shaped["process_s"] - shaped["main_thread_s"]
    print(f"server CPU per call, no profiler: compare_pair {measured['cpu'] * 1000:.2f} ms, the same tool shape returning a fixed result "
          f"{shaped['cpu'] * 1000:.2f} ms, do-nothing tool {floor['cpu'] * 1000:.2f} ms")
    print(f"round trip per call (wall, client side): compare_pair {measured['wall'] * 1000:.2f} ms, shaped {shaped['wall'] * 1000:.2f} ms, "
          f"do-nothing {floor['wall'] * 1000:.2f} ms")
    print(f"under the profiler (CPU per call): main thread {ms(measured['main_thread_s']):.3f} ms, worker threads {ms(workers):.3f} ms "
          f"(shaped: {ms(shaped['main_thread_s']):.3f} / {ms(shaped_workers):.3f} ms)\n")
    print("| package (server main thread, own time under the profiler) | compare_pair per call | share | fixed-result tool of the same shape | difference |")
    print("|---|---|---|---|---|")
    for g, tt in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"| {g} | {ms(tt):.3f} ms | {tt / total:.1%} | {ms(shaped_groups.get(g, 0.0)):.3f} ms | {ms(tt - shaped_groups.get(g, 0.0)):+.3f} ms |")
    print(f"| total, main thread | {ms(total):.3f} ms | 100% | {ms(shaped_total):.3f} ms | {ms(total - shaped_total):+.3f} ms |")
    print(f"| worker threads (SQLite reads and writes; not profiled) | {ms(workers):.3f} ms | | {ms(shaped_workers):.3f} ms | {ms(workers - shaped_workers):+.3f} ms |")
    print(f"\nTop {top} functions by own time (tottime), per call:")
    for func, (cc, nc, tt, ct, callers) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"  {ms(tt):7.3f} ms  {nc / calls:6.1f} calls  [{group_of(func[0], func[2])}] {label(func)}")
    ours = [kv for kv in stats.stats.items() if "/judge_mcp/" in kv[0][0]]
    print("\njudge-mcp's functions by cumulative time (cumtime, includes what they call; a coroutine counts each resumption as a call), per call:")
    for func, (cc, nc, tt, ct, callers) in sorted(ours, key=lambda kv: -kv[1][3])[:top]:
        print(f"  cum {ms(ct):7.3f} ms  own {ms(tt):6.3f} ms  {nc / calls:5.1f} calls  {label(func)}")


def compare(base: Path, calls: int, rounds: int) -> None:
    """`ours_in_process` for this checkout and `base`, alternately (see the module doc)."""
    from testkit.scripted_servers import ExternalScripted
    from testkit.scripted_judges import UNIVERSAL_ANSWER

    runs: dict[str, list[dict[str, float]]] = {"this checkout": [], str(base): []}
    with ExternalScripted(UNIVERSAL_ANSWER, 0.0) as backend:
        for r in range(rounds):
            order = [("this checkout", ROOT), (str(base), base)]
            for name, root in order if r % 2 == 0 else order[::-1]:
                out = ours_of(root, backend.base_url, calls, 1)
                runs[name].append(out)
                print(f"round {r + 1}: {name}: App.run {out['tool']:.3f} ms, two requests sent directly {out['direct']:.3f} ms, "
                      f"judge-mcp's own {out['ours']:.3f} ms (load average {os.getloadavg()[0]:.2f})", flush=True)
    medians = {name: {k: statistics.median(o[k] for o in outs) for k in ("tool", "direct", "ours")} for name, outs in runs.items()}
    for name, m in medians.items():
        print(f"median, {name}: App.run {m['tool']:.3f} ms, direct {m['direct']:.3f} ms, own {m['ours']:.3f} ms")
    this, old = medians["this checkout"], medians[str(base)]
    ratio = {k: this[k] / old[k] for k in this}
    print(f"this checkout / {base}: App.run {ratio['tool']:.3f}, direct {ratio['direct']:.3f}, own {ratio['ours']:.3f}")


async def main(calls: int, top: int, save: str | None) -> None:
    from testkit.scripted_servers import ExternalScripted
    from testkit.scripted_judges import UNIVERSAL_ANSWER

    print(f"load average {os.getloadavg()[0]:.2f}; {calls} calls each, zero-latency scripted backend, streamable HTTP")
    with tempfile.TemporaryDirectory() as tmp, ExternalScripted(UNIVERSAL_ANSWER, 0.0) as backend:
        env = server_env(backend.base_url, Path(tmp) / "profile.db")
        noop = [str(ROOT / "perf" / "noop_server.py"), "http", "PORT"]
        args = {"response_a": "a", "response_b": "b"}
        floor = await measure(noop, env, "noop", {}, calls)
        shaped = await measure(noop, env, "shaped", args, calls, str(Path(tmp) / "shaped.prof"))
        measured = await measure(["judge-mcp", "serve", "--transport", "http", "--port", "PORT"], env, "compare_pair", args, calls, str(Path(tmp) / "judge.prof"))
        report(str(Path(tmp) / "judge.prof"), str(Path(tmp) / "shaped.prof"), calls, top, measured, shaped, floor)
        if save:
            Path(save).write_bytes((Path(tmp) / "judge.prof").read_bytes())


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[4:])
    elif len(sys.argv) > 2 and sys.argv[1] == "--ours":
        ours_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--calls", type=int, default=300)
        parser.add_argument("--top", type=int, default=20)
        parser.add_argument("--save", help="keep the server's cProfile stats in this file (for pstats)")
        parser.add_argument("--compare", type=Path, help="another checkout: judge-mcp's own CPU per call in process, alternately with it")
        parser.add_argument("--rounds", type=int, default=6, help="alternating rounds (with --compare)")
        args = parser.parse_args()
        if args.compare is not None:
            compare(args.compare.resolve(), args.calls, args.rounds)
        else:
            anyio.run(main, args.calls, args.top, args.save)
