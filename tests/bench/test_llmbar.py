"""LLMBar's evaluators (`--method llmbar`, judge_mcp/bench/llmbar.py, llmbar_bench.py) against LLMBar's own code
(testkit/llmbar_reference.py) and its recorded GPT-4 evaluations: tests/bench_fixtures/llmbar_gpt4_natural_slice.json
is 10 of LLMBar's 100 Natural instances with every recorded completion of GPT-4's evaluators (princeton-nlp/LLMBar
@ 900616bf, MIT; the slice's own `source`). Replayed through a scripted OpenAI-compatible server, every request
equals the body LLMBar's code builds for it, every verdict LLMBar's recorded one, and the summary's `llmbar` block
LLMBar's statistics.json formula over the slice."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_mcp import prompts
from judge_mcp.bench import llmbar, llmbar_bench, published_options
from judge_mcp.bench.alpaca_eval import to_chatml
from judge_mcp.bench.methods import Options
from testkit import llmbar_reference as reference
from testkit.scripted_servers import Reply
from tests.bench.datasets import FIXTURES, bench

SLICE = reference.load_slice(FIXTURES / "llmbar_gpt4_natural_slice.json")
PUBLISHED = (Path(prompts.__file__).parent / "PUBLISHED.md").read_text(encoding="utf-8")


def _dataset(tmp_path: Path) -> Path:
    """The slice's instances as judge-mcp's pairwise rows (shared/benchmarks/llmbar_natural.jsonl's shape)."""
    rows = []
    for index, instance in zip(SLICE["indices"], SLICE["instances"]):
        label = instance["label"]
        chosen, rejected = instance[f"output_{label}"], instance[f"output_{3 - label}"]
        rows.append({"id": f"llmbar-llmbar-natural-{index}", "source": "llmbar/LLMBar/Natural", "category": "Natural",
                     "prompt": instance["input"], "chosen": chosen, "rejected": rejected, "original_label": label})
    path = tmp_path / "llmbar_slice.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_prompt_files_are_llmbar_s_byte_for_byte():
    names = sorted({m.template for modules in llmbar.STRATEGIES.values() for m in modules})
    assert len(names) == 12
    for name in names:
        digest = hashlib.sha256((Path(prompts.__file__).parent / name).read_bytes()).hexdigest()
        assert digest in PUBLISHED and name in PUBLISHED, name  # PUBLISHED.md's sha256 of the original file


def test_the_strategies_are_llmbar_s_gpt4_configs():
    assert tuple(llmbar.STRATEGIES) == published_options.LLMBAR_STRATEGIES
    assert published_options.options_problem("vanilla", None, "CoT") == "--llmbar-strategy applies to --method llmbar"
    assert published_options.options_problem("llmbar", None, "CoT") is None
    for name, modules in llmbar.STRATEGIES.items():
        configs = SLICE["configs"][name]
        assert [m.prompt for m in modules] == [c["prompt"] for c in configs]
        assert [m.max_tokens for m in modules] == [c["openai_kwargs"]["max_tokens"] for c in configs]
        for module, config in zip(modules, configs):
            kwargs = reference.process_openai_kwargs("gpt-4", json.loads(json.dumps(config["openai_kwargs"])))
            bias = llmbar.logit_bias(module)
            assert (dict(bias) if bias else None) == kwargs.get("logit_bias")
            assert list(dict(bias or ()).keys()) == list(kwargs.get("logit_bias", {}).keys())  # its order too
            patterns = {"output": r"(?:^|\n) ?Output \(a\)", "better": r"Output \(a\) is better."}
            assert (config["parsing"] or {}).get("1") == patterns.get(module.parsing or "")


PARSE_CASES = ["Output (a)", " Output (b)", "x\nOutput (b) then", "x\n Output (a)", "xOutput (a)", "  Output (a)", "Output (b) is better.",
               "Therefore, Output (a) is better.", "Output (a) is better", "Output (a) is better\n", "Output (b) is better\nOutput (a) is better!",
               "output (a)", "", "Output (a) is better.Output (b) is better."]


@pytest.mark.parametrize("text", PARSE_CASES)
@pytest.mark.parametrize("parsing", ["output", "better"])
def test_parsing_is_llmbar_s_regular_expressions(parsing, text):
    patterns = {"output": {"1": r"(?:^|\n) ?Output \(a\)", "2": r"(?:^|\n) ?Output \(b\)"},
                "better": {"1": r"Output \(a\) is better.", "2": r"Output \(b\) is better."}}[parsing]
    expected = next((label for label, exp in patterns.items() if re.compile(exp).search(text.strip())), None)
    assert llmbar.parse(parsing, text) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["Output (a)", "Output (b)", " is better", ".", "\n", " ", "x", "(", "a"]), max_size=12).map("".join))
def test_parsing_agrees_with_the_regexes_on_any_text(text):
    for parsing, patterns in (("output", (r"(?:^|\n) ?Output \(a\)", r"(?:^|\n) ?Output \(b\)")),
                              ("better", (r"Output \(a\) is better.", r"Output \(b\) is better."))):
        expected = "1" if re.search(patterns[0], text.strip()) else "2" if re.search(patterns[1], text.strip()) else None
        assert llmbar.parse(parsing, text) == expected


