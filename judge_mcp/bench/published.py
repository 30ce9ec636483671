"""The bench methods that reproduce published judges beside arena-hard (methods.py): `jb-vanilla`, JudgeBench's
vanilla judge (jb_vanilla.py). They join methods.METHODS when methods.py is imported (it imports this module last).
"""

from __future__ import annotations

from typing import Any

from judge_mcp.app import App
from judge_mcp.bench import methods
from judge_mcp.bench.data import Item
from judge_mcp.bench.jb_vanilla import JbVanillaArgs
from judge_mcp.bench.methods import PAIRWISE, Method, Options, call_stats, given, placement_record, shown


async def _jb_vanilla(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    a, b = shown(item, placement)
    args = JbVanillaArgs.parse(dict(prompt=item.prompt, response_a=a, response_b=b, **given(backend=backend)))
    result, timing, calls = await methods._run(app, args, item, placement, opts)
    record = placement_record(placement, result.winner)
    record.update(methods._usage(result), **timing, **call_stats(calls))
    record["reasked"] = False  # JudgeBench sends no re-ask and no continuation
    record["detail"] = {"decision": result.decision, "judgment": result.judgment[:200]}
    return record


PUBLISHED: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "jb-vanilla",
            (PAIRWISE,),
            True,
            _jb_vanilla,
            "JudgeBench's vanilla judge: 'Output (a)' / 'Output (b)', one user message, temperature 0, top_p 1, 1024 tokens",
        ),
    )
}
methods.METHODS.update(PUBLISHED)
