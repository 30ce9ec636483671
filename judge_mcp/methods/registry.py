"""Every judging method once: its name (the MCP tool's, and the verdict log's `tool`, taken from its argument
model), the async function that runs it over a call context, its argument model (judge_mcp/contract/args.py) and its result model.
The server, the Python API and the bench run methods only through runtime/run.py, so a method's arguments, logging
and result are the same wherever it is called from.

The judging tools register here; the bench's baselines (arena_hard, pointwise) register themselves when
judge_mcp.bench imports them. A method that can be judged by a panel of backends (compare_pair,
grade_score_options, score_response) also names how its members' results combine into one (methods/panel.py).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, JudgingArgs, LweJudgeArgs,
)
from judge_mcp.contract.results import ComparePairResult, FlipResult, GradeScoreResult, LweResult
from judge_mcp.contract.rubric import ScoreResponseArgs
from judge_mcp.contract.results import ScoreResponseResult


# combine(members, args, latency_ms=..., warnings=...) -> the panel's result
Combine = Callable[..., BaseModel]


@dataclass(frozen=True)
class Method:
    name: str
    run: Callable[..., Awaitable[BaseModel]]  # run(judge, args, **options) -> result
    args: type[JudgingArgs]
    result: type[BaseModel]
    combine: Combine | None = None  # how a panel's member results combine; None: no panels


METHODS: dict[str, Method] = {}


def register(run: Callable[..., Awaitable[BaseModel]], args: type[JudgingArgs], result: type[BaseModel], combine: Combine | None = None) -> Method:
    """Register `run` under its argument model's name (`args.tool`)."""
    name = args.tool
    known = METHODS.get(name)
    if known is not None and known.run is not run:
        raise ValueError(f"two methods are named {name!r}")
    METHODS[name] = method = Method(name, run, args, result, combine)
    return method


# What `preload` imports: every method module the table below names, and the LWE sessions' (server/tools.py, server/build.py);
# compare_pair's first (a panel's combining imports grade_score's scoring).
METHOD_MODULES = (
    "judge_mcp.methods.pairwise", "judge_mcp.methods.panel", "judge_mcp.methods.grade_score.scoring", "judge_mcp.methods.flip.reward",
    "judge_mcp.methods.lwe", "judge_mcp.methods.score",
)
_preloaded: list[threading.Thread] = []
_preload_lock = threading.Lock()
_importing = threading.Lock()  # one method module imported at a time: by the preload, or by a call that needs it
_calls = threading.Condition()  # the preload waits between modules while a judging call runs (`judging`)
_calls_running = [0]


def preload(after: threading.Thread | None = None) -> threading.Thread:
    """Import METHOD_MODULES in a daemon thread, once per process: started by the server once a client has finished
    its handshake, so they load while the client thinks about its first tool call; once `after` has ended (the
    backend's client import, which every first call needs: the two do not share the interpreter). While a judging
    call runs, the preload waits between modules (a call sent at once imports the one module it needs, `imported`,
    and does not share the interpreter with the imports of the others)."""
    with _preload_lock:
        if not _preloaded:
            _preloaded.append(threading.Thread(target=_import_quietly, args=(after,), name="preload methods", daemon=True))
            _preloaded[0].start()
        return _preloaded[0]


def _import_quietly(after: threading.Thread | None) -> None:
    if after is not None:
        after.join()
    for module in METHOD_MODULES:
        with _calls:
            _calls.wait_for(lambda: _calls_running[0] == 0)
        try:
            imported(module)
        except Exception:  # pragma: no cover - the first call imports it again and reports the error where it counts
            pass


def imported(module: str) -> ModuleType:
    """The method module `module`, imported here unless the preload has (once its import in progress, if any, is
    done): so a method module is never imported from two threads at once."""
    with _importing:  # (not sys.modules first: a module another thread is importing is there, half made)
        return importlib.import_module(module)


@contextmanager
def judging() -> Iterator[None]:
    """Around a judging call: the methods' preload waits between its modules until no call runs."""
    with _calls:
        _calls_running[0] += 1
    try:
        yield
    finally:
        with _calls:
            _calls_running[0] -= 1
            _calls.notify_all()


def on_first_call(module: str, name: str) -> Callable[..., Any]:
    """`module.name`, imported when it is first called: the server lists its tools (from the argument and result
    models) without importing the methods, whose modules load at the first judging call (or ahead of it, `preload`)."""

    def deferred(*args: Any, **kwargs: Any) -> Any:
        return getattr(imported(module), name)(*args, **kwargs)

    deferred.__name__ = deferred.__qualname__ = name
    return deferred


_PANEL = "judge_mcp.methods.panel"
register(on_first_call("judge_mcp.methods.pairwise", "compare_pair"), ComparePairArgs, ComparePairResult, on_first_call(_PANEL, "combine_pairs"))
register(on_first_call("judge_mcp.methods.flip.reward", "infer_instruction_reward"), InferInstructionRewardArgs, FlipResult)
register(
    on_first_call("judge_mcp.methods.grade_score.scoring", "grade_score_options"), GradeScoreOptionsArgs, GradeScoreResult,
    on_first_call(_PANEL, "combine_grades"),
)
register(on_first_call("judge_mcp.methods.lwe", "lwe_judge"), LweJudgeArgs, LweResult)
_SCORE = "judge_mcp.methods.score"
register(on_first_call(_SCORE, "score_response"), ScoreResponseArgs, ScoreResponseResult, on_first_call(_SCORE, "combine_scores"))
