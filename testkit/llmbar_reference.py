"""LLMBar's own evaluation code, run beside judge-mcp's `llmbar` bench method in the tests and the replay: the functions
of princeton-nlp/LLMBar @ 900616bf `LLMEvaluator/evaluate.py` (MIT, (c) Princeton NLP) that build, send and parse
the requests and compute statistics.json, copied with three changes only, each marked `# changed:`
- `Complete` is a function given by the caller (there: openai-python 0.28, which posts {messages, **openai_kwargs}
  less `engine` and `request_timeout`: `request_body` below is that body);
- `tiktoken.encoding_for_model("gpt-4").encode` is a table of the cl100k_base ids of the config's strings
  (`CL100K`, computed with js-tiktoken 1.0.21; tiktoken downloads its vocabulary, which a test cannot);
- `cohen_kappa_score` is scikit-learn's, imported here.
A test double: nothing in the judge_mcp package imports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge_mcp import prompts

CL100K = {
    "Both": [21279], "Neither": [63295], "None": [4155], " Both": [11995], " Neither": [25215], "Either": [50344],
    "depends": [59047], "context": [2196], "It": [2181], "both": [21704], "Sorry": [19701],
    "Output (a)": [5207, 320, 64, 8], "Output (b)": [5207, 320, 65, 8],
}
NON_SWAP = ("Vanilla", "Vanilla_NoRules", "Vanilla_1shot", "Vanilla_2shot", "CoT", "Metrics", "Reference", "Metrics_Reference")
SWAP_BASED = ("Swap", "Swap_CoT")


def prompt_to_chatml(prompt: str, start_token: str = "<|im_start|>", end_token: str = "<|im_end|>"):
    prompt = prompt.strip()
    assert prompt.startswith(start_token)
    assert prompt.endswith(end_token)

    def string_to_dict(to_convert):
        return {s.split("=", 1)[0]: s.split("=", 1)[1] for s in to_convert.split(" ") if len(s) > 0}

    message = []
    for p in prompt.split("<|im_start|>")[1:]:
        newline_splitted = p.split("\n", 1)
        role = newline_splitted[0].strip()
        content = newline_splitted[1].split(end_token, 1)[0].strip()

        if role.startswith("system") and role != "system":
            other_params = string_to_dict(role.split("system", 1)[-1])
            role = "system"
        else:
            other_params = dict()

        message.append(dict(content=content, role=role, **other_params))

    return message


def process_openai_kwargs(model_name, openai_kwargs: dict):
    encode = CL100K.__getitem__  # changed: tiktoken.encoding_for_model(model_name).encode
    logit_bias = {}

    if "tokens_to_avoid" in openai_kwargs:
        for t in openai_kwargs["tokens_to_avoid"]:
            curr_tokens = encode(t)
            if len(curr_tokens) != 1:
                continue
            for tok_id in curr_tokens:
                logit_bias[tok_id] = -100  # avoids certain tokens
        openai_kwargs.pop("tokens_to_avoid")

    if "tokens_to_favor" in openai_kwargs:
        for t in openai_kwargs["tokens_to_favor"]:
            curr_tokens = encode(t)
            for tok_id in curr_tokens:
                logit_bias[tok_id] = 7  # increase log prob of tokens to match
        openai_kwargs.pop("tokens_to_favor")

    if logit_bias:
        openai_kwargs["logit_bias"] = logit_bias

    return openai_kwargs


def get_modules(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`get_modules` for an OpenAI evaluator's config; the prompt files read from judge-mcp's byte-for-byte copies
    (judge_mcp/prompts/llmbar_DIR_NAME.txt, their sha256 pinned by the tests)."""
    out = []
    for config in json.loads(json.dumps(configs)):
        prompt = prompts.load("llmbar_" + config["prompt"].replace("/", "_"))  # changed: evaluators/prompts/DIR/NAME.txt
        out.append({"prompt": prompt, "openai_kwargs": process_openai_kwargs(config["model_name"], config["openai_kwargs"]),
                    "parsing": config["parsing"]})
    return out


