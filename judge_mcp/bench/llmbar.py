"""LLMBar's evaluators exactly as LLMBar runs them (`judge-mcp bench --method llmbar --llmbar-strategy NAME`), so that
its published accuracies can be checked the way the other published judges' are.

Source: princeton-nlp/LLMBar @ 900616bf (MIT), `LLMEvaluator/evaluate.py` and the GPT-4 evaluators'
`LLMEvaluator/evaluators/config/GPT-4/NAME.json`; their prompt files are copied byte for byte into
judge_mcp/prompts/llmbar_*.txt (provenance: judge_mcp/prompts/PUBLISHED.md). What the code does, re-implemented
here from its behaviour:
- an instance is (input, output_1, output_2, label 1|2); judge-mcp's pairwise rows keep LLMBar's order in
  `original_label` (which of output_1 / output_2 is `chosen`);
- filling: Python's `str.format_map` of the prompt file with input, output_1, output_2 (and auxiliary_input_K,
  explanation_1/2), as there; the filled text cut into ChatML messages (`prompt_to_chatml`: the same split as
  AlpacaEval's, alpaca_eval.to_chatml);
- the request (`openai_completion`, openai-python 0.28 `ChatCompletion.create` with the config's openai_kwargs):
  the messages, `max_tokens` and `temperature` 0.0 of the config, and `logit_bias` as `process_openai_kwargs`
  builds it with GPT-4's tokenizer (tiktoken cl100k_base): -100 on each of `tokens_to_avoid` that is one token, +7
  on every token of `tokens_to_favor` ("Output (a)", "Output (b)"), in that insertion order; the `engine` is the
  backend's model here;
- auxiliary modules (Metrics, Reference): each asked once per instance with the input alone
  (`prompt.format(input=...)`), its answer stripped becomes auxiliary_input_K of the comparison prompt;
- the comparison asked in both orders (swap = False: output_1 as Output (a); swap = True: the outputs switched, its
  winner read back), parsing the stripped answer with the config's patterns, "1" tried first (`re.search`):
  `(?:^|\n) ?Output \\(a\\)` ("output") or `Output \\(a\\) is better.` ("better", CoT); no match: no winner;
- Swap and Swap_CoT (swap and synthesize): CoT in both orders; only when the two orders pick different outputs, the
  synthesis prompt in both orders with the two CoT answers as the debaters' explanations (their "Output (a)" /
  "Output (b)" swapped where the debater saw the other order, `reverse_OutputAB`), and its verdicts are final.
Not followed: LLMBar's retry loop and its shrinking of max_tokens on a context-length error (a failed call is the
bench's error here); other backends than OpenAI-compatible ones get no logit_bias (they have no such field).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from judge_mcp import prompts
from judge_mcp.backends.base import ChatRequest, Message
from judge_mcp.bench.alpaca_eval import ChatMLError, to_chatml
from judge_mcp.calls.context import CallContext
from judge_mcp.contract.args import JudgingArgs
from judge_mcp.contract.fields import JUDGED, MAX_TEXT_CHARS
from judge_mcp.contract.results import JudgedResult
from judge_mcp.methods import registry

__all__ = ["ChatMLError", "STRATEGIES", "LlmbarArgs", "LlmbarResult", "parse", "reverse_output_ab"]

TEMPERATURE = 0.0
AVOID = ("Both", "Neither", "None", " Both", " Neither", "Either", "depends", "context", "It", "both", "Sorry")
FAVOR = ("Output (a)", "Output (b)")
# GPT-4's tokenizer (tiktoken.encoding_for_model("gpt-4"), cl100k_base) on those strings, as process_openai_kwargs
# encodes them (computed with js-tiktoken 1.0.21's cl100k_base; no tokenizer ships with judge-mcp)
TOKEN_IDS: dict[str, tuple[int, ...]] = {
    "Both": (21279,), "Neither": (63295,), "None": (4155,), " Both": (11995,), " Neither": (25215,), "Either": (50344,),
    "depends": (59047,), "context": (2196,), "It": (2181,), "both": (21704,), "Sorry": (19701,),
    "Output (a)": (5207, 320, 64, 8), "Output (b)": (5207, 320, 65, 8),
}
AVOID_BIAS, FAVOR_BIAS = -100, 7


@dataclass(frozen=True)
class Module:
    """One entry of an evaluator's config: its prompt file, max_tokens, the biases it sends, how it is parsed."""

    prompt: str  # LLMBar's path under evaluators/prompts
    max_tokens: int
    avoid: bool = False  # tokens_to_avoid
    favor: bool = False  # tokens_to_favor
    parsing: Literal["output", "better"] | None = None  # None: an auxiliary module (its answer is an input)

    @property
    def template(self) -> str:
        return "llmbar_" + self.prompt.replace("/", "_")


