"""`judge-mcp demo`: start the server as a subprocess, connect the official MCP client over stdio, call every tool
once on a short built-in example with the configured backend, and say in plain words what went in and what came
out, with progress while a call runs. Exit 0 only when every call succeeded (2 on a configuration error).

On the embedded model (the default backend) the demo caps every answer at DEMO_MAX_OUTPUT_TOKENS tokens
(JUDGE_MCP_MAX_OUTPUT_TOKENS, set for the demo's server only): the 135M model writes ~20 tokens/s on 2 cores, and the
demo is meant to finish in about a minute. Real judges keep their budgets."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import time
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from judge_mcp.cli.demo_text import RENDERERS, run_text, small_model_note

DEMO_MAX_OUTPUT_TOKENS = 128  # the embedded model only: answers are short, so JSON answers still close within it
TICK_S = 10.0  # with no progress news for this long, say the call is still running
REAL_MODEL_LINE = (
    "JUDGE_MCP_BACKEND=openai JUDGE_MCP_BASE_URL=http://127.0.0.1:11434/v1 JUDGE_MCP_MODEL=qwen2.5:7b-instruct {command} demo"
)


def command_name(argv0: str | None = None) -> str:
    """How the user can run this judge-mcp again: `judge-mcp` when that is on PATH and is this one, else the path
    it was started by (`.venv/bin/judge-mcp` in a checkout, where `judge-mcp` alone is not on PATH)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if not argv0 or not os.path.basename(argv0).startswith("judge-mcp"):  # python -m judge_mcp
        return f"{sys.executable} -m judge_mcp"
    found = shutil.which("judge-mcp")
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return "judge-mcp"
    return argv0 if os.sep in argv0 else f"./{argv0}"

