"""AlpacaEval 2.0's default annotator, `weighted_alpaca_eval_gpt4_turbo`, exactly as AlpacaEval sends it
(`judge-mcp bench --method alpaca-eval` over a head-to-head dataset: instruction, reference output, model output).

Source: tatsu-lab/alpaca_eval @ cd543a14 (Apache-2.0): `src/alpaca_eval/evaluators_configs/
weighted_alpaca_eval_gpt4_turbo/configs.yaml`, the prompt `alpaca_eval_clf_gpt4_turbo/alpaca_eval_clf.txt` (copied
byte for byte into `judge_mcp/prompts/alpaca_eval_clf.txt`; provenance in judge_mcp/prompts/PUBLISHED.md), and what
the code does with them, re-implemented here from its behaviour:
- filling (`utils.make_prompts`): each placeholder `{instruction}`, `{output_1}`, `{output_2}` in that order is
  replaced at its first occurrence in the text filled so far (so a `{output_1}` inside the instruction is what gets
  replaced, as there);
- the request (`decoders/openai.openai_completions`): the filled text stripped, cut into ChatML messages
  (`utils.prompt_to_chatml`: split at `<|im_start|>`, the role is the first line, the content up to `<|im_end|>`,
  both stripped) -> a system and a user message; `max_tokens` 1, `temperature` 1, `top_p` 1.0 (its default),
  `logprobs` true, `top_logprobs` 5;
- the order (`RandomSwitchTwoColumnsProcessor`, seeded on the instruction): output_1 and output_2 are switched when
  `random.Random("is_switched_outputs" + instruction + "0").choices([False, True], k=1)[0]` (the annotator's seed
  is 0), and the preference read in the switched order becomes 3 - preference;
- the preference (`completion_parsers.logprob_parser`, numerator "m", denominators "m", "M", not binarized): from
  the top log-probabilities of the one generated token, 2 - p(m) / (p(m) + p(M)) with a missing one counted as
  probability 0; neither present, no log-probabilities, or not exactly one generated token: no annotation
  (AlpacaEval drops the row from its metrics; here it is unparsed and counted apart);
- identical outputs (`PairwiseAnnotatorLocal._preprocess`): preference 1.5 without a call. Empty outputs are judged.
Preference 1 means output_1 (the reference) is better, 2 that output_2 (the model) is.
"""

from __future__ import annotations

import math
import random
from typing import Annotated, Any, ClassVar

from pydantic import Field

from judge_mcp import prompts
from judge_mcp.contract.fields import JUDGED, MAX_TEXT_CHARS
from judge_mcp.contract.args import JudgingArgs
from judge_mcp.backends.base import ChatRequest, Message, TokenLogprob
from judge_mcp.calls.context import CallContext
from judge_mcp.methods import registry
from judge_mcp.contract.results import JudgedResult

TEMPLATE = "alpaca_eval_clf.txt"
PLACEHOLDERS = ("instruction", "output_1", "output_2")
MAX_TOKENS = 1
TEMPERATURE = 1.0
TOP_P = 1.0
TOP_LOGPROBS = 5
NUMERATOR, DENOMINATORS = "m", ("m", "M")
SEED = 0  # PairwiseAnnotator's default seed, handed to its processors
SWITCH_COLUMN = "is_switched_outputs"
START, END = "<|im_start|>", "<|im_end|>"
ROLES = ("system", "user", "assistant")


class ChatMLError(ValueError):
    """A filled prompt AlpacaEval's ChatML split cannot turn into chat messages (a text carrying ChatML tokens)."""


def fill(template: str, values: dict[str, str]) -> str:
    """`utils.make_prompts` for one example: each placeholder's first occurrence, in PLACEHOLDERS order."""
    for key in PLACEHOLDERS:
        template = template.replace("{" + key + "}", values[key], 1)
    return template


