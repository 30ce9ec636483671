"""Goal-reversed pairwise judging (the goal-reversed prompting paper, Table 1).

The judge is asked which answer is *worse* (goal "worse", the paper's GRP) or better, with the Arena-Hard SOP
template (the judge answers the prompt itself first), a CoT or a direct template. Both orders are judged
concurrently; `winner` is set only when every trial parsed and all agree (the paper's strict criterion), so
position bias shows up as `consistent: false` rather than as a wrong verdict.

Where the backend gives token log-probabilities, each trial carries the probability of its two labels
(label_probs.py) and `p_better` averages them over the orders judged. `swap="auto"` judges order AB first and
the swapped order only when AB's probability margin |p_A - p_B| is under `swap_margin`, or AB has no
probabilities or did not parse.

Labels keep their meaning under both goals: `[[A>B]]` = the first-shown answer is better (the second is worse).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from judge_mcp import prompts
from judge_mcp.contract.fields import GOALS as GOALS  # the tool's goals, for this module's readers
from judge_mcp.contract.fields import PAIR_MAX_TOKENS, TEMPLATES
from judge_mcp.contract.args import ComparePairArgs
from judge_mcp.backends.base import user
from judge_mcp.methods import label_probs, pair_labels, text_work, transcript, user_inputs
from judge_mcp.methods.ask import Parsed, ask, bounded
from judge_mcp.calls.fanout import run_each
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.parsing import neutralise, parse_json_object
from judge_mcp.contract.results import ComparePairResult, PairTrial, PBetter

LABELS = ("[[A>B]]", "[[B>A]]")
# Answer budget per template (tokens), the paper's setting: GRP runs every template in JudgeBench's Arena-Hard judge
# setting, which allows 4,096 tokens (the SOP judge writes its own answer first) and continues a cut-off judgment.
# A direct answer is a label, but the paper sets no smaller budget for it; the budget is a cap, not a cost.
MAX_TOKENS = dict.fromkeys(TEMPLATES, PAIR_MAX_TOKENS)
# Free-text fields of the structured answer, in the order the model writes them (verdict last).
JSON_FIELDS = {"sop": ("own_answer", "evaluation"), "cot": ("reasoning",), "direct": ()}
# maxLength (characters) of each free-text field under a JSON schema: room for a strong model's answer, bounded so a
# looping model must close the JSON within the default budget (~4 characters per token).
FIELD_MAX_CHARS = {"own_answer": 8000, "evaluation": 4000, "reasoning": 8000}
TOP_LOGPROBS = 10  # alternatives asked for at each token (OpenAI allows up to 20; the two letters are normally the top two)


@dataclass(frozen=True)
class Verdict:
    label: str  # "[[A>B]]" or "[[B>A]]", as printed for the order shown
    rationale: str
    at: int | None = None  # text grammar: where the deciding label starts in the parsed text (None: JSON, the last label)


@lru_cache(maxsize=8)  # static per template (a shared object: callers must not change it); so is system_prompt
def verdict_schema(template: str) -> dict:
    """The structured answer's schema: the template's free-text fields (length-bounded), then the verdict."""
    props: dict[str, dict] = {name: {"type": "string"} for name in JSON_FIELDS[template]}
    props["verdict"] = {"type": "string", "enum": list(LABELS)}
    schema = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    return bounded(schema, FIELD_MAX_CHARS)


@lru_cache(maxsize=16)
def system_prompt(goal: str, template: str, structured: bool) -> str:
    text = prompts.load(f"grp_{template}_{goal}.txt").rstrip("\n")
    if structured:
        text += "\n" + prompts.load(f"grp_json_{template}.txt").rstrip("\n")
    return text


def user_prompt(
    prompt: transcript.Value, first: transcript.Value, second: transcript.Value, *, criteria: str | None = None, reference: str | None = None,
    goal: str = "worse",
) -> str:
    """The judged content, with verdict tokens inside it defused (see parsing.neutralise); the caller's reference
    and criteria, when given, as fenced blocks between the prompt and the answers (user_inputs.py). A conversation
    or trajectory is its transcript (transcript.py); a string is as it always was."""
    shown = {"prompt": transcript.render(prompt, neutralise), "answer_a": transcript.render(first, neutralise),
             "answer_b": transcript.render(second, neutralise)}
    if not user_inputs.given(criteria, reference):
        return prompts.render("grp_user.txt", **shown)
    return prompts.render(
        "grp_user_inputs.txt",
        **shown,
        inputs=user_inputs.blocks(criteria, reference, neutralise),
        notes=user_inputs.notes(criteria, reference, reference_note="grp_reference_note.txt", criteria_note=f"grp_criteria_{goal}.txt"),
    )


def parse_label(text: str, judged: tuple[str, ...] | list[str] = ()) -> Verdict | None:
    """The judge's binary label, or None (unparsed).

    JudgeBench's Arena-Hard rule (collect every `[[...]]` label; if they differ, the judgment is unparseable),
    made to ignore quotations of the judged text. Judged text is neutralised before the judge sees it (`[[B>A]]`
    becomes `[B>A]`), so a double-bracket label in the answer was written by the judge; it still does not count
    when it is:

    - an echo: the label sits in a verbatim copy of a judged text (or of another `judged` reference, such as the
      template's list of labels): at least 8 matching characters *after* it, and 8 before it (or all of that
      text's words before it, when the label opens it). Compared lower-cased, whitespace collapsed, brackets
      ignored (the copy may restore the double brackets neutralise removed). A judge's own final phrase ends its
      answer (or is followed by its own words), so a judged answer holding "Assistant A is worse: [[B>A]]" never
      suppresses the judge writing that same phrase as its verdict. Echoes are ignored entirely.
    - a mention: wrapped directly in quote marks or backticks (`"[[B>A]]"`). A mention never decides, but a
      mention *after* the last plain label, naming a different label, leaves the final verdict unknown
      (`... [[A>B]] ... my final verdict is "[[B>A]]"`): unparsed, never the earlier label.

    The remaining labels are the judge's: all the same and one of the offered pair -> that label; none, two
    different ones, or one outside the pair (`[[A=B]]`, `[[A>>B]]`) -> unparsed. The rationale is the text
    before the last plain label.
    """
    found = pair_labels.last_label(text, judged)
    if found is None or found[0] not in LABELS:
        return None
    label, at = found
    return Verdict(label, text[:at].strip(), at)


def parse_structured(text: str, template: str, judged: tuple[str, ...] | list[str] = ()) -> Verdict | None:
    """The `verdict` field of the JSON answer; anything but one of the two labels is unparsed.

    The answer is the object parsing.answer_object picks: the last top-level object carrying the schema's keys,
    not one quoted from a judged answer (`judged`), and never an object nested in the answer's strings.
    """
    data = parse_json_object(text, tuple(verdict_schema(template)["required"]), judged=judged)
    if data is None:
        return None
    label = data.get("verdict")
    if not isinstance(label, str):
        return None
    label = re.sub(r"\s+", "", label)
    if label not in LABELS:
        return None
    rationale = "\n\n".join(str(data.get(f, "")).strip() for f in JSON_FIELDS[template] if data.get(f))
    return Verdict(label, rationale)


def better_in_caller_order(label: str, order: str) -> str:
    """[[A>B]] means the first-shown answer is better; map that back to the caller's A/B."""
    first_better = label == "[[A>B]]"
    if order == "AB":
        return "A" if first_better else "B"
    return "B" if first_better else "A"


def aggregate(trials: list[PairTrial]) -> tuple[str | None, bool]:
    """(winner, consistent) under the strict criterion: `consistent` when every trial parsed and all name one
    answer, the winner only then. One order (swap=False, or a confident swap="auto"): consistent when it parsed, as
    the contract says (`swapped` tells that the other order did not run)."""
    parsed = [t for t in trials if t.parse_ok]
    if len(parsed) != len(trials) or not parsed:
        return None, False
    sides = {t.better for t in parsed}
    consistent = len(sides) == 1
    return (parsed[0].better if consistent else None), consistent


def order_probability(result: Parsed[Verdict], order: str) -> PBetter | None:
    """The trial's label probabilities in the caller's A/B, read from the completion that wrote the verdict (the
    last piece of a continued answer); None when any piece is missing (see label_probs)."""
    verdict, piece = result.value, result.completion.text
    if verdict is None or not result.text.endswith(piece):
        return None
    offset = len(result.text) - len(piece)
    at = None if verdict.at is None else verdict.at - offset
    if at is not None and at < 0:
        return None  # the deciding label was written by an earlier piece of a continued answer
    p_first = label_probs.first_better(result.completion.logprobs, piece, verdict.label, at)
    if p_first is None:
        return None
    p_a = p_first if order == "AB" else 1.0 - p_first
    return probability(p_a)


def probability(p_a: float) -> PBetter:
    p_a = round(min(1.0, max(0.0, p_a)), 6)
    return PBetter(A=p_a, B=round(1.0 - p_a, 6))


def margin(trial: PairTrial) -> float | None:
    """|p_A - p_B| of a parsed trial with probabilities, else None."""
    if not trial.parse_ok or trial.p_better is None:
        return None
    return round(abs(trial.p_better.A - trial.p_better.B), 6)


def mean_probability(trials: list[PairTrial]) -> PBetter | None:
    """p_better averaged over the judged orders; None when any of them has none."""
    p_a = label_probs.debiased([t.p_better.A if t.p_better is not None else None for t in trials])
    return None if p_a is None else probability(p_a)


async def judge_order(
    judge: CallContext, *, prompt: transcript.Value, first: transcript.Value, second: transcript.Value, order: str, goal: str, template: str,
    max_tokens: int | None = None, criteria: str | None = None, reference: str | None = None, images: user_inputs.ImageGroups = (),
) -> PairTrial:
    structured = judge.structured
    size = text_work.chars(prompt, first, second, criteria, reference)
    request = user(
        await text_work.run(user_prompt, prompt, first, second, criteria=criteria, reference=reference, goal=goal, size=size),
        images=images,
        system=system_prompt(goal, template, structured),
        max_tokens=max_tokens or MAX_TOKENS[template],
        json_schema=verdict_schema(template) if structured else None,
        schema_name="pairwise_verdict",
        logprobs=judge.logprobs,
        top_logprobs=TOP_LOGPROBS if judge.logprobs else 0,
        purpose=f"compare_pair:{order}",
    )
    judged = [transcript.plain(t) for t in (prompt, first, second, criteria, reference) if t is not None]
    references = judged + [request.system or ""]  # a judge echoing the template's list of labels is quoting it
    if structured:
        parse = lambda t: parse_structured(t, template, judged) or parse_label(t, references)  # noqa: E731
        result = await ask(judge, request, parse, prompts.load("grp_reask_json.txt"), judged_chars=2 * size)
    else:
        result = await ask(judge, request, lambda t: parse_label(t, references), prompts.load("grp_reask.txt"), judged_chars=2 * size)
    verdict = result.value
    if verdict is None:
        return PairTrial(
            order=order, better=None, label=None, rationale=result.text[-2000:], parse_ok=False, reasked=result.reasked,
            continued=result.continued, truncated=result.truncated,
            unparsed_reason="truncated" if result.truncated else "no_verdict",
        )
    return PairTrial(
        order=order,
        better=better_in_caller_order(verdict.label, order),
        label=verdict.label,
        rationale=verdict.rationale[-4000:],
        parse_ok=True,
        reasked=result.reasked,
        continued=result.continued,
        truncated=result.truncated,
        p_better=order_probability(result, order),
    )


async def compare_pair(judge: CallContext, args: ComparePairArgs | None = None, /, **fields: Any) -> ComparePairResult:
    """`args`, or ComparePairArgs's fields as keywords (checked the same way)."""
    args = ComparePairArgs.of(args, fields)
    threshold = args.margin()

    shown, a_images, b_images = args.image_list("images"), args.image_list("response_a_images"), args.image_list("response_b_images")

    def judge_one(order: str):
        first, second = (args.response_a, args.response_b) if order == "AB" else (args.response_b, args.response_a)
        images = (transcript.pair_images(args.prompt, first, second, shown, a_images, b_images) if order == "AB"
                  else transcript.pair_images(args.prompt, first, second, shown, b_images, a_images))
        return judge_order(
            judge, prompt=args.prompt, first=first, second=second, order=order, goal=args.goal, template=args.template, max_tokens=args.max_tokens,
            criteria=args.criteria, reference=args.reference, images=images,
        )

    if args.swap == "auto":
        ordered = [await judge_one("AB")]
        await judge.progress(1, 2, "order AB judged")
        sure = margin(ordered[0])
        if sure is not None and sure >= threshold:
            await judge.progress(2, 2, f"order BA not needed (margin {sure:.3f} >= {threshold:g})")
        else:
            ordered.append(await judge_one("BA"))
            await judge.progress(2, 2, "order BA judged")
    else:
        orders = ["AB", "BA"] if args.swap else ["AB"]
        ordered = await run_each(judge, len(orders), lambda k: judge_one(orders[k]), lambda k, _: f"order {orders[k]} judged")
    winner, consistent = aggregate(ordered)
    return ComparePairResult(
        winner=winner,
        consistent=consistent,
        p_better=mean_probability(ordered),
        swapped=len(ordered) == 2,
        trials=ordered,
        goal=args.goal,
        template=args.template,
        model=judge.model_id,
        usage=judge.usage(),
    )
