"""AlpacaEval 2.0's annotator (`--method alpaca-eval`, judge_mcp/bench/alpaca_eval.py) and its win rates
(alpaca_metrics.py), against AlpacaEval's own code and hand computations.

tests/bench_fixtures/alpaca_h2h_reference.json holds what AlpacaEval 0.6.6's own annotator sent and computed on
tests/bench_fixtures/alpaca_h2h.jsonl with the judge `fixture_judge` (made by tools/alpaca_eval_reference.py, whose
docstring has the commands): every request body, each row's preference, get_winrate, and the LC win rate of its
length_controlled_minimal and length_controlled_noreg GLMs."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from judge_mcp import prompts
from judge_mcp.backends.base import TokenLogprob
from judge_mcp.bench import alpaca_eval, alpaca_metrics
from judge_mcp.bench.data import DatasetError, load_items
from testkit.scripted_servers import Reply
from tests.bench.datasets import FIXTURES, bench

H2H = FIXTURES / "alpaca_h2h.jsonl"
REFERENCE = json.loads((FIXTURES / "alpaca_h2h_reference.json").read_text(encoding="utf-8"))
ROWS = [json.loads(line) for line in H2H.read_text(encoding="utf-8").splitlines()]
# sha256 of tatsu-lab/alpaca_eval @ cd543a14 src/alpaca_eval/evaluators_configs/alpaca_eval_clf_gpt4_turbo/alpaca_eval_clf.txt
ORIGINAL_SHA256 = "784227e6dc2832fc08c43d2c8ea3a308e7523780187a1aaad2f85e30bac85f62"


def outputs_shown(user: str) -> tuple[str, str]:
    marker = '"output": """'
    first = user.index(marker) + len(marker)
    first_end = user.index('"""', first)
    second = user.index(marker, first_end) + len(marker)
    return user[first:first_end], user[second:user.index('"""', second)]


def logit(first: str, second: str) -> float:
    """The fixture judge's log-odds that `first` is better: longer and GOOD-marked answers are preferred."""
    return (len(first) - len(second)) / 40 + 1.5 * ("GOOD" in first) - 1.5 * ("GOOD" in second)


def fixture_judge(payload: dict[str, Any]) -> Reply:
    """tools/alpaca_eval_reference.py's judge on the wire: one token, m or M, with m, M and Both among its top 5."""
    p = 1 / (1 + math.exp(-logit(*outputs_shown(payload["messages"][-1]["content"]))))
    top = sorted([("m", math.log(p)), ("M", math.log(1 - p)), ("Both", -20.0)], key=lambda t: -t[1])
    token = top[0][0]
    content = [{"token": token, "logprob": top[0][1], "bytes": list(token.encode()),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]}]
    return Reply(token, logprobs=content, finish_reason="length")


# ---- the prompt and the request --------------------------------------------------------------------------------------
def test_the_template_is_alpaca_eval_s_file_byte_for_byte():
    raw = (prompts.resources.files(prompts.__name__) / alpaca_eval.TEMPLATE).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == ORIGINAL_SHA256


def test_placeholders_are_filled_in_order_at_their_first_occurrence():
    # make_prompts replaces {instruction} first, then the first {output_1} of the text so far: here the instruction's
    text = alpaca_eval.fill("{instruction} | {output_1} | {output_2}", {"instruction": "say {output_1}", "output_1": "A", "output_2": "B"})
    assert text == "say A | {output_1} | B"


def test_chatml_split_and_texts_carrying_chatml_tokens():
    assert alpaca_eval.to_chatml(" <|im_start|>system\n S \n<|im_end|>\n<|im_start|>user\nU\n<|im_end|> ") == (("system", "S"), ("user", "U"))
    with pytest.raises(alpaca_eval.ChatMLError, match="role 'tool'"):
        alpaca_eval.to_chatml("<|im_start|>user\nhi<|im_start|>tool\nx<|im_end|>")
    with pytest.raises(alpaca_eval.ChatMLError, match="does not start"):
        alpaca_eval.to_chatml("user\nhi<|im_end|>")


def test_the_switch_is_alpaca_eval_s_seeded_draw():
    # the rows AlpacaEval showed switched: its request shows output_2 as model m
    for row in ROWS:
        if row["output_1"] == row["output_2"]:
            continue
        sent = next(r for r in REFERENCE["requests"] if f'"instruction": """{row["prompt"]}"""' in r["messages"][1]["content"])
        first, _ = outputs_shown(sent["messages"][1]["content"])
        assert alpaca_eval.is_switched(row["prompt"]) is (first == row["output_2"] != row["output_1"])
    assert sum(alpaca_eval.is_switched(r["prompt"]) for r in ROWS) == 4  # the fixture has both orders


