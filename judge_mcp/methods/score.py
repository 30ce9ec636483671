"""score_response: pointwise scores of one response against a rubric (the contract (docs/tools.md) "score_response").

Each criterion is judged in its own call (one criterion's reasoning must not sway another's), every criterion and
sample at once (fanout.run_each). The prompt is the FLIP paper's pointwise rating (bench/pointwise.py, Table 5
"Prompt 1"), told to judge one criterion on the caller's scale (prompts/score_*.txt); the answer is the paper's JSON
`{ "REASONING": "[...]", "SCORE": "<your-score>" }`, SCORE constrained to the scale's whole numbers where the backend
decodes under a JSON schema. A score outside the scale, or not a whole number, is unparsed after one re-ask, never
a score.

Where the backend gives token log-probabilities, a sample's score is the probability-weighted score over the scale
(G-Eval; score_probs.py). `samples` > 1 draws independent samples at the temperature (1.0 unless given): requests at
a temperature above 0 never go through the call cache (calls/cache.py), so no sample is a copy of another.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from judge_mcp import prompts
from judge_mcp.backends import prompt_cache
from judge_mcp.backends.base import user
from judge_mcp.calls.fanout import run_each
from judge_mcp.calls.context import CallContext
from judge_mcp.methods import score_probs, text_work, transcript, user_inputs
from judge_mcp.methods.ask import ask, bounded
from judge_mcp.methods.panel import Member, panel_model, quorum, sum_usage
from judge_mcp.methods.parsing import neutralise, parse_json_object
from judge_mcp.contract.rubric import UNSTABLE_SPAN, Criterion, ScoreResponseArgs
from judge_mcp.contract.results import CriterionScore, ScorePanelMember, ScoreResponseResult

MAX_TOKENS = 512  # the FLIP paper's limit for every method (§3.1)
REASONING_CHARS = 1500  # maxLength of REASONING under a JSON schema: the JSON closes within MAX_TOKENS
TOP_LOGPROBS = 20  # alternatives at each token: a 1..10 scale has ten numbers to weigh
SCORE_KEY, REASONING_KEY = "SCORE", "REASONING"
PAPER_FORMAT = '{ "REASONING": "[...]", "SCORE": "<your-score>" }'


# ---- prompts -----------------------------------------------------------------------------------------------------
def answer_format(structured: bool, low: int, high: int) -> str:
    if not structured:
        return PAPER_FORMAT
    return ('a JSON object with two string fields, in this order: "REASONING" (your short explanation) and "SCORE" '
            f"(your score, a whole number from {low} to {high})")


@lru_cache(maxsize=32)
def answer_schema(low: int, high: int) -> dict:
    schema = {
        "type": "object",
        "properties": {REASONING_KEY: {"type": "string"}, SCORE_KEY: {"type": "string", "enum": [str(k) for k in range(low, high + 1)]}},
        "required": [REASONING_KEY, SCORE_KEY],
        "additionalProperties": False,
    }
    return bounded(schema, {REASONING_KEY: REASONING_CHARS})


@lru_cache(maxsize=32)
def system_prompt(low: int, high: int, structured: bool) -> str:
    return prompts.render("score_system.txt", low=str(low), high=str(high), answer_format=answer_format(structured, low, high)).rstrip("\n")


def user_parts(instruction: transcript.Value, response: transcript.Value, criterion: str, reference: str | None, low: int, high: int,
               structured: bool) -> tuple[str, str]:
    """The user message in two parts: what every call of one judgment shares (the query, the answer and the reference,
    the judged texts defused by parsing.neutralise; a conversation or trajectory as its transcript) and what is the
    call's own (the criterion as a fenced block, the closing notes and the answer format). The criterion comes after
    the answer so that a judgment's calls share all but their last few hundred characters, which a prompt cache
    serves once (this layout is judge-mcp's own, not a paper's)."""
    shared = prompts.render(
        "score_user.txt", prompt=transcript.render(instruction, neutralise).strip("\n"),
        response=transcript.render(response, neutralise).strip("\n"),
    ).rstrip("\n")
    if reference is not None:
        shared += "\n\n" + user_inputs.blocks(None, reference, neutralise)
    own = prompts.render(
        "score_user_criterion.txt", inputs=user_inputs.blocks(criterion, None, neutralise, criteria_block="score_criterion.txt"),
        notes=user_inputs.notes(criterion, reference, reference_note="score_reference_note.txt", criteria_note="score_criterion_note.txt"),
        answer_format=answer_format(structured, low, high),
    ).rstrip("\n")
    return shared + "\n\n", own


def user_prompt(instruction: transcript.Value, response: transcript.Value, criterion: str, reference: str | None, low: int, high: int, structured: bool) -> str:
    """The whole user message (user_parts joined)."""
    return "".join(user_parts(instruction, response, criterion, reference, low, high, structured))


# ---- the answer grammar --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rating:
    score: int
    reasoning: str
    site: int | None  # where the score's first digit stands in the answer (for its token probabilities)


def _whole(value: object, low: int, high: int) -> int | None:
    """A whole number inside the scale from a JSON value or a text ("7", "7/10" on a 1..10 scale), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        text = value.strip()
        number, _, of = text.partition("/")
        if of and of.strip() != str(high):
            return None
        number = number.strip()
        value = int(number) if number.isascii() and number.isdigit() and len(number) <= 3 else None
    return value if isinstance(value, int) and low <= value <= high else None


