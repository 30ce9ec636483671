"""Converters for the published judges' data (`judge-mcp bench-convert judgebench|alpaca-eval`), in the shapes the
baselines read, each with a manifest of provenance and license beside the file written (OUT.manifest.json: the
fields of shared/benchmarks/MANIFEST.json, plus each source file's sha256).

- judgebench: ScalerLab/JudgeBench's pairs (`data/dataset=judgebench,response_model=M.jsonl`: pair_id, original_id,
  source, question, response_model, response_A, response_B, label "A>B"|"B>A") -> pairwise items, `chosen` the
  labelled better response, category from the source (mmlu-pro-* knowledge, livebench-reasoning reasoning,
  livebench-math math, livecodebench coding), in file order. This is how shared/benchmarks/judgebench_gpt-4o.jsonl
  was made: converting JudgeBench @ e2c52c28's GPT-4o file gives it byte for byte.
- alpaca-eval: AlpacaEval's evaluation set with the reference's outputs (a JSON list of instruction, output,
  generator, dataset: e.g. results/gpt4_1106_preview/model_outputs.json) and, with `--outputs`, a model's outputs
  (the same shape, matched by instruction) -> head-to-head rows in the evaluation set's order (the order the GLM's
  instruction difficulty goes by), only those the model answered, as AlpacaEval's inner join on the instruction
  keeps them (the others are counted as left out; their ids keep the evaluation set's row number); or AlpacaEval's
  own annotations file (results/M/weighted_alpaca_eval_gpt4_turbo/annotations.json: output_1, output_2,
  generator_1, generator_2, preference, raw_completion), whose recorded preference and completion are kept
  (`recorded_preference`, `recorded_completion`) for replaying them.
  `--difficulty` adds each row's instruction difficulty from AlpacaEval's instruction_difficulty.csv (row index,
  value) by the row's position among the rows kept (as AlpacaEval's GLM looks it up), so the LC win rate uses the
  GLM with it.
Bad input stops the conversion naming the file and the row; nothing is written then.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from judge_mcp.bench import convert_hh_rlhf, convert_mtbench
from judge_mcp.bench.convert import ConvertError, Converted, _read, _json

FORMATS = ("judgebench", "alpaca-eval", "mt-bench-human", "hh-rlhf")
PROVENANCE = {
    "mt-bench-human": convert_mtbench.PROVENANCE,
    "hh-rlhf": convert_hh_rlhf.PROVENANCE,
    "judgebench": {
        "kind": "pairwise", "repo": "ScalerLab/JudgeBench",
        "license": "MIT per the HF dataset card ScalerLab/JudgeBench (GitHub repo itself has no LICENSE file)",
        "label": "objective correctness (verified against ground truth answers)",
    },
    "alpaca-eval": {
        "kind": "head2head", "repo": "tatsu-lab/alpaca_eval",
        "license": "CC BY-NC 4.0 (the repository's data license; its code is Apache-2.0)",
        "label": "none: head-to-head rows; the judge's preference for output_2 over the reference output_1 is the measurement",
    },
}
JB_CATEGORIES = {"livebench-reasoning": "reasoning", "livebench-math": "math", "livecodebench": "coding"}
DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def _jb_item(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConvertError(f"{where}: expected a JSON object")
    missing = [k for k in ("pair_id", "source", "question", "response_model", "response_A", "response_B", "label") if not isinstance(raw.get(k), str)]
    if missing:
        raise ConvertError(f"{where}: missing or not text: {', '.join(missing)}")
    if raw["label"] not in ("A>B", "B>A"):
        raise ConvertError(f"{where}: label must be A>B or B>A, got {raw['label']!r}")
    source = raw["source"]
    category = "knowledge" if source.startswith("mmlu-pro") else JB_CATEGORIES.get(source)
    if category is None:
        raise ConvertError(f"{where}: unknown JudgeBench source {source!r}")
    chosen, rejected = (raw["response_A"], raw["response_B"]) if raw["label"] == "A>B" else (raw["response_B"], raw["response_A"])
    short = DATE_SUFFIX.sub("", raw["response_model"])
    return {
        "id": f"judgebench-{short}-{raw['pair_id']}", "source": f"judgebench/{short}", "category": category, "prompt": raw["question"],
        "chosen": chosen, "rejected": rejected, "subcategory": source, "original_id": raw.get("original_id"), "original_label": raw["label"],
        "response_model": raw["response_model"],
    }


def judgebench(source: Path) -> list[dict[str, Any]]:
    lines = _read(source).splitlines()
    return [_jb_item(_json(line, f"{source.name} line {n}"), f"{source.name} line {n}") for n, line in enumerate(lines, start=1) if line.strip()]


def _json_list(path: Path) -> list[dict[str, Any]]:
    data = _json(_read(path), path.name)
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise ConvertError(f"{path.name}: expected a JSON list of objects (AlpacaEval's outputs or annotations)")
    return data


def _text(row: dict[str, Any], key: str, where: str, empty: bool = True) -> str:
    value = row.get(key)
    if not isinstance(value, str) or (not empty and not value):
        raise ConvertError(f"{where}: {key!r} must be {'text' if empty else 'non-empty text'}")
    return value


def _h2h(k: int, instruction: str, category: Any, outputs: tuple[str, str], generators: tuple[str, str]) -> dict[str, Any]:
    return {"id": f"alpaca-eval-{k}", "source": f"alpaca_eval/{generators[1]}", "category": str(category or "all"), "prompt": instruction,
            "output_1": outputs[0], "output_2": outputs[1], "generator_1": generators[0], "generator_2": generators[1]}


def alpaca_eval(source: Path, outputs: Path | None, done: Converted | None = None) -> list[dict[str, Any]]:
    """AlpacaEval's head-to-head rows. With --outputs, the rows the model answered, as AlpacaEval's inner join on the
    instruction keeps them (`annotate_head2head`): instructions of the evaluation set without a model output, and
    model outputs for instructions not in it, are left out and counted in `done`."""
    rows = _json_list(source)
    if "output_1" in rows[0]:
        if outputs is not None:
            raise ConvertError(f"{source.name} is an annotations file (output_1, output_2): it takes no --outputs")
        out = []
        for k, r in enumerate(rows):
            where = f"{source.name} row {k}"
            item = _h2h(k, _text(r, "instruction", where), r.get("dataset"), (_text(r, "output_1", where), _text(r, "output_2", where)),
                        (_text(r, "generator_1", where, False), _text(r, "generator_2", where, False)))
            out.append({**item, "recorded_preference": r.get("preference"), "recorded_completion": r.get("raw_completion")})
        return out
    if outputs is None:
        raise ConvertError(f"{source.name} holds the reference's outputs: give the model's outputs with --outputs")
    model: dict[str, dict[str, Any]] = {}
    for k, r in enumerate(_json_list(outputs)):
        instruction = _text(r, "instruction", f"{outputs.name} row {k}")
        if instruction in model:
            raise ConvertError(f"{outputs.name} row {k}: a second output for the instruction {instruction[:60]!r}")
        model[instruction] = r
    out, done = [], done if done is not None else Converted()
    asked: set[str] = set()
    for k, ref in enumerate(rows):
        where = f"{source.name} row {k}"
        instruction = _text(ref, "instruction", where)
        asked.add(instruction)
        mine = model.get(instruction)
        if mine is None:
            done.skip(f"instructions without an output in {outputs.name}")
            continue
        mwhere = f"{outputs.name} (instruction of {where})"
        out.append(_h2h(k, instruction, ref.get("dataset"), (_text(ref, "output", where), _text(mine, "output", mwhere)),
                        (_text(ref, "generator", where, False), _text(mine, "generator", mwhere, False))))
    for _ in set(model) - asked:
        done.skip(f"outputs in {outputs.name} for instructions not in {source.name}")
    if not out:
        raise ConvertError(f"{outputs.name} answers none of the instructions of {source.name}")
    return out


def add_difficulty(rows: list[dict[str, Any]], path: Path) -> None:
    """Each row's instruction difficulty from AlpacaEval's CSV (header, then row index, value), by row position."""
    values: dict[int, float] = {}
    for n, record in enumerate(csv.reader(_read(path).splitlines()), start=1):
        if n == 1 or not record:
            continue
        try:
            index, value = int(record[0]), float(record[1])
        except (ValueError, IndexError):
            raise ConvertError(f"{path.name} line {n}: expected a row index and a number, got {record[:2]!r}") from None
        if not math.isfinite(value):
            raise ConvertError(f"{path.name} line {n}: the difficulty is not a finite number")
        values[index] = value
    missing = [k for k in range(len(rows)) if k not in values]
    if missing:
        raise ConvertError(f"{path.name}: no difficulty for row {missing[0]} (of {len(rows)} rows)")
    for k, row in enumerate(rows):
        row["instruction_difficulty"] = values[k]


def manifest(fmt: str, out: Path, rows: list[dict[str, Any]], sources: list[Path], commit: str | None, text: str) -> dict[str, Any]:
    return {
        **PROVENANCE[fmt], "commit": commit, "paths": [p.name for p in sources],
        "sha256": {p.name: hashlib.sha256(p.expanduser().read_bytes()).hexdigest() for p in sources},
        "file": out.name, "n": len(rows), "bytes": len(text.encode("utf-8")), "categories": dict(Counter(r["category"] for r in rows)),
    }


def convert(args: argparse.Namespace) -> Converted:
    """bench-convert for every format: the image sets through convert.py, the published judges' data here."""
    if args.format not in FORMATS:
        # lazy: the image sets' converter loads only for their formats
        from judge_mcp.bench.convert import convert as convert_images

        return convert_images(args.format, args.source, args.images, args.out, skip_missing=args.skip_missing)
    if args.images is not None or args.skip_missing:
        raise ConvertError(f"--images and --skip-missing apply to the image sets, not {args.format}")
    if args.format != "alpaca-eval" and (args.outputs or args.difficulty):
        raise ConvertError("--outputs and --difficulty apply to alpaca-eval")
    if args.format in ("mt-bench-human", "hh-rlhf"):
        done = Converted()
        convert_mtbench.write(args.format, args.source, args.out, args.commit, done, manifest)
        return done
    done = Converted()
    rows = judgebench(args.source) if args.format == "judgebench" else alpaca_eval(args.source, args.outputs, done)
    if args.difficulty is not None:
        add_difficulty(rows, args.difficulty)
    ids = Counter(r["id"] for r in rows)
    if any(n > 1 for n in ids.values()):
        raise ConvertError(f"{args.source.name}: id {next(i for i, n in ids.items() if n > 1)!r} repeats")
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    sources = [p for p in (args.source, args.outputs, args.difficulty) if p is not None]
    info = manifest(args.format, args.out, rows, sources, args.commit, text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for path, body in ((args.out, text), (args.out.with_name(args.out.name + ".manifest.json"), json.dumps(info, indent=1) + "\n")):
        part = path.with_name(path.name + ".part")
        part.write_text(body, encoding="utf-8")
        part.replace(path)
    done.written = len(rows)
    return done

