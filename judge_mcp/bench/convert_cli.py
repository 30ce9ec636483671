"""`judge-mcp bench-convert`'s parser: the image sets (convert.py) and the published judges' data
(convert_published.py), without importing either at CLI start-up."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

IMAGE_FORMATS = ("vl-rewardbench", "multimodal-rewardbench")  # convert.FORMATS
PUBLISHED_FORMATS = ("judgebench", "alpaca-eval", "mt-bench-human", "hh-rlhf")  # convert_published.FORMATS


def add_parser(sub: argparse._SubParsersAction, command: Callable[[argparse.Namespace], int]) -> None:
    conv = sub.add_parser(
        "bench-convert",
        help="convert VL-RewardBench, Multimodal RewardBench (with their images), JudgeBench, AlpacaEval, MT-Bench human judgments or HH-RLHF to a bench JSONL",
        description="Write SOURCE as a bench JSONL: the image sets' items carry their image as a path relative to OUT; JudgeBench's, "
        "AlpacaEval's, MT-Bench's and HH-RLHF's files get a manifest of provenance and license beside OUT (OUT.manifest.json).",
    )
    conv.add_argument("format", choices=IMAGE_FORMATS + PUBLISHED_FORMATS)
    conv.add_argument(
        "source", type=Path, help="VL-RewardBench's data/data.jsonl, Multimodal RewardBench's data/all_data.json, JudgeBench's "
        "data/*.jsonl, AlpacaEval's reference outputs (with --outputs) or annotations JSON, or MT-Bench's human judgments "
        "(lmsys/mt_bench_human_judgments, split human, as JSON or JSONL), or HH-RLHF's */test.jsonl.gz",
    )
    conv.add_argument("--images", type=Path, help="the folder the image paths are relative to (default: SOURCE's folder)")
    conv.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    conv.add_argument("--skip-missing", action="store_true", help="leave out items whose image is missing (counted) instead of stopping")
    conv.add_argument("--outputs", type=Path, help="alpaca-eval: the model's outputs (JSON list of instruction, output, generator)")
    conv.add_argument("--difficulty", type=Path, help="alpaca-eval: AlpacaEval's instruction_difficulty.csv (row index, value)")
    conv.add_argument("--commit", help="judgebench / alpaca-eval / mt-bench-human / hh-rlhf: the source repository's commit, recorded in the manifest")
    conv.set_defaults(fn=command)