def to_chatml(prompt: str) -> tuple[tuple[str, str], ...]:
    """`utils.prompt_to_chatml`: (role, content) per `<|im_start|>` block; linear in the prompt's length."""
    prompt = prompt.strip()
    if not (prompt.startswith(START) and prompt.endswith(END)):
        raise ChatMLError("the filled prompt does not start with <|im_start|> and end with <|im_end|>")
    out = []
    for part in prompt.split(START)[1:]:
        head, newline, rest = part.partition("\n")
        role = head.strip()
        if not newline or role not in ROLES:
            raise ChatMLError(f"a text holds ChatML tokens that AlpacaEval would split into a message with role {role[:40]!r}")
        out.append((role, rest.split(END, 1)[0].strip()))
    return tuple(out)


def is_switched(instruction: str, seed: int = SEED) -> bool:
    """RandomSwitchTwoColumnsProcessor's draw for a row (seeded on its instruction)."""
    return random.Random(SWITCH_COLUMN + instruction + str(seed)).choices([False, True], k=1)[0]


def preference_from(logprobs: tuple[TokenLogprob, ...] | None) -> float | None:
    """`logprob_parser` (numerator m, denominators m and M, not binarized) in the order shown: in [1, 2], or None."""
    if not logprobs or len(logprobs) != 1:
        return None
    found = {token: lp for token, lp in logprobs[0].top if token in DENOMINATORS}  # the last one of a repeated token
    if not found:
        return None
    # in log space, as there (logsumexp), so two tiny probabilities still compare
    top = max(found.values())
    denominator = top + math.log(sum(math.exp(found[t] - top) for t in DENOMINATORS if t in found))
    return 2.0 - (math.exp(found[NUMERATOR] - denominator) if NUMERATOR in found else 0.0)


AnyText = Annotated[str, Field(max_length=MAX_TEXT_CHARS), JUDGED]


class AlpacaEvalArgs(JudgingArgs):
    """One AlpacaEval row: the instruction, the reference output (output_1) and the model's output (output_2);
    outputs may be empty (AlpacaEval judges them)."""

    tool: ClassVar[str] = "alpaca_eval"

    instruction: AnyText
    output_1: AnyText
    output_2: AnyText


class AlpacaEvalResult(JudgedResult):
    preference: float | None = Field(description="1: output_1 (reference) better .. 2: output_2 (model) better; null: no annotation")
    switched: bool = Field(description="output_2 was shown first (as model m)")
    identical: bool = Field(description="the outputs are identical: 1.5 without a call")
    parse_ok: bool
    judgment: str = ""


def request(args: AlpacaEvalArgs) -> tuple[ChatRequest, bool]:
    """(AlpacaEval's request for the row, whether its outputs are shown switched)."""
    switched = is_switched(args.instruction)
    first, second = (args.output_2, args.output_1) if switched else (args.output_1, args.output_2)
    messages = to_chatml(fill(prompts.load(TEMPLATE), {"instruction": args.instruction, "output_1": first, "output_2": second}))
    system = messages[0][1] if messages[0][0] == "system" else None
    rest = messages[1:] if system is not None else messages
    chat = ChatRequest(
        messages=tuple(Message(role, content) for role, content in rest), system=system, temperature=TEMPERATURE, top_p=TOP_P,
        max_tokens=MAX_TOKENS, logprobs=True, top_logprobs=TOP_LOGPROBS, purpose="alpaca_eval", cache_hints=False,
    )
    return chat, switched


async def alpaca_eval_judge(judge: CallContext, args: AlpacaEvalArgs | None = None, /, **fields: Any) -> AlpacaEvalResult:
    """One row annotated as AlpacaEval annotates it."""
    args = AlpacaEvalArgs.of(args, fields)
    if args.output_1 == args.output_2:
        return AlpacaEvalResult(preference=1.5, switched=False, identical=True, parse_ok=True, model=judge.model_id, usage=judge.usage())
    chat, switched = request(args)
    completion = await judge.complete(chat)
    shown = preference_from(completion.logprobs)
    preference = None if shown is None else (3.0 - shown if switched else shown)
    return AlpacaEvalResult(
        preference=preference, switched=switched, identical=False, parse_ok=preference is not None, judgment=completion.text,
        model=judge.model_id, usage=judge.usage(),
    )


registry.register(alpaca_eval_judge, AlpacaEvalArgs, AlpacaEvalResult)
