"""Every judging method once: its name (the MCP tool's, and the verdict log's `tool`), the async function that
runs it over a Judge, and its result model. The server, the bench and the injection script run methods only
through `call`, so a method's arguments, logging and result are the same wherever it is called from.

The four tools register here; the bench's baselines (arena_hard, pointwise) register themselves when
judge_mcp.bench imports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from judge_mcp.methods import flip, grade_score, lwe, pairwise
from judge_mcp.verdicts import ComparePairResult, FlipResult, GradeScoreResult, LweResult

if TYPE_CHECKING:  # the App imports the methods, not the other way round
    from judge_mcp.app import App
    from judge_mcp.methods.judge import ProgressFn


@dataclass(frozen=True)
class Method:
    name: str
    run: Callable[..., Awaitable[BaseModel]]  # run(judge, **args) -> result
    result: type[BaseModel]


METHODS: dict[str, Method] = {}


def register(name: str, run: Callable[..., Awaitable[BaseModel]], result: type[BaseModel]) -> Method:
    known = METHODS.get(name)
    if known is not None and known.run is not run:
        raise ValueError(f"two methods are named {name!r}")
    METHODS[name] = method = Method(name, run, result)
    return method


register("compare_pair", pairwise.compare_pair, ComparePairResult)
register("infer_instruction_reward", flip.infer_instruction_reward, FlipResult)
register("grade_score_options", grade_score.grade_score_options, GradeScoreResult)
register("lwe_judge", lwe.lwe_judge, LweResult)


async def call(
    app: App,
    name: str,
    args: dict[str, Any],
    *,
    backend: str | None = None,
    progress: ProgressFn | None = None,
    no_reask: bool = False,
    log_extra: dict[str, Any] | None = None,
) -> tuple[BaseModel, list[dict[str, Any]]]:
    """Run method `name` with `args` through `app.run` (one verdict-log row): (its result, the Judge's call
    records). `no_reask` is the papers' strict rule (an unparsed first answer counts as it is); `log_extra` adds
    keys to the logged inputs only (the bench's item id and placement)."""
    method = METHODS.get(name)
    if method is None:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    records: list[dict[str, Any]] = []

    async def run(judge):
        judge.no_reask = no_reask
        result = await method.run(judge, **args)
        records[:] = judge.records
        return result

    logged = {**(log_extra or {}), **args, **({"no_reask": True} if no_reask else {})}
    result = await app.run(name, logged, run, backend=backend, progress=progress)
    return result, records
