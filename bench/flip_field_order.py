"""FLIP's answer field order under a JSON schema: the paper's (REASONING, then the instruction) against ours
(the instruction, then REASONING), on a benchmark set, with the bench harness.

    JUDGE_MCP_CONFIG=state/bench/local2.toml .venv/bin/python bench/flip_field_order.py llmbar_natural paper
    .venv/bin/python bench/flip_field_order.py DATASET (paper|shipped) [--sample N] [--backend local]

`paper` swaps in the paper's answer template (`{ "REASONING": "<explanation>", "INFERRED INSTRUCTION":
"<instruction>" }`) and a schema with REASONING first; `shipped` runs the method as it ships. Each order gets its
own bench database (state/exp/flip_<order>.db, resumable) so the two never share results or cached calls. Prints
the summary's overall figures and writes state/exp/<dataset>.flip_<order>.json. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judge_mcp.app import App  # noqa: E402
from judge_mcp.bench.runner import RunSpec, run  # noqa: E402
from judge_mcp.config import load_settings  # noqa: E402
from judge_mcp.methods import flip  # noqa: E402
from judge_mcp.store import Store  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks"


def paper_format(key: str, *, structured: bool) -> str:
    return '{ "%s": "<explanation>", "%s": "<instruction>" }' % (flip.REASONING_KEY, key)


def paper_schema() -> dict:
    return {
        "type": "object",
        "properties": {flip.REASONING_KEY: {"type": "string"}, flip.SCHEMA_KEY: {"type": "string"}},
        "required": [flip.REASONING_KEY, flip.SCHEMA_KEY],
        "additionalProperties": False,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="a set in ../shared/benchmarks, without .jsonl")
    parser.add_argument("order", choices=["paper", "shipped"])
    parser.add_argument("--sample", type=int, help="N items spread over the file (default: all)")
    parser.add_argument("--backend", default="local")
    args = parser.parse_args()
    if args.order == "paper":
        flip.answer_format = paper_format  # used by the system prompt, the user prompt and the re-ask reminder
        flip.answer_schema = paper_schema
    Path("state/exp").mkdir(parents=True, exist_ok=True)
    app = App(load_settings(), store=Store(f"state/exp/flip_{args.order}.db"))

    async def go() -> dict:
        try:
            spec = RunSpec(dataset=DATA / f"{args.dataset}.jsonl", method="flip", sample=args.sample, backend=args.backend)
            return await run(app, spec, quiet=True)
        finally:
            await app.aclose()

    summary = anyio.run(go)
    Path(f"state/exp/{args.dataset}.flip_{args.order}.json").write_text(json.dumps(summary, indent=1))
    print(args.order, json.dumps(summary["overall"]))


if __name__ == "__main__":
    main()