def _at(text: str, site: int, low: int, high: int) -> int | None:
    """The keyed score whose first digit is at `site`: the rest of its line up to a comma, brace or quote."""
    end = text.find("\n", site)
    return _whole(text[site : end if end >= 0 else len(text)].strip().rstrip(",}").strip().strip("\"'"), low, high)


def parse_score(text: str, low: int, high: int, judged: Sequence[str] = ()) -> Rating | None:
    """(score, reasoning, site) from the paper's JSON answer (the SCORE key in any case; not an object quoted from
    a `judged` text), or from a keyed `"SCORE": "7"` pair in broken JSON; None when missing, not a whole number, or
    outside low..high. `site` is None when the score's digits cannot be found where the key stands."""
    if not text or not text.strip():
        return None
    data = parse_json_object(text, judged=list(judged))
    sites = score_probs.score_sites(text)
    site = sites[-1] if sites else None
    if data is not None:
        keys = {str(k).strip().lower(): k for k in data}
        if "score" in keys:
            score = _whole(data[keys["score"]], low, high)
            if score is None:
                return None
            reasoning = data.get(keys["reasoning"]) if "reasoning" in keys else ""
            return Rating(score, str(reasoning or "").strip(), site if site is not None and _at(text, site, low, high) == score else None)
    if site is None:
        return None
    score = _at(text, site, low, high)
    return None if score is None else Rating(score, text[:site].strip()[-4000:], site)


# ---- one sample, one criterion, the response -----------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    score: float | None
    distribution: list[float] | None
    rationale: str
    reasked: bool


async def judge_sample(judge: CallContext, args: ScoreResponseArgs, criterion: Criterion, purpose: str, images: user_inputs.ImageGroups) -> Sample:
    low, high = args.scale
    structured = judge.structured
    size = text_work.chars(args.instruction, args.response, criterion.text(), args.reference)
    shared, own = await text_work.run(
        user_parts, args.instruction, args.response, criterion.text(), args.reference, low, high, structured, size=size
    )
    request = user(
        shared + own, shared_chars=len(shared), images=images, system=system_prompt(low, high, structured), max_tokens=MAX_TOKENS,
        json_schema=answer_schema(low, high) if structured else None, schema_name="pointwise_score",
        logprobs=judge.logprobs, top_logprobs=TOP_LOGPROBS if judge.logprobs else 0,
        temperature=args.sampling_temperature(), purpose=purpose,
    )
    reminder = prompts.render("score_reask.txt", answer_format=answer_format(structured, low, high), low=str(low), high=str(high)).rstrip("\n")
    judged = [transcript.plain(t) for t in (args.instruction, args.response, criterion.text(), args.reference) if t]
    result = await ask(judge, request, lambda t: parse_score(t, low, high, judged), reminder, judged_chars=size)
    rating = result.value
    if rating is None:
        return Sample(None, None, result.text[-2000:], result.reasked)
    piece = result.completion.text
    site = rating.site - (len(result.text) - len(piece)) if rating.site is not None and result.text.endswith(piece) else None
    probabilities = score_probs.distribution(result.completion.logprobs, piece, site, low, high) if site is not None and site >= 0 else None
    score = round(score_probs.expected(probabilities, low), 4) if probabilities else float(rating.score)
    return Sample(score, probabilities, rating.reasoning[:4000], result.reasked)


def criterion_score(criterion: Criterion, samples: Sequence[Sample]) -> CriterionScore:
    values = [s.score for s in samples if s.score is not None]
    dists = [s.distribution for s in samples]
    parsed = next((s for s in samples if s.score is not None), None)
    return CriterionScore(
        criterion=criterion.name, weight=criterion.weight,
        score=round(statistics.fmean(values), 4) if values else None,
        samples=[s.score for s in samples],
        stdev=round(statistics.stdev(values), 4) if len(values) >= 2 else None,
        distribution=mean_distribution(dists),
        rationale=(parsed or samples[0]).rationale,
        parse_ok=len(values) == len(samples),
        reasked=sum(s.reasked for s in samples),
    )


