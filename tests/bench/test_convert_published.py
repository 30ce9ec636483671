"""bench-convert judgebench | alpaca-eval (judge_mcp/bench/convert_published.py): JudgeBench's pairs become the
shared set's lines byte for byte, AlpacaEval's outputs and annotations become head-to-head rows in order, each file
with a manifest of provenance and license; bad input stops naming the file and row, writing nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from judge_mcp.bench import convert, convert_cli, convert_published
from judge_mcp.bench.data import load_items
from judge_mcp.cli.main import main
from tests.bench.datasets import FIXTURES

JB_SOURCE = FIXTURES / "judgebench_source.jsonl"  # 5 lines of JudgeBench @ e2c52c28's GPT-4o pairs (MIT)
JB_EXPECTED = FIXTURES / "judgebench_converted.jsonl"  # the same 5 lines of shared/benchmarks/judgebench_gpt-4o.jsonl
H2H = [json.loads(line) for line in (FIXTURES / "alpaca_h2h.jsonl").read_text(encoding="utf-8").splitlines()]


def test_the_parser_names_every_converter_s_formats():
    assert convert_cli.IMAGE_FORMATS == convert.FORMATS and convert_cli.PUBLISHED_FORMATS == convert_published.FORMATS


def test_judgebench_pairs_convert_to_the_shared_set_s_lines_byte_for_byte(tmp_path):
    out = tmp_path / "jb.jsonl"
    assert main(["bench-convert", "judgebench", str(JB_SOURCE), "--out", str(out), "--commit", "e2c52c28"]) == 0
    assert out.read_bytes() == JB_EXPECTED.read_bytes()
    info = json.loads((tmp_path / "jb.jsonl.manifest.json").read_text())
    assert info["repo"] == "ScalerLab/JudgeBench" and info["commit"] == "e2c52c28" and info["license"].startswith("MIT")
    assert info["sha256"] == {JB_SOURCE.name: hashlib.sha256(JB_SOURCE.read_bytes()).hexdigest()}
    assert info["n"] == 5 and info["bytes"] == out.stat().st_size
    assert info["categories"] == {"knowledge": 2, "math": 1, "reasoning": 1, "coding": 1}
    items = load_items(out)
    assert [it.kind for it in items] == ["pairwise"] * 5


def _alpaca_sources(tmp_path: Path) -> tuple[Path, Path]:
    reference = [{"instruction": r["prompt"], "output": r["output_1"], "generator": r["generator_1"], "dataset": "fixture"} for r in H2H]
    model = [{"instruction": r["prompt"], "output": r["output_2"], "generator": r["generator_2"]} for r in reversed(H2H)]  # any order
    (tmp_path / "ref.json").write_text(json.dumps(reference))
    (tmp_path / "model.json").write_text(json.dumps(model))
    return tmp_path / "ref.json", tmp_path / "model.json"


def test_alpaca_eval_outputs_become_head_to_head_rows_in_the_reference_s_order(tmp_path):
    ref, model = _alpaca_sources(tmp_path)
    difficulty = tmp_path / "instruction_difficulty.csv"
    difficulty.write_text(",instruction_difficulty\n" + "".join(f"{k},{r['instruction_difficulty']}\n" for k, r in enumerate(H2H)))
    out = tmp_path / "sets" / "h2h.jsonl"
    args = ["bench-convert", "alpaca-eval", str(ref), "--outputs", str(model), "--difficulty", str(difficulty), "--out", str(out)]
    assert main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    keys = ("prompt", "output_1", "output_2", "generator_1", "generator_2", "instruction_difficulty")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: r[k] for k in keys} for r in H2H]
    assert rows[0]["id"] == "alpaca-eval-0" and rows[0]["source"] == "alpaca_eval/fixture-model" and rows[0]["category"] == "fixture"
    info = json.loads((out.parent / "h2h.jsonl.manifest.json").read_text())
    assert info["repo"] == "tatsu-lab/alpaca_eval" and "CC BY-NC 4.0" in info["license"] and info["kind"] == "head2head"
    assert set(info["sha256"]) == {"ref.json", "model.json", "instruction_difficulty.csv"}
    assert [it.difficulty for it in load_items(out)] == [r["instruction_difficulty"] for r in H2H]


def test_alpaca_eval_annotations_keep_their_recorded_preference_and_completion(tmp_path):
    recorded = "{'finish_reason': 'length', 'logprobs': {'content': [{'token': 'M', 'logprob': -0.1, 'top_logprobs': []}]}}"
    annotations = [{"instruction": r["prompt"], "output_1": r["output_1"], "generator_1": r["generator_1"], "dataset": "d",
                    "output_2": r["output_2"], "generator_2": r["generator_2"], "annotator": "weighted_alpaca_eval_gpt4_turbo",
                    "preference": "1.5", "raw_completion": recorded} for r in H2H[:3]]
    (tmp_path / "annotations.json").write_text(json.dumps(annotations))
    out = tmp_path / "a.jsonl"
    assert main(["bench-convert", "alpaca-eval", str(tmp_path / "annotations.json"), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["output_2"] for r in rows] == [r["output_2"] for r in H2H[:3]]
    assert rows[1]["recorded_preference"] == "1.5" and rows[1]["recorded_completion"] == recorded


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda ref, model, tmp: [str(ref)], "give the model's outputs with --outputs"),
        (lambda ref, model, tmp: [str(ref), "--outputs", str(_none_asked(model))], "answers none of the instructions"),
        (lambda ref, model, tmp: [str(ref), "--outputs", str(_twice(model))], "a second output for the instruction"),
        (lambda ref, model, tmp: [str(ref), "--outputs", str(model), "--difficulty", str(_csv(tmp, "0,0.1\n"))], "no difficulty for row 1"),
        (lambda ref, model, tmp: [str(ref), "--outputs", str(model), "--difficulty", str(_csv(tmp, "0,hard\n"))], "expected a row index and a number"),
        (lambda ref, model, tmp: [str(ref), "--outputs", str(model), "--images", str(tmp)], "--images and --skip-missing apply to the image sets"),
        (lambda ref, model, tmp: [str(tmp / "absent.json"), "--outputs", str(model)], "does not exist"),
    ],
)
def test_bad_alpaca_eval_input_stops_naming_the_problem_and_writes_nothing(tmp_path, capsys, make, message):
    ref, model = _alpaca_sources(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["bench-convert", "alpaca-eval", *make(ref, model, tmp_path), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "out.jsonl.manifest.json").exists()


def _drop_last(model: Path) -> Path:
    rows = json.loads(model.read_text())
    path = model.with_name("fewer.json")
    path.write_text(json.dumps([r for r in rows if r["instruction"] != H2H[4]["prompt"]]))
    return path


def _none_asked(model: Path) -> Path:
    path = model.with_name("other.json")
    path.write_text(json.dumps([{"instruction": "not asked", "output": "x", "generator": "m"}]))
    return path


def test_alpaca_eval_keeps_the_rows_a_model_answered_and_says_how_many_it_left_out(tmp_path, capsys):
    """As AlpacaEval's inner join on the instruction (phi-2 answered 803 of the 805): the other rows are scored."""
    ref, model = _alpaca_sources(tmp_path)
    fewer = _drop_last(model)
    rows = json.loads(fewer.read_text()) + [{"instruction": "not in the set", "output": "x", "generator": "fixture-model"}]
    fewer.write_text(json.dumps(rows))
    out = tmp_path / "h2h.jsonl"
    assert main(["bench-convert", "alpaca-eval", str(ref), "--outputs", str(fewer), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote 9 items" in printed and "1 instructions without an output in fewer.json" in printed
    assert "1 outputs in fewer.json for instructions not in ref.json" in printed
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["prompt"] for r in kept] == [r["prompt"] for k, r in enumerate(H2H) if k != 4]
    assert kept[4]["id"] == "alpaca-eval-5"  # the evaluation set's row number


def _twice(model: Path) -> Path:
    rows = json.loads(model.read_text())
    path = model.with_name("twice.json")
    path.write_text(json.dumps(rows + rows[:1]))
    return path


def _csv(tmp: Path, body: str) -> Path:
    path = tmp / "d.csv"
    path.write_text(",instruction_difficulty\n" + body)
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r.update(label="A=B"), "label must be A>B or B>A"),
        (lambda r: r.update(source="mystery-bench"), "unknown JudgeBench source 'mystery-bench'"),
        (lambda r: r.pop("question"), "missing or not text: question"),
    ],
)
def test_bad_judgebench_lines_stop_naming_the_line(tmp_path, capsys, edit, message):
    lines = JB_SOURCE.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[2])
    edit(row)
    source = tmp_path / "jb.jsonl"
    source.write_text("\n".join([*lines[:2], json.dumps(row)]) + "\n", encoding="utf-8")
    assert main(["bench-convert", "judgebench", str(source), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert message in err and "jb.jsonl line 3" in err and not (tmp_path / "o.jsonl").exists()