def _comparison(name: str) -> Module:
    return Module(f"comparison/{name}.txt", 50, True, True, "output")


COT = Module("comparison/CoT.txt", 300, True, False, "better")
METRICS, REFERENCE = Module("auxiliary/Metrics.txt", 150), Module("auxiliary/Reference.txt", 384)
# the GPT-4 evaluators' configs (LLMEvaluator/evaluators/config/GPT-4/NAME.json)
STRATEGIES: dict[str, tuple[Module, ...]] = {
    "Vanilla": (_comparison("Vanilla"),),
    "Vanilla_NoRules": (_comparison("Vanilla_NoRules"),),
    "Vanilla_1shot": (_comparison("Vanilla_1shot"),),
    "Vanilla_2shot": (_comparison("Vanilla_2shot"),),
    "CoT": (COT,),
    "Metrics": (METRICS, _comparison("Metrics")),
    "Reference": (REFERENCE, _comparison("Reference")),
    "Metrics_Reference": (METRICS, REFERENCE, _comparison("Metrics_Reference")),
    "Swap": (COT, Module("swap_and_synthesize/Swap.txt", 50, True, True, "output")),
    "Swap_CoT": (COT, Module("swap_and_synthesize/Swap_CoT.txt", 300, True, False, "better")),
}
SWAP_BASED = ("Swap", "Swap_CoT")
Strategy = Literal["Vanilla", "Vanilla_NoRules", "Vanilla_1shot", "Vanilla_2shot", "CoT", "Metrics", "Reference", "Metrics_Reference", "Swap", "Swap_CoT"]


def logit_bias(module: Module) -> tuple[tuple[int, int], ...] | None:
    """`process_openai_kwargs`'s logit_bias for the module, in its insertion order; None when it sends none."""
    bias: dict[int, int] = {}
    for text in AVOID if module.avoid else ():
        if len(TOKEN_IDS[text]) == 1:
            bias[TOKEN_IDS[text][0]] = AVOID_BIAS
    for text in FAVOR if module.favor else ():
        for token in TOKEN_IDS[text]:
            bias[token] = FAVOR_BIAS
    return tuple(bias.items()) or None


def fill(module: Module, values: dict[str, str]) -> str:
    """The prompt file filled as LLMBar fills it (`str.format_map`: a value's own braces are never read)."""
    return prompts.load(module.template).format_map(values)


def request(module: Module, prompt: str) -> ChatRequest:
    """LLMBar's request for a filled prompt."""
    messages = to_chatml(prompt)
    system = messages[0][1] if messages[0][0] == "system" else None
    rest = messages[1:] if system is not None else messages
    return ChatRequest(
        messages=tuple(Message(role, content) for role, content in rest), system=system, temperature=TEMPERATURE,
        max_tokens=module.max_tokens, logit_bias=logit_bias(module), purpose=f"llmbar:{module.prompt}", cache_hints=False,
    )


def _after_line_start(text: str, needle: str) -> bool:
    """`re.search(r"(?:^|\\n) ?" + needle)` without a regex: at the start or after a newline, one optional space."""
    return text.startswith(needle) or text.startswith(" " + needle) or ("\n" + needle) in text or ("\n " + needle) in text


def _then_not_newline(text: str, needle: str) -> bool:
    """`re.search(needle + ".")`: the needle followed by a character other than a newline."""
    at = text.find(needle)
    while at != -1:
        end = at + len(needle)
        if end < len(text) and text[end] != "\n":
            return True
        at = text.find(needle, at + 1)
    return False


def parse(parsing: str, completion: str) -> str | None:
    """LLMBar's `completion_with_parsing` on a completion: "1" (Output (a)), "2" (Output (b)) or None; linear."""
    text = completion.strip()
    for label, letter in (("1", "a"), ("2", "b")):
        needle = f"Output ({letter})"
        if parsing == "output" and _after_line_start(text, needle):
            return label
        if parsing == "better" and _then_not_newline(text, needle + " is better"):
            return label
    return None


def reverse_label(label: str | None) -> str | None:
    return {"1": "2", "2": "1"}.get(label or "")


