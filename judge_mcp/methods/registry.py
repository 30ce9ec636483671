"""Every judging method once: its name (the MCP tool's, and the verdict log's `tool`, taken from its argument
model), the async function that runs it over a Judge, its argument model (judge_mcp/contract/args.py) and its result model.
The server, the bench and the injection script run methods only through `call`, so a method's arguments, logging
and result are the same wherever it is called from.

The four tools register here; the bench's baselines (arena_hard, pointwise) register themselves when
judge_mcp.bench imports them. A method that can be judged by a panel of backends (compare_pair,
grade_score_options) also names how its members' results combine into one (methods/panel.py).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, JudgingArgs, LweJudgeArgs,
)
from judge_mcp.contract.results import ComparePairResult, FlipResult, GradeScoreResult, LweResult

if TYPE_CHECKING:  # the App imports the methods, not the other way round
    from judge_mcp.runtime.app import App
    from judge_mcp.calls.context import ProgressFn


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


# What `preload` imports: every method module the table below names, and the LWE sessions' (tools.py, server.py).
METHOD_MODULES = (
    "judge_mcp.methods.panel", "judge_mcp.methods.pairwise", "judge_mcp.methods.grade_score.scoring", "judge_mcp.methods.flip.reward",
    "judge_mcp.methods.lwe",
)
_preloaded: list[threading.Thread] = []
_preload_lock = threading.Lock()


def preload() -> threading.Thread:
    """Import METHOD_MODULES in a daemon thread, once per process: started by the server once a client has finished
    its handshake, so they load while the client thinks about its first tool call. `loaded` waits for it."""
    with _preload_lock:
        if not _preloaded:
            _preloaded.append(threading.Thread(target=_import_quietly, name="preload methods", daemon=True))
            _preloaded[0].start()
        return _preloaded[0]


def _import_quietly() -> None:
    for module in METHOD_MODULES:
        try:
            importlib.import_module(module)
        except Exception:  # pragma: no cover - the first call imports it again and reports the error where it counts
            pass


def loaded() -> None:
    """Wait for `preload`'s imports, if started, so a method module is never imported from two threads at once."""
    if _preloaded:
        _preloaded[0].join()


def on_first_call(module: str, name: str) -> Callable[..., Any]:
    """`module.name`, imported when it is first called: the server lists its tools (from the argument and result
    models) without importing the methods, whose modules load at the first judging call (or ahead of it, `preload`)."""

    def deferred(*args: Any, **kwargs: Any) -> Any:
        loaded()
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

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


async def call(
    app: App,
    name: str,
    args: JudgingArgs | Mapping[str, Any],
    *,
    progress: ProgressFn | None = None,
    no_reask: bool = False,
    log_extra: dict[str, Any] | None = None,
    **options: Any,
) -> tuple[BaseModel, list[dict[str, Any]]]:
    """Run method `name` with `args` (its argument model, or a mapping parsed into it: InputError when it does not
    fit) through `app.run` (one verdict-log row), or, when the arguments name `backends`, as a panel through
    `app.run_panel`: (its result, the call records of every Judge it used). With `response_models` the
    self-preference guard applies; `no_reask` is the papers' strict rule (an unparsed first answer counts as it
    is); `log_extra` adds keys to the logged inputs only (the bench's item id and placement); `options` are the
    method's own keywords that are not tool arguments (lwe_judge's `learn`), logged too."""
    method = METHODS.get(name)
    if method is None:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    if isinstance(args, Mapping):
        args = method.args.parse(args)
    if not isinstance(args, method.args):
        raise TypeError(f"{name} takes {method.args.__name__}, got {type(args).__name__}")
    loaded()
    from judge_mcp.methods import panel

    records: list[dict[str, Any]] = []

    async def run(judge):
        judge.no_reask = no_reask
        result = await method.run(judge, args, **options)
        records.extend(judge.records)
        return result

    logged = {**(log_extra or {}), **args.logged(), **options, **({"no_reask": True} if no_reask else {})}
    authors = panel.authors(args)
    backends = getattr(args, "backends", None)
    if backends:
        if method.combine is None:
            raise ValueError(f"{name} cannot be judged by a panel")
        combine = partial(method.combine, args=args)
        result = await app.run_panel(name, logged, run, combine, backends=backends, progress=progress, authors=authors)
    else:
        result = await app.run(name, logged, run, backend=args.backend, progress=progress, authors=authors)
    return result, records