def mean_distribution(dists: Sequence[list[float] | None]) -> list[float] | None:
    if not dists or any(d is None for d in dists):
        return None
    return [round(statistics.fmean(column), 6) for column in zip(*dists)]  # type: ignore[arg-type]


def summary(scores: list[CriterionScore], args: ScoreResponseArgs) -> dict[str, Any]:
    """overall (the weighted mean; null when any criterion is unparsed), unstable, and the call's settings."""
    low, high = args.scale
    overall = None
    values = [s.score for s in scores if s.parse_ok and s.score is not None]
    if scores and len(values) == len(scores):
        overall = round(sum(s.weight * v for s, v in zip(scores, values)) / sum(s.weight for s in scores), 4)
    unstable = [s.criterion for s in scores if _span(s.samples) > UNSTABLE_SPAN * (high - low)]
    warnings = [f"criterion '{s.criterion}' stayed unparsed in {sum(v is None for v in s.samples)} of {len(s.samples)} samples: no overall score"
                for s in scores if not s.parse_ok]
    return {"overall": overall, "unstable": unstable, "scale": list(args.scale), "samples": args.samples,
            "temperature": args.sampling_temperature(), "warnings": warnings}


def _span(samples: Sequence[float | None]) -> float:
    values = [v for v in samples if v is not None]
    return max(values) - min(values) if len(values) >= 2 else 0.0


async def score_response(judge: CallContext, args: ScoreResponseArgs | None = None, /, **fields: Any) -> ScoreResponseResult:
    """`args`, or ScoreResponseArgs's fields as keywords (checked the same way)."""
    args = ScoreResponseArgs.of(args, fields)
    rubric, n = args.rubric(), args.samples
    shown = args.image_list("images")
    # the prompt's images, then those inside the instruction's and the response's messages
    images = tuple(g for g in (*user_inputs.pair_images(shown, (), ()), *transcript.message_images(args.instruction, transcript.owner("owner_prompt.txt")),
                               *transcript.message_images(args.response, transcript.owner("owner_response.txt"))) if g[1])
    # what every call shares: the system prompt, the query, the answer and the reference (user_parts)
    shared = len(system_prompt(*args.scale, judge.structured)) + text_work.chars(args.instruction, args.response, args.reference)
    found = await run_each(
        judge, len(rubric) * n,
        lambda k: judge_sample(judge, args, rubric[k // n], f"score_response:{k // n}:{k % n}", images),
        lambda k, _: f"criterion {rubric[k // n].name!r} sample {k % n + 1} of {n} scored",
        warm=prompt_cache.warm_up(judge.backend, shared),
    )
    scores = [criterion_score(c, found[i * n : (i + 1) * n]) for i, c in enumerate(rubric)]
    return ScoreResponseResult(scores=scores, **summary(scores, args), model=judge.model_id, usage=judge.usage())


# ---- panels (runtime/run.py) -------------------------------------------------------------------------------------
def combine_scores(members: Sequence[Member], args: ScoreResponseArgs, *, latency_ms: float, warnings: Sequence[str] = ()) -> ScoreResponseResult:
    """The panel's score_response result: per criterion, the mean of the scores of the members that answered (each
    member's samples pooled in `samples`; parsed only when every member parsed it); null scores when fewer than two
    members answered (of a panel that had two or more to run)."""
    answered = [m for m in members if m.status == "ok"]
    enough = len(answered) >= quorum(sum(not m.excluded for m in members))
    scores = []
    for i, c in enumerate(args.rubric()):
        own = [m.result.scores[i] for m in answered]
        pooled = [Sample(v, s.distribution, s.rationale, False) for s in own for v in s.samples]
        merged = criterion_score(c, pooled) if pooled else criterion_score(c, [Sample(None, None, "", False)])
        values = [s.score for s in own if s.score is not None]
        update = {"score": round(statistics.fmean(values), 4) if values and enough else None, "parse_ok": enough and all(s.parse_ok for s in own),
                  "reasked": sum(s.reasked for s in own)}
        scores.append(merged.model_copy(update=update))
    out = summary(scores, args)
    failed = [f"panel member '{m.backend}' failed and did not score: {m.error}" for m in members if m.status == "failed"]
    if not enough:
        failed.append(f"only {len(answered)} panel members answered: no panel scores (each member's are in panel)")
    entries = [
        ScorePanelMember(backend=m.backend, model=m.model, status=m.status, error=m.error, usage=m.usage,  # type: ignore[arg-type]
                         overall=m.result.overall if m.result else None, scores=m.result.scores if m.result else [],
                         warnings=list(m.result.warnings) if m.result else [])
        for m in members
    ]
    out["warnings"] = [*warnings, *failed, *out["warnings"]]
    return ScoreResponseResult(scores=scores, **out, model=panel_model(members), usage=sum_usage(members, latency_ms), panel=entries)