def reverse_output_ab(explanation: str) -> str:
    """LLMBar's `reverse_OutputAB`: "Output (a)" and "Output (b)" (and lower-case "output") swapped, by its markers."""
    for output in ("Output", "output"):
        explanation = explanation.replace(f"{output} (a)", f"**********{output} (a)**********")
        explanation = explanation.replace(f"{output} (b)", f"##########{output} (b)##########")
        explanation = explanation.replace(f"**********{output} (a)**********", f"{output} (b)")
        explanation = explanation.replace(f"##########{output} (b)##########", f"{output} (a)")
    return explanation


AnyText = Annotated[str, Field(max_length=MAX_TEXT_CHARS), JUDGED]


class LlmbarArgs(JudgingArgs):
    """One LLMBar instance: the input (instruction), output_1 and output_2 in LLMBar's order, and the evaluator."""

    tool: ClassVar[str] = "llmbar"

    instruction: AnyText
    output_1: AnyText
    output_2: AnyText
    strategy: Strategy = "Vanilla"


class LlmbarResult(JudgedResult):
    winner_false: Literal["1", "2"] | None = Field(description="the final verdict with output_1 shown as Output (a); null: unparsed")
    winner_true: Literal["1", "2"] | None = Field(description="the final verdict with the outputs switched, read back to output_1/2")
    synthesized: bool = Field(description="Swap strategies: the orders disagreed and the synthesis step gave the final verdicts")
    parse_ok: bool
    completions: list[str] = Field(description="the final step's answers, swap = False then swap = True")
    auxiliary: list[str] = Field(default_factory=list, description="the auxiliary modules' answers (metrics, reference)")


async def _ask(judge: CallContext, module: Module, values: dict[str, str]) -> str:
    """One call (`Complete`); LLMBar reads a missing content as ""."""
    completion = await judge.complete(request(module, fill(module, values)))
    return completion.text or ""


async def _both_orders(judge: CallContext, module: Module, values: dict[str, str], args: LlmbarArgs,
                       debate: list[tuple[str, str | None]] | None = None) -> list[tuple[str, str | None]]:
    """(stripped completion, winner read back to output_1/2) for swap = False and swap = True."""
    asks = []
    for swap in (False, True):
        filled = dict(values, output_1=args.output_2 if swap else args.output_1, output_2=args.output_1 if swap else args.output_2)
        if debate is not None:
            first, second = _explanations(debate, swap)
            filled.update(explanation_1=second if swap else first, explanation_2=first if swap else second)
        asks.append(_ask(judge, module, filled))
    answers = await asyncio.gather(*asks)
    out = []
    for swap, answer in zip((False, True), answers):
        winner = parse(module.parsing or "output", answer)
        out.append((answer.strip(), reverse_label(winner) if swap else winner))
    return out


def _explanations(debate: list[tuple[str, str | None]], swap: bool) -> tuple[str, str]:
    """LLMBar's explanation_1 / explanation_2 for one order of the synthesis step, from the two CoT answers: the one
    that picked output_1 and the one that picked output_2, each with its "Output (a)" / "Output (b)" swapped where
    it was written in the other order than `swap`."""
    winner2swap = {debate[0][1]: False, debate[1][1]: True}
    actual = {label: debate[1 if winner2swap[label] else 0][0] for label in ("1", "2")}
    one = actual["1"] if swap == winner2swap["1"] else reverse_output_ab(actual["1"])
    two = actual["2"] if swap == winner2swap["2"] else reverse_output_ab(actual["2"])
    return one, two


async def llmbar_judge(judge: CallContext, args: LlmbarArgs | None = None, /, **fields: Any) -> LlmbarResult:
    """One instance judged by an LLMBar evaluator."""
    args = LlmbarArgs.of(args, fields)
    modules = STRATEGIES[args.strategy]
    values = {"input": args.instruction}
    auxiliary: list[str] = []
    synthesized = False
    if args.strategy in SWAP_BASED:
        final = await _both_orders(judge, modules[0], values, args)
        if {final[0][1], final[1][1]} == {"1", "2"}:
            synthesized = True
            final = await _both_orders(judge, modules[1], values, args, final)
    else:
        for k, module in enumerate(modules[:-1]):
            answer = (await _ask(judge, module, {"input": args.instruction})).strip()
            auxiliary.append(answer)
            values[f"auxiliary_input_{k}"] = answer
        final = await _both_orders(judge, modules[-1], values, args)
    return LlmbarResult(
        winner_false=final[0][1], winner_true=final[1][1], synthesized=synthesized,  # type: ignore[arg-type]
        parse_ok=final[0][1] is not None and final[1][1] is not None, completions=[c for c, _ in final], auxiliary=auxiliary,
        model=judge.model_id, usage=judge.usage(),
    )


registry.register(llmbar_judge, LlmbarArgs, LlmbarResult)