QUESTION = "What is the capital of Australia?"
# two agent runs on one task, as trajectories: the tool calls, what the tools returned, the final answer
RUN_A: list[dict[str, Any]] = [
    {"role": "assistant", "tool_calls": [{"id": "call_1", "name": "search", "arguments": '{"q": "biggest city in Australia"}'}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sydney is the biggest city in Australia."},
    {"role": "assistant", "content": "Sydney."},
]
RUN_B: list[dict[str, Any]] = [
    {"role": "assistant", "tool_calls": [{"id": "call_1", "name": "search", "arguments": '{"q": "capital of Australia"}'}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Canberra is the capital of Australia."},
    {"role": "assistant", "content": "Canberra."},
]


@dataclass(frozen=True)
class Step:
    tool: str
    purpose: str  # what the tool does, in a sentence
    arguments: dict[str, Any]
    shown: tuple[tuple[str, str], ...] = ()  # (label, text) of the inputs worth printing
    labels: str | None = None  # record_label: the earlier step whose verdict_id it labels


STEPS: tuple[Step, ...] = (
    Step(
        "compare_pair",
        "which of two answers is better. The model is asked which answer is WORSE (goal-reversed prompting), once "
        "with A shown first and once with B shown first; the verdict needs both orders to agree.",
        {"prompt": QUESTION, "response_a": "Sydney.", "response_b": "Canberra."},
        (("question", QUESTION), ("answer A", "Sydney."), ("answer B", "Canberra.")),
    ),
    Step(
        "infer_instruction_reward",
        "FLIP: from each response alone, the model guesses the instruction it answers; the reward (0 to 1) is how "
        "many words that guess shares with the real instruction (F1). No judge prompt, so no position to favour.",
        {
            "instruction": "Write a haiku about the sea.",
            "responses": [
                "Waves fold into foam, / salt wind carries gull voices, / the tide breathes and goes.",
                "Open Settings, then Account, to reset your password.",
            ],
        },
        (
            ("instruction", "Write a haiku about the sea."),
            ("response 0", "Waves fold into foam, / salt wind carries gull voices, / the tide breathes and goes."),
            ("response 1", "Open Settings, then Account, to reset your password."),
        ),
    ),
    Step(
        "grade_score_options",
        "pick the best of several options, asked once per rotation of their order. The Grade Score (0 to 1) is high "
        "when the same option wins in every order and the picks do not follow the positions.",
        {"instruction": QUESTION, "options": ["Sydney.", "Canberra.", "Melbourne."]},
        (("question", QUESTION), ("option 0", "Sydney."), ("option 1", "Canberra."), ("option 2", "Melbourne.")),
    ),
    Step(
        "score_response",
        "score one answer against your criteria, each criterion judged in its own call on a 1 to 10 scale (the FLIP "
        "paper's pointwise rating); the overall score is their weighted mean.",
        {"instruction": QUESTION, "response": "Canberra.",
         "criteria": [{"name": "correct", "description": "names the right city", "weight": 2}, {"name": "concise"}]},
        (("question", QUESTION), ("answer", "Canberra."), ("criteria", "correct (weight 2): names the right city; concise")),
    ),
    Step(
        "lwe_judge",
        "Learning While Evaluating: a plain judgment in both orders; only when the two disagree, the session's "
        "meta-prompt writes a prompt for this case, the model judges with it and critiques itself, and that feedback "
        "is stored to refine the meta-prompt every 4 such cases.",
        {
            "prompt": "Is 17 a prime number?",
            "response_a": "Yes: its only divisors are 1 and 17.",
            "response_b": "No, 17 = 3 x 6.",
            "session": "demo",
        },
        (
            ("question", "Is 17 a prime number?"),
            ("answer A", "Yes: its only divisors are 1 and 17."),
            ("answer B", "No, 17 = 3 x 6."),
        ),
    ),
    Step(
        "lwe_session_show",
        "read an LWE session: its meta-prompt versions and the feedback waiting (read-only).",
        {"session": "demo"},
    ),
    Step(
        "lwe_session",
        "manage an LWE session: show, reset, or roll back to a version (the demo only shows).",
        {"session": "demo", "action": "show"},
    ),
    Step(
        "record_label",
        "store the correct answer for a verdict by its verdict_id (here: B, Canberra, for the compare_pair verdict above); "
        "judge_stats then reports how often each judge agrees with such human labels.",
        {"label": "B", "note": "Canberra is the capital of Australia"},
        labels="compare_pair",
    ),
    Step(
        "compare_pair",
        "the same, for two agent runs given as trajectories (each tool call, its arguments and result, the final "
        "answer): the model reads each run as a transcript and is asked which run is WORSE, in both orders.",
        {"prompt": [{"role": "user", "content": QUESTION + " Use the search tool."}], "response_a": RUN_A, "response_b": RUN_B},
        (("task", QUESTION + " Use the search tool."), ("run A", run_text(RUN_A)), ("run B", run_text(RUN_B))),
    ),
    Step(
        "judge_stats",
        "bias telemetry from the verdict log: how often each judge names the first-shown answer, disagrees with itself or is unreadable.",
        {"last": 100},
    ),
)


def say(line: str = "", indent: int = 0) -> None:
    """Print wrapped at 110 columns with a hanging indent, at once (progress lines interleave with results)."""
    pad = " " * indent
    print(textwrap.fill(line, width=110, initial_indent=pad, subsequent_indent=pad + "  ") if line else "", flush=True)


class Progress:
    """Prints the server's progress messages while a call runs and, when none came for TICK_S, that it still runs."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.message: str | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if message and message != self.message:
            self.message = message
            self.last = time.monotonic()
            say(f"... {message} ({self.last - self.start:.0f} s)", 6)

    async def tick(self) -> None:
        while True:
            await anyio.sleep(1.0)
            now = time.monotonic()
            if now - self.last >= TICK_S:
                self.last = now
                say(f"... still working ({now - self.start:.0f} s)", 6)


async def call(client: Client, step: Step, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, float]:
    """(structured result, error text, seconds) of one tool call, with progress printed while it runs."""
    progress = Progress()
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress.tick)
        try:
            result = await client.call_tool(step.tool, arguments, progress_callback=progress)
        except Exception as exc:  # the transport failed: the server is gone
            tg.cancel_scope.cancel()
            return None, f"{type(exc).__name__}: {exc}", time.monotonic() - progress.start
        tg.cancel_scope.cancel()
    seconds = time.monotonic() - progress.start
    if result.is_error or result.structured_content is None:
        return None, " ".join(getattr(c, "text", "") for c in result.content), seconds
    return result.structured_content, None, seconds


def server_environment(backend_kind: str) -> tuple[dict[str, str], str | None]:
    """The server's environment (this one's), with the demo's answer cap for the embedded model unless one is set;
    and a note saying so (None when nothing was changed)."""
    env = dict(os.environ)
    if backend_kind != "local" or env.get("JUDGE_MCP_MAX_OUTPUT_TOKENS", "").strip():
        return env, None
    env["JUDGE_MCP_MAX_OUTPUT_TOKENS"] = str(DEMO_MAX_OUTPUT_TOKENS)
    return env, (
        f"Answers are capped at {DEMO_MAX_OUTPUT_TOKENS} tokens for this demo (JUDGE_MCP_MAX_OUTPUT_TOKENS); without the "
        "cap every backend, the embedded model included, gets each method's own budget (compare_pair 4,096 tokens)."
    )


def describe_backend(settings: Any) -> str:
    cfg = settings.default_backend
    if cfg.kind == "local":
        model = cfg.model or "the bundled SmolLM2-135M-Instruct"
        return f"the embedded model ({model}, run in this machine's CPU; set JUDGE_MCP_BACKEND to use another)"
    return f"{cfg.kind} at {cfg.base_url or 'the provider'}, model {cfg.model}"


def arguments_for(step: Step, results: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The step's arguments; record_label's with the verdict_id of the step it labels (None: that step gave none)."""
    if step.labels is None:
        return step.arguments
    verdict_id = (results.get(step.labels) or {}).get("verdict_id")
    return {**step.arguments, "verdict_id": verdict_id} if verdict_id else None


async def run_steps(client: Client, steps: tuple[Step, ...], local: bool) -> int:
    """Call each step's tool, print its inputs and its verdict in words; the number of failed calls."""
    failures = 0
    results: dict[str, dict[str, Any]] = {}
    for n, step in enumerate(steps, 1):
        say()
        say(f"[{n}/{len(steps)}] {step.tool}: {step.purpose}")
        for label, text in step.shown:
            say(f"{label}: {text}", 6)
        arguments = arguments_for(step, results)
        if arguments is None:
            failures += 1
            say(f"SKIPPED: the {step.labels} call gave no verdict to label", 6)
            continue
        data, error, seconds = await call(client, step, arguments)
        if error is not None or data is None:
            failures += 1
            say(f"FAILED after {seconds:.0f} s: {error or 'no structured result'}", 6)
            if error is not None and backend_failed(error):
                left = len(steps) - n
                say()
                say(f"Stopped at the first backend failure: the {left} step(s) left would fail the same way. Fix what the "
                    "message above names (the server running? the model name? the key?) and run the demo again.")
                return failures + left
            continue
        results[step.tool] = data
        for line in RENDERERS[step.tool](data):
            say(line, 6)
        usage = data.get("usage") or {}
        if "calls" in usage:
            cached = f", {usage.get('cached_calls', 0)} answered from the cache" if usage.get("cached_calls") else ""
            say(f"({seconds:.0f} s, {usage.get('calls', 0)} model calls{cached})", 6)
        note = small_model_note(step.tool, data) if local else None
        if note:
            say(note, 6)
    return failures


def backend_failed(error: str) -> bool:
    """Whether a tool's error is its backend failing (backends/errors.failure_message: "backend 'NAME' ... failed"),
    which every later judging step would repeat, rather than something about this one call."""
    prefix = "Error executing tool "
    if error.startswith(prefix):  # the SDK's "Error executing tool NAME: message"
        error = error[len(prefix):].split(": ", 1)[-1]
    return error.startswith("backend '")


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside `exc`'s groups (`exc` itself when it is not a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _broken_pipe(exc: BaseException) -> bool:
    """`exc`, or one exception of its group (the client's task group wraps what a step raised), is a BrokenPipeError."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_broken_pipe(inner) for inner in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


async def run_demo(scratch: bool = False) -> int:
    """The demo; `scratch`: its database is a temporary one (cmd_demo removes it at the end)."""
    # lazy: the demo's client process loads the settings only once it runs
    from judge_mcp.config.settings import settings_or_error

    settings = settings_or_error()
    if settings.config_error is not None:
        print(f"judge-mcp demo: configuration error: {settings.config_error}", file=sys.stderr)
        return 2
    local = settings.default_backend.kind == "local"
    env, cap_note = server_environment(settings.default_backend.kind)
    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=env)
    say(
        f"judge-mcp demo: starts `judge-mcp serve`, connects the MCP client to it over stdio and calls each of its "
        f"tools once. The judge is {describe_backend(settings)}."
    )
    if cap_note:
        say(cap_note)
    started = time.monotonic()
    try:
        async with Client(params, read_timeout_seconds=900) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            missing = sorted(set(tools) - {s.tool for s in STEPS})
            say(f"The server offers {len(tools)} tools: {', '.join(tools)}.")
            failures = await run_steps(client, STEPS, local) + len(missing)
    except Exception as exc:  # the server did not start or went away; its own message is on stderr above
        if _broken_pipe(exc):  # not the server: this process's stdout, closed by its reader (`| head`)
            raise BrokenPipeError from None
        cause = _leaf(exc)  # what the client saw, not the task group that carried it
        print(f"judge-mcp demo: the server stopped ({type(cause).__name__}: {cause}); its message, if any, is above", file=sys.stderr)
        return 1
    say()
    for name in missing:
        say(f"not demonstrated: {name} (the demo does not know this tool)")
    calls = len(STEPS) + len(missing)
    say(
        f"{calls - failures} of {calls} tool calls succeeded in {time.monotonic() - started:.0f} s "
        + ("(database: a temporary one, removed now; --db PATH keeps the verdicts)." if scratch else f"(database: {settings.db_path}).")
    )
    if local:
        say("To see real verdicts, point it at a real model, e.g. a local Ollama server:")
        print(f"  {REAL_MODEL_LINE.format(command=command_name())}", flush=True)
        say("(or JUDGE_MCP_BACKEND=openai with OPENAI_API_KEY, or anthropic with ANTHROPIC_API_KEY; README, Configuration)")
    return 0 if failures == 0 else 1
