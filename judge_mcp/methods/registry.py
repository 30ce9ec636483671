"""Every judging method once: its name (the MCP tool's, and the verdict log's `tool`), the async function that
runs it over a Judge, and its result model. The server, the bench and the injection script run methods only
through `call`, so a method's arguments, logging and result are the same wherever it is called from.

The four tools register here; the bench's baselines (arena_hard, pointwise) register themselves when
judge_mcp.bench imports them. A method that can be judged by a panel of backends (compare_pair,
grade_score_options) also names how its members' results combine into one (methods/panel.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from judge_mcp.methods import flip, grade_score, lwe, pairwise, panel
from judge_mcp.outputs import ComparePairResult, FlipResult, GradeScoreResult, LweResult

if TYPE_CHECKING:  # the App imports the methods, not the other way round
    from judge_mcp.app import App
    from judge_mcp.calls.judge import ProgressFn


# combine(members, args, latency_ms=..., warnings=...) -> the panel's result
Combine = Callable[..., BaseModel]


@dataclass(frozen=True)
class Method:
    name: str
    run: Callable[..., Awaitable[BaseModel]]  # run(judge, **args) -> result
    result: type[BaseModel]
    combine: Combine | None = None  # how a panel's member results combine; None: no panels


METHODS: dict[str, Method] = {}


def register(name: str, run: Callable[..., Awaitable[BaseModel]], result: type[BaseModel], combine: Combine | None = None) -> Method:
    known = METHODS.get(name)
    if known is not None and known.run is not run:
        raise ValueError(f"two methods are named {name!r}")
    METHODS[name] = method = Method(name, run, result, combine)
    return method


def _combine_pairs(members: Sequence[panel.Member], args: dict[str, Any], **kw: Any) -> ComparePairResult:
    return panel.combine_pairs(members, goal=args.get("goal", "worse"), template=args.get("template", "sop"), swap=args.get("swap", True), **kw)


def _combine_grades(members: Sequence[panel.Member], args: dict[str, Any], **kw: Any) -> GradeScoreResult:
    return panel.combine_grades(members, prompt_variant=args.get("prompt_variant", 2), **kw)


register("compare_pair", pairwise.compare_pair, ComparePairResult, _combine_pairs)
register("infer_instruction_reward", flip.infer_instruction_reward, FlipResult)
register("grade_score_options", grade_score.grade_score_options, GradeScoreResult, _combine_grades)
register("lwe_judge", lwe.lwe_judge, LweResult)


async def call(
    app: App,
    name: str,
    args: dict[str, Any],
    *,
    backend: str | None = None,
    backends: Sequence[str] | None = None,
    authors: panel.Authors | None = None,
    progress: ProgressFn | None = None,
    no_reask: bool = False,
    log_extra: dict[str, Any] | None = None,
) -> tuple[BaseModel, list[dict[str, Any]]]:
    """Run method `name` with `args` through `app.run` (one verdict-log row), or with `backends` as a panel
    through `app.run_panel`: (its result, the call records of every Judge it used). `authors` applies the
    self-preference guard; `no_reask` is the papers' strict rule (an unparsed first answer counts as it is);
    `log_extra` adds keys to the logged inputs only (the bench's item id and placement, the panel's arguments)."""
    method = METHODS.get(name)
    if method is None:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    records: list[dict[str, Any]] = []

    async def run(judge):
        judge.no_reask = no_reask
        result = await method.run(judge, **args)
        records.extend(judge.records)
        return result

    logged = {**(log_extra or {}), **args, **({"no_reask": True} if no_reask else {})}
    if backends:
        if method.combine is None:
            raise ValueError(f"{name} cannot be judged by a panel")
        combine = partial(method.combine, args=args)
        result = await app.run_panel(name, logged, run, combine, backends=backends, progress=progress, authors=authors)
    else:
        result = await app.run(name, logged, run, backend=backend, progress=progress, authors=authors)
    return result, records