def request_body(prompt: str, openai_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body openai-python 0.28's ChatCompletion.create(messages=..., request_timeout=30, **openai_kwargs)
    posts: `engine` goes to the URL, `request_timeout` to the client; integer logit_bias keys become strings."""
    params = {"messages": prompt_to_chatml(prompt), **{k: v for k, v in openai_kwargs.items() if k != "engine"}}
    return json.loads(json.dumps(params))


def annotate(instance: dict[str, Any], evaluator: str, modules: list[dict[str, Any]], Complete: Callable[[str, dict], str]):  # noqa: N803, C901 (LLMBar's)
    """`annotate` (NonSwap and SwapBased), Complete(prompt, module) -> the completion text."""

    def completion_with_parsing(prompt, module):
        completion = Complete(prompt, module)
        completion = completion.strip()
        parsing: dict = module["parsing"]
        for return_value, exp in parsing.items():
            if (re.compile(exp)).search(completion):
                return completion, return_value
        return completion, None

    def reverse_label(label):
        if label is None:
            return None
        elif label == "1":
            return "2"
        elif label == "2":
            return "1"
        else:
            raise NotImplementedError

    results = []
    if evaluator in NON_SWAP:
        final_kwargs = dict(input=instance["input"])

        for index, module in enumerate(modules[:-1]):
            prompt = module["prompt"].format(input=instance["input"])
            auxiliary_input = Complete(prompt, module)
            auxiliary_input = auxiliary_input.strip()
            results.append([auxiliary_input, ""])
            final_kwargs["auxiliary_input_{}".format(index)] = auxiliary_input

        module = modules[-1]
        result = {}
        for swap in (False, True):
            final_kwargs["output_1"] = instance["output_1"] if not swap else instance["output_2"]
            final_kwargs["output_2"] = instance["output_2"] if not swap else instance["output_1"]
            prompt = module["prompt"].format_map(final_kwargs)
            completion, winner = completion_with_parsing(prompt, module)
            result["swap = {}".format(swap)] = {"completion": [completion, ""], "winner": winner if not swap else reverse_label(winner)}
        results.append(result)
    elif evaluator in SWAP_BASED:
        final_kwargs = dict(input=instance["input"])
        module = modules[0]
        result = {}
        for swap in (False, True):
            final_kwargs["output_1"] = instance["output_1"] if not swap else instance["output_2"]
            final_kwargs["output_2"] = instance["output_2"] if not swap else instance["output_1"]
            prompt = module["prompt"].format_map(final_kwargs)
            completion, winner = completion_with_parsing(prompt, module)
            result["swap = {}".format(swap)] = {"completion": [completion, ""], "winner": winner if not swap else reverse_label(winner)}
        results.append(result)

        if {result["swap = False"]["winner"], result["swap = True"]["winner"]} == {"1", "2"}:
            winner2swap = {
                result["swap = False"]["winner"]: False,
                result["swap = True"]["winner"]: True,
            }
            actual_explanation_1 = result["swap = {}".format(winner2swap["1"])]["completion"][0]
            actual_explanation_2 = result["swap = {}".format(winner2swap["2"])]["completion"][0]

            module = modules[1]
            result = {}
            for swap in (False, True):
                final_kwargs["output_1"] = instance["output_1"] if not swap else instance["output_2"]
                final_kwargs["output_2"] = instance["output_2"] if not swap else instance["output_1"]

                def reverse_OutputAB(explanation):  # noqa: N802
                    for output in ("Output", "output"):
                        explanation = explanation.replace("{} (a)".format(output), "**********{} (a)**********".format(output))
                        explanation = explanation.replace("{} (b)".format(output), "##########{} (b)##########".format(output))
                        explanation = explanation.replace("**********{} (a)**********".format(output), "{} (b)".format(output))
                        explanation = explanation.replace("##########{} (b)##########".format(output), "{} (a)".format(output))
                    return explanation
                explanation_1 = actual_explanation_1 if swap == winner2swap["1"] else reverse_OutputAB(actual_explanation_1)
                explanation_2 = actual_explanation_2 if swap == winner2swap["2"] else reverse_OutputAB(actual_explanation_2)

                final_kwargs["explanation_1"] = explanation_1 if not swap else explanation_2
                final_kwargs["explanation_2"] = explanation_2 if not swap else explanation_1
                prompt = module["prompt"].format_map(final_kwargs)

                completion, winner = completion_with_parsing(prompt, module)
                result["swap = {}".format(swap)] = {"prompt": prompt, "completion": [completion, ""], "winner": winner if not swap else reverse_label(winner)}
            results.append(result)
    else:
        raise NotImplementedError
    instance["results"] = results
    return instance


def statistics(dataset: list[dict[str, Any]]) -> dict[str, Any]:
    """evaluate.py's statistics.json of annotated instances (each with `label` and `results`)."""
    from sklearn.metrics import cohen_kappa_score  # changed: imported here (the bench extra's)

    correct_False, correct_True, correct_both, equal = 0, 0, 0, 0  # noqa: N806
    kappa_y1_False, kappa_y1_True, kappa_y2 = [], [], []  # noqa: N806
    for instance in dataset:
        label = str(instance["label"])
        output_False = instance["results"][-1]["swap = False"]["winner"]  # noqa: N806
        output_True = instance["results"][-1]["swap = True"]["winner"]  # noqa: N806
        correct_False += (output_False == label)  # noqa: N806
        correct_True += (output_True == label)  # noqa: N806
        correct_both += ((output_False == label) and (output_True == label))  # noqa: N806
        equal += (output_True == output_False)

        label = instance["label"]
        output_False = int(output_False) if output_False in ("0", "1") else 0  # noqa: N806
        output_True = int(output_True) if output_True in ("0", "1") else 0  # noqa: N806
        kappa_y1_False.append(output_False)
        kappa_y1_True.append(output_True)
        kappa_y2.append(label)

    statistics = {
        "correct_False": "{} / {} = {}%".format(correct_False, len(dataset), correct_False / len(dataset) * 100),
        "correct_True": "{} / {} = {}%".format(correct_True, len(dataset), correct_True / len(dataset) * 100),
        "correct_average": "{}%".format((correct_False + correct_True) / 2 / len(dataset) * 100),
        "correct_both": "{} / {} = {}%".format(correct_both, len(dataset), correct_both / len(dataset) * 100),
        "equal": "{} / {} = {}%".format(equal, len(dataset), equal / len(dataset) * 100),
    }
    statistics["kappa_False"] = cohen_kappa_score(kappa_y1_False, kappa_y2)
    statistics["kappa_True"] = cohen_kappa_score(kappa_y1_True, kappa_y2)
    statistics["kappa_average"] = (statistics["kappa_False"] + statistics["kappa_True"]) / 2
    statistics["kappa_agreement"] = cohen_kappa_score(kappa_y1_False, kappa_y1_True)
    return statistics


def as_statistics_json(figures: dict[str, Any]) -> dict[str, Any]:
    """judge-mcp's `llmbar` summary figures in statistics.json's own form (its strings), for comparing them."""
    n = figures["n"]
    out = {key: "{} / {} = {}%".format(figures[key], n, figures[key] / n * 100) for key in ("correct_False", "correct_True")}
    out["correct_average"] = "{}%".format((figures["correct_False"] + figures["correct_True"]) / 2 / n * 100)
    out.update({key: "{} / {} = {}%".format(figures[key], n, figures[key] / n * 100) for key in ("correct_both", "equal")})
    for key in ("kappa_False", "kappa_True", "kappa_average", "kappa_agreement"):
        out[key] = figures[key]
    return out


def recorded_answers(instances: list[dict[str, Any]], recorded: list[list[Any]], evaluator: str,
                     configs: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Replaying LLMBar's recording through its own code: ({request key: the recorded completion}, {request key:
    LLMBar's request body}) for every request annotate() sends, answered in order with what was recorded (an
    auxiliary module's text, then each order's completion). The key is the body's messages as JSON."""
    answers: dict[str, str] = {}
    bodies: dict[str, dict[str, Any]] = {}
    modules = get_modules(configs)
    for instance, results in zip(instances, recorded):
        queue = [r[0] for r in results if isinstance(r, list)]
        for step in [r for r in results if isinstance(r, dict)]:
            queue += [step["swap = False"]["completion"][0], step["swap = True"]["completion"][0]]

        def complete(prompt: str, module: dict[str, Any], queue: list[str] = queue) -> str:
            body = request_body(prompt, module["openai_kwargs"])
            key = json.dumps(body["messages"], ensure_ascii=False)
            answers[key], bodies[key] = queue.pop(0), body
            return answers[key]

        annotate(dict(instance), evaluator, modules, complete)
    return answers, bodies


def key_of(payload: dict[str, Any]) -> str:
    """The request key of a body judge-mcp sent (its messages as LLMBar's prompt_to_chatml gives them)."""
    return json.dumps([{"content": m["content"], "role": m["role"]} for m in payload["messages"]], ensure_ascii=False)


def load_slice(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))