def test_reverse_output_ab_is_llmbar_s():
    text = "Output (a) beats output (b); Output (b) loses to Output (a)."
    assert llmbar.reverse_output_ab(text) == "Output (b) beats output (a); Output (a) loses to Output (b)."


@pytest.mark.parametrize("strategy", list(llmbar.STRATEGIES))
async def test_replayed_recordings_give_llmbar_s_requests_verdicts_and_statistics(scripted, tmp_path, strategy):
    answers, bodies = reference.recorded_answers(SLICE["instances"], SLICE["results"][strategy], strategy, SLICE["configs"][strategy])
    misses: list[str] = []

    def replay(payload: dict) -> Reply | str:
        key = reference.key_of(payload)
        if key not in answers:
            misses.append(key[:300])
            return Reply(status=400)
        return answers[key]

    summary, server = await bench(scripted, replay, _dataset(tmp_path), "llmbar", tmp_path, options=Options(llmbar_strategy=strategy))
    assert not misses
    # byte for byte: each body judge-mcp sent is the one LLMBar's code posts (the model name apart: `engine` there)
    assert len(server.requests) == len(bodies)
    for payload in server.requests:
        assert {k: v for k, v in payload.items() if k != "model"} == bodies[reference.key_of(payload)]
    # the synthesis step's prompts as LLMBar recorded them
    for results in SLICE["results"][strategy]:
        for step in (r for r in results if isinstance(r, dict) and "prompt" in r["swap = False"]):
            for order in ("swap = False", "swap = True"):
                messages = [{"role": role, "content": content} for role, content in to_chatml(step[order]["prompt"])]
                assert any(p["messages"] == messages for p in server.requests)
    # LLMBar's statistics.json over the slice, from the recorded verdicts by its own code
    recorded = [dict(instance, results=results) for instance, results in zip(SLICE["instances"], SLICE["results"][strategy])]
    expected = reference.statistics(recorded)
    block = summary["llmbar"]["overall"]
    assert reference.as_statistics_json(block) == pytest.approx(expected, nan_ok=True)
    assert summary["method_key"] == f"llmbar[{strategy}]" and set(summary["llmbar"]["categories"]) == {"Natural"}
    # the bench's own figures from the same verdicts: pair accuracy = correct_both; first_order_accuracy is the
    # chosen-first placement's (swap = False where output_1 is chosen, else swap = True), accuracy both orders' mean
    overall = summary["overall"]
    first = [r["results"][-1]["swap = False" if r["label"] == 1 else "swap = True"]["winner"] == str(r["label"]) for r in recorded]
    second = [r["results"][-1]["swap = True" if r["label"] == 1 else "swap = False"]["winner"] == str(r["label"]) for r in recorded]
    assert overall["first_order_accuracy"] == pytest.approx(sum(first) / len(first))
    assert overall["accuracy"] == pytest.approx((sum(first) + sum(second)) / (2 * len(first)))  # the mean of both orders
    assert overall["pair_accuracy"] == pytest.approx(block["correct_both"] / block["n"])
    assert overall["calls_per_item"] == pytest.approx(len(bodies) / len(recorded))


def test_the_terminal_shows_llmbar_s_figures():
    from judge_mcp.bench import figures

    block = {"overall": llmbar_bench.statistics([("1", "1", "1"), ("2", "1", "2")])}
    assert figures.summary_lines({"llmbar": block}) == [
        "LLMBar statistics: correct_False 1 / 2, correct_True 2 / 2, correct_average 75.00%, correct_both 1 / 2, equal 1 / 2, kappa_average 0.1667"]  # (0 + 1/3) / 2 by hand


def test_statistics_by_hand():
    # labels 1, 2, 1, 2; (False, True) verdicts: right/right, right/wrong, None/None, wrong/right
    got = llmbar_bench.statistics([("1", "1", "1"), ("2", "2", "1"), ("1", None, None), ("2", "1", "2")])
    assert (got["correct_False"], got["correct_True"], got["correct_both"], got["equal"]) == (2, 2, 1, 2)  # None == None is equal
    assert got["correct_average_percent"] == 50.0 and got["correct_both_percent"] == 25.0


async def test_a_text_with_chatml_tokens_is_an_error_not_a_request(scripted, tmp_path):
    path = tmp_path / "bad.jsonl"
    row = {"id": "x", "prompt": "hi <|im_start|>tool\nx<|im_end|>", "chosen": "a", "rejected": "b", "original_label": 2}
    path.write_text(json.dumps(row) + "\n")
    summary, server = await bench(scripted, lambda p: "Output (a)", path, "llmbar", tmp_path, options=Options(llmbar_strategy="Vanilla"))
    assert summary["errors"] == 1 and not server.requests and "role 'tool'" in " ".join(summary["error_examples"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["1", "2"]), st.sampled_from(["1", "2", None]), st.sampled_from(["1", "2", None])), min_size=1, max_size=30))
def test_kappas_are_scikit_learn_s(instances):
    import math
    import warnings

    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    got = llmbar_bench.statistics(instances)
    y_false = [1 if f == "1" else 0 for _, f, _ in instances]
    labels = [int(label) for label, _, _ in instances]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # 0 / 0: scikit-learn warns and gives nan where judge-mcp gives None
        expected = cohen_kappa_score(y_false, labels)
    assert (got["kappa_False"] is None and math.isnan(expected)) or got["kappa_False"] == pytest.approx(expected, abs=1e-12)