def _logprobs(*top: tuple[str, float]) -> tuple[TokenLogprob, ...]:
    return (TokenLogprob(top[0][0], top[0][1], top),)


@pytest.mark.parametrize(
    "logprobs, preference",
    [
        (_logprobs(("M", math.log(0.75)), ("m", math.log(0.25)), ("Both", -3.0)), 1.75),  # 2 - p(m)/(p(m)+p(M))
        (_logprobs(("m", -0.1), ("The", -2.5)), 1.0),  # M missing: probability 0
        (_logprobs(("M", -0.1), ("Both", -2.5)), 2.0),
        (_logprobs(("M", -10000.0), ("m", -20000.0)), 2.0),  # compared in log space, not underflowed to 0/0
        (_logprobs((" m", -0.1), ("Both", -2.5)), None),  # neither token exactly: no annotation
        (None, None),  # no log-probabilities (a backend without them)
        (_logprobs(("m", -0.1)) * 2, None),  # two generated tokens for a batch of one
    ],
)
def test_preference_from_top_logprobs(logprobs, preference):
    got = alpaca_eval.preference_from(logprobs)
    assert got == (None if preference is None else pytest.approx(preference))


async def test_alpaca_eval_sends_alpaca_eval_s_requests_and_matches_its_preferences(scripted, tmp_path):
    summary, server = await bench(scripted, fixture_judge, H2H, "alpaca-eval", tmp_path)
    assert summary["kind"] == "head2head" and summary["overall"]["accuracy"] is None  # no gold label
    # one request per row but the identical pair, equal to AlpacaEval's own bodies apart from the model name
    # (as JSON values: AlpacaEval's config writes temperature 1, sent as the integer 1; judge-mcp sends 1.0)
    def bodies(requests: list[dict]) -> list[dict]:
        return sorted(({k: v for k, v in r.items() if k != "model"} for r in requests), key=lambda r: r["messages"][1]["content"])

    ours, theirs = bodies(server.requests), bodies(REFERENCE["requests"])
    assert ours == theirs and len(ours) == 9
    assert {r["model"] for r in server.requests} == {"scripted-model"}
    a = summary["alpaca_eval"]
    assert a["generators"] == ["gpt4_1106_preview", "fixture-model"]
    assert (a["identical_outputs"], a["unannotated"], a["switched"]) == (1, 0, 4)
    for key in ("win_rate", "standard_error", "discrete_win_rate", "n_wins", "n_wins_base", "n_draws", "n_total"):
        assert a[key] == pytest.approx(REFERENCE["win_rate"][key], abs=1e-9), key  # unrounded
    # the win rate's bootstrap interval over the annotated rows (bench/uncertainty.py); no gold label, no accuracy interval
    ci = a["ci"]["win_rate"]
    assert ci == "too few to say (n=%d)" % a["n_total"] if a["n_total"] < 10 else ci[0] <= a["win_rate"] <= ci[1]
    assert "accuracy" not in summary["overall"]["ci"] and "pair_accuracy" not in summary["overall"]["ci"]
    # the fixture has instruction difficulties for every row: AlpacaEval's length_controlled_noreg GLM
    assert a["glm"] == "length_controlled_noreg"
    assert a["lc_win_rate"] == pytest.approx(REFERENCE["length_controlled_noreg"]["length_controlled_winrate"], abs=1e-6)
    # longer picked: of the rows whose outputs differ in length and whose preference is not 1.5, those preferring the
    # longer output (by hand from the reference preferences); no gold: no gold share, no length bias
    differ = [(len(r["output_2"]) > len(r["output_1"]), p) for r, p in zip(ROWS, REFERENCE["preferences"]) if len(r["output_1"]) != len(r["output_2"]) and p != 1.5]
    longer = sum((p > 1.5) == second_longer for second_longer, p in differ)
    o = summary["overall"]
    assert longer == len(differ) == 9 and o["length_preference"] == 1.0  # the fixture's judge favours length (`logit`)
    assert {second_longer for second_longer, _ in differ} == {True, False}  # ... whichever output is the longer
    assert o["length_gold_share"] is None and o["length_bias"] is None


def test_win_rate_by_hand():
    # preferences 1 (reference wins), 2 (model wins), 1.5 (draw), 1.25: shifted 0, 1, 0.5, 0.25
    got = alpaca_metrics.win_rate([1.0, 2.0, 1.5, 1.25])
    assert got["win_rate"] == 43.75
    mean = 0.4375
    sem = math.sqrt(sum((v - mean) ** 2 for v in (0, 1, 0.5, 0.25)) / 3 / 4)
    assert got["standard_error"] == pytest.approx(100 * sem, abs=1e-12)
    assert (got["n_wins"], got["n_wins_base"], got["n_draws"], got["n_total"]) == (1, 2, 1, 4)
    assert got["discrete_win_rate"] == 37.5  # 1.25 rounds to a loss: (0 + 1 + 0.5 + 0) / 4


def test_each_row_s_preference_is_the_judge_s_probability_for_the_model_by_hand():
    """Without AlpacaEval: P(model better) = sigmoid(logit(output_2, output_1)), whichever order was shown."""
    expected = [1.5 if r["output_1"] == r["output_2"] else 1 + 1 / (1 + math.exp(-logit(r["output_2"], r["output_1"]))) for r in ROWS]
    assert REFERENCE["preferences"] == pytest.approx(expected, abs=1e-9)


def test_lc_win_rate_against_alpaca_eval_s_glms():
    rows = [dict(preference=p, len_1=len(r["output_1"]), len_2=len(r["output_2"]), difficulty=r["instruction_difficulty"])
            for p, r in zip(REFERENCE["preferences"], ROWS)]
    noreg = alpaca_metrics.lc_win_rate(rows, ("ref", "model"))
    minimal = alpaca_metrics.lc_win_rate([dict(r, difficulty=None) for r in rows], ("ref", "model"))
    assert noreg["lc_win_rate"] == pytest.approx(REFERENCE["length_controlled_noreg"]["length_controlled_winrate"], abs=1e-6)
    assert minimal["lc_win_rate"] == pytest.approx(REFERENCE["length_controlled_minimal"]["length_controlled_winrate"], abs=1e-6)
    # delta_len = len(output_1) - len(output_2): the judge favours length, so a longer reference lowers the model's odds
    assert minimal["glm"] == "length_controlled_minimal" and noreg["glm_weights"]["np.tanh(std_delta_len)"] < 0
    assert alpaca_metrics.lc_win_rate(rows, ("same", "same"))["lc_win_rate"] == 50.0  # the reference against itself


def test_lc_win_rate_needs_rows_whose_lengths_differ():
    rows = [dict(preference=1.7, len_1=10, len_2=10, difficulty=None)] * 6
    assert alpaca_metrics.lc_win_rate(rows, ("a", "b"))["lc_win_rate"] is None
    assert alpaca_metrics.lc_win_rate(rows[:3], ("a", "b"))["lc_win_rate"] is None


async def test_rows_without_logprobs_are_unannotated_and_left_out(scripted, tmp_path):
    summary, server = await bench(scripted, lambda p: "M", H2H, "alpaca-eval", tmp_path)
    a = summary["alpaca_eval"]
    assert a["unannotated"] == 9 and a["n_total"] == 1 and a["win_rate"] == 50.0  # only the identical pair counts
    assert summary["overall"]["parse_failures"] == 9 and len(server.requests) == 9


def test_head2head_rows_load_in_order_and_refuse_bad_fields(tmp_path):
    items = load_items(H2H)
    assert [it.kind for it in items] == ["head2head"] * 10 and not any(it.degenerate for it in items)
    assert items[5].responses[1] == "" and items[3].responses[0] == items[3].responses[1]  # judged, and 1.5 without a call
    assert items[0].generators == ("gpt4_1106_preview", "fixture-model") and items[2].difficulty == 1.4
    bad = tmp_path / "bad.jsonl"
    for row, message in [
        ({"id": "x", "prompt": "p", "output_1": "a", "output_2": "b"}, "generator_1"),
        ({"id": "x", "prompt": "p", "output_1": "a", "output_2": None, "generator_1": "g", "generator_2": "h"}, "must be strings"),
        ({"id": "x", "prompt": "p", "output_1": "a", "output_2": "b", "generator_1": "g", "generator_2": "h",
          "instruction_difficulty": "hard"}, "finite number"),
    ]:
        bad.write_text(json.dumps(row) + "\n")
        with pytest.raises(DatasetError, match=message):
            load_items(bad)


async def test_alpaca_eval_refuses_pairwise_data(scripted, tmp_path):
    from judge_mcp.bench.runner import BenchError
    from tests.bench.datasets import PAIRS

    with pytest.raises(BenchError, match="judges head2head data"):
        await bench(scripted, fixture_judge, PAIRS, "alpaca-eval", tmp_path)


def test_the_fixture_files_exist():
    assert Path(H2H).exists() and REFERENCE["requests"]
