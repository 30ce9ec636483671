"""Learning While Evaluating with a persistent, versioned meta-prompt ("Becoming Experienced Judges: Selective Test-Time Learning for Evaluators").

`lwe_judge` is Algorithm 2 (Selective LWE) for one case, with Algorithm 1's meta-prompt path for the cases that
need it:

1. selective (default): the vanilla prompt (Figure 9) in both orders, concurrently. Both parsed and agreeing:
   answered at once, the meta-prompt and the feedback buffer are not touched.
2. otherwise the meta-prompt path, judged once in the caller's order (Algorithm 1 is one-sided):
   BuildEvalPrompt (meta-prompt + example) -> CallContext (case prompt + example) -> Feedback (Figure 12) -> buffer.
3. when the session's buffer holds `batch_size` items, RefineMetaPrompt (Figure 13) makes a new version
   (refine.py).

State lives in the store (tables lwe_sessions / lwe_versions / lwe_feedback). Model calls never run inside a
database transaction. A process killed at any moment leaves either the whole new version or none of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from judge_mcp import prompts
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import LweJudgeArgs
from judge_mcp.backends.base import Message, user
from judge_mcp.calls.fanout import run_each
from judge_mcp.calls.context import CallContext
from judge_mcp.methods import text_work
from judge_mcp.methods.ask import ask
from judge_mcp.methods import transcript, user_inputs
from judge_mcp.methods.lwe import text as lwe_text
from judge_mcp.methods.lwe.refine import Refinement, generate_text, refine_if_due
from judge_mcp.contract.results import LweResult, VanillaPair
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.storage.engine import Engine

# Answer budgets in tokens. They bound what a looping model can cost (the bundled 135M model writes ~20 tokens/s
# on 2 cores and often runs to the limit on free text); a strong model's answers fit well inside them.
MAX_TOKENS = {"vanilla": 512, "build": 768, "judge": 768, "feedback": 1024}


def initial_meta_prompt() -> str:
    """Figure 11: M0."""
    return prompts.load("lwe_initial_meta_prompt.txt").strip()


def _require_store(judge: CallContext) -> Engine:
    if judge.store is None:
        raise RuntimeError("lwe_judge needs a store (judge.store is None)")
    return judge.store


# ---- the vanilla pair ----------------------------------------------------------------------------------------------
async def _vanilla_order(
    judge: CallContext, prompt: transcript.Value, first: transcript.Value, second: transcript.Value, order: str,
    criteria: str | None = None, reference: str | None = None,
    images: user_inputs.ImageGroups = (),
) -> str | None:
    structured = judge.structured
    request = user(
        await text_work.run(
            lwe_text.vanilla_prompt, prompt, first, second, structured, criteria=criteria, reference=reference,
            size=text_work.chars(prompt, first, second, criteria, reference),
        ),
        images=images,
        max_tokens=MAX_TOKENS["vanilla"],
        json_schema=lwe_text.verdict_schema() if structured else None,
        schema_name="lwe_vanilla_verdict",
        purpose=f"lwe_judge:vanilla:{order}",
    )
    reminder = prompts.load("lwe_reask_json.txt" if structured else "lwe_reask_text.txt")
    result = await ask(judge, request, lwe_text.parse_verdict, reminder)
    return lwe_text.to_caller(result.value, order)


async def vanilla_pair(
    judge: CallContext, prompt: transcript.Value, response_a: transcript.Value, response_b: transcript.Value, *,
    criteria: str | None = None, reference: str | None = None,
    images: tuple[user_inputs.Images, user_inputs.Images, user_inputs.Images] = ((), (), ()),
) -> VanillaPair:
    """The vanilla prompt in both orders, concurrently; verdicts in the caller's A/B. `images`: the prompt's and each
    answer's; an answer's images move with it."""
    shown, a_images, b_images = images

    async def one(k: int) -> str | None:
        order = ("AB", "BA")[k]
        first, second = (response_a, response_b) if order == "AB" else (response_b, response_a)
        groups = (transcript.pair_images(prompt, first, second, shown, a_images, b_images) if order == "AB"
                  else transcript.pair_images(prompt, first, second, shown, b_images, a_images))
        return await _vanilla_order(judge, prompt, first, second, order, criteria, reference, groups)

    ab, ba = await run_each(judge, 2, one)
    return VanillaPair(ab=ab, ba=ba, consistent=ab is not None and ab == ba)


# ---- the meta-prompt path --------------------------------------------------------------------------------------------
async def _judge_case(judge: CallContext, judge_prompt_text: str, images: user_inputs.ImageGroups = ()) -> tuple[str | None, str, bool]:
    structured = judge.structured
    request = user(
        judge_prompt_text,
        images=images,
        max_tokens=MAX_TOKENS["judge"],
        json_schema=lwe_text.verdict_schema() if structured else None,
        schema_name="lwe_case_verdict",
        purpose="lwe_judge:judge",
    )
    reminder = prompts.load("lwe_reask_json.txt" if structured else "lwe_reask_text.txt")
    result = await ask(judge, request, lwe_text.parse_verdict, reminder)
    return result.value, result.text, result.reasked


async def _feedback(
    judge: CallContext, meta_prompt: str, judge_prompt_text: str, judgment: str, images: user_inputs.ImageGroups = ()
) -> tuple[str, bool]:
    structured = judge.structured
    request = user(
        lwe_text.feedback_prompt(meta_prompt, judge_prompt_text, judgment),
        images=images,
        max_tokens=MAX_TOKENS["feedback"],
        json_schema=lwe_text.feedback_schema() if structured else None,
        schema_name="lwe_feedback",
        purpose="lwe_judge:feedback",
    )
    first = await judge.complete(request)
    parsed = lwe_text.parse_feedback(first.text)
    if parsed is not None:
        return parsed, True
    if first.finish_reason == "length":  # cut at the limit: a re-ask would run into it again; keep the raw text
        return (first.text.strip() or "(the model wrote no feedback)"), False
    follow_up = replace(
        request,
        messages=request.messages + (Message("assistant", first.text), Message("user", prompts.load("lwe_feedback_reask.txt"))),
        purpose=f"{request.purpose}:reask",
    )
    second = await judge.complete(follow_up)
    parsed = lwe_text.parse_feedback(second.text)
    if parsed is not None:
        return parsed, True
    return (second.text.strip() or first.text.strip() or "(the model wrote no feedback)"), False


@dataclass
class _Case:
    """One lwe_judge call: its arguments, where it reports progress, and the warnings it collects."""

    judge: CallContext
    repo: LweRepository
    session: str
    prompt: transcript.Value
    response_a: transcript.Value
    response_b: transcript.Value
    base: float  # progress steps: [vanilla pair], case prompt, judgment, feedback, buffering, refinement
    warnings: list[str] = field(default_factory=list)
    vanilla: VanillaPair | None = None
    criteria: str | None = None  # the caller's rubric and reference answer, shown with the case in every prompt
    reference: str | None = None
    images: user_inputs.ImageGroups = ()  # the case's images in the caller's order (the meta path shows that order)

    @property
    def total(self) -> float:
        return self.base + 5

    async def progress(self, done: float, message: str) -> None:
        await self.judge.progress(done, self.total, message)


@dataclass
class _MetaJudgment:
    """The case judged with a case-specific prompt built from the meta-prompt version current at the time."""

    meta_version: int
    meta_prompt: str
    batch_size: int  # the session's, as read with the version
    eval_prompt: str | None
    judge_prompt_text: str
    winner: str | None
    judgment: str
    reasked: bool
    early: Refinement


async def _judge_with_meta_prompt(case: _Case, learn: bool) -> _MetaJudgment:
    """BuildEvalPrompt -> CallContext. A full batch left buffered (by a crash mid-refinement, or a refinement that produced
    no text) is refined first, so that this case is judged with the newest meta-prompt."""
    judge, base = case.judge, case.base
    early = await refine_if_due(judge, case.repo.store, case.session, (base + 0.1, base + 0.15, case.total)) if learn else Refinement()
    state = await case.repo.aio.session_row(case.session)
    assert state is not None
    meta_version, meta_prompt = state["current_version"], state["text"]
    example = lwe_text.example_text(case.prompt, case.response_a, case.response_b, criteria=case.criteria, reference=case.reference)
    await case.progress(base + 0.2, f"writing the case-specific evaluation prompt from meta-prompt v{meta_version}")
    build = lwe_text.build_eval_prompt_request(meta_prompt, example)
    eval_prompt, cut = await generate_text(judge, build, "build", case.session, MAX_TOKENS["build"], case.images)
    case.warnings.extend(early.warnings)
    if cut:
        case.warnings.append(f"the case-specific evaluation prompt was cut at the {MAX_TOKENS['build']}-token limit")
    if eval_prompt is None:
        case.warnings.append("the model wrote an empty evaluation prompt; the case was judged with the answer format only")
    await case.progress(base + 1, "judging with the case-specific prompt")
    judge_prompt_text = lwe_text.judge_prompt(eval_prompt or "", example, judge.structured)
    winner, judgment, reasked = await _judge_case(judge, judge_prompt_text, case.images)
    if winner is None:
        case.warnings.append("the meta-path judgment stayed unparsed after a re-ask: winner is null (the feedback still records it)")
    return _MetaJudgment(meta_version, meta_prompt, state["batch_size"], eval_prompt, judge_prompt_text, winner, judgment, reasked, early)


async def _learn(case: _Case, meta: _MetaJudgment) -> tuple[str, bool, Refinement]:
    """Feedback (Figure 12) on the judgment, buffered; the meta-prompt refined when the buffer holds a full batch.
    (feedback, whether it parsed, the refinement)."""
    judge, base, batch_size = case.judge, case.base, meta.batch_size
    await case.progress(base + 2, "writing self-feedback on the judgment")
    feedback, feedback_ok = await _feedback(judge, meta.meta_prompt, meta.judge_prompt_text, meta.judgment, case.images)
    await case.progress(base + 3, "buffering the feedback")
    item = {
        "meta_version": meta.meta_version,
        "prompt": transcript.text(case.prompt),  # a conversation or trajectory kept as its transcript's text
        "response_a": transcript.text(case.response_a),
        "response_b": transcript.text(case.response_b),
        "eval_prompt": meta.eval_prompt or "",
        "judgment": meta.judgment,
        "winner": meta.winner,
        "feedback": feedback,
        "feedback_parse_ok": feedback_ok,
    }
    _, pending = await case.repo.aio.add_feedback(case.session, item)
    late = Refinement()
    if pending >= batch_size:
        late = await refine_if_due(judge, case.repo.store, case.session, (base + 4, base + 4.5, case.total))
    case.warnings.extend(late.warnings)
    done = " (meta-prompt refined)" if late.refined else f" ({pending} of {batch_size} feedback items buffered)"
    await case.progress(case.total, "done" + done)
    return feedback, feedback_ok, late


async def lwe_judge(judge: CallContext, args: LweJudgeArgs | None = None, /, *, learn: bool = True, **fields: Any) -> LweResult:
    """`args`, or LweJudgeArgs's fields as keywords (checked the same way). `learn=False` judges the case with the
    session's current meta-prompt for scoring only: no feedback is written or buffered and nothing is refined (the
    bench's swapped placement, the paper's Appendix A protocol); it is not a tool argument."""
    args = LweJudgeArgs.of(args, fields)
    if not isinstance(learn, bool):
        raise InputError(f"'learn' must be true or false, got {learn!r}")
    prompt, response_a, response_b, session = args.prompt, args.response_a, args.response_b, args.session
    repo = LweRepository(_require_store(judge))
    state = await repo.aio.ensure_session(session, args.batch_size, initial_meta_prompt(), args.learn_from_labels)
    case_images = (args.image_list("images"), args.image_list("response_a_images"), args.image_list("response_b_images"))
    case = _Case(
        judge, repo, session, prompt, response_a, response_b, base=1.0 if args.selective else 0.0, criteria=args.criteria, reference=args.reference,
        images=transcript.pair_images(prompt, response_a, response_b, *case_images),
    )
    if args.selective:
        await case.progress(0, "vanilla judgments in both orders")
        vanilla = case.vanilla = await vanilla_pair(
            judge, prompt, response_a, response_b, criteria=args.criteria, reference=args.reference, images=case_images
        )
        if vanilla.consistent:
            await case.progress(case.total, f"consistent in both orders ({vanilla.ab}): answered without the meta-prompt")
            return _vanilla_result(judge, session, (await repo.aio.session_row(session)) or state, vanilla)
        unparsed = [order for order, side in (("AB", vanilla.ab), ("BA", vanilla.ba)) if side is None]
        if unparsed:
            case.warnings.append(f"the vanilla judgment stayed unparsed in order {' and '.join(unparsed)}: treated as inconsistent")
        else:
            case.warnings.append(f"the vanilla verdicts disagreed between the orders (AB: {vanilla.ab}, BA: {vanilla.ba}): the "
                                 "winner is the meta-prompt path's judgment in one order, which position bias may decide")
        await case.progress(case.base, f"inconsistent vanilla verdicts (AB: {vanilla.ab}, BA: {vanilla.ba}): meta-prompt path")
    meta = await _judge_with_meta_prompt(case, learn)
    if not learn:
        await case.progress(case.total, "done (scoring only: no feedback, no refinement)")
        state = (await repo.aio.session_row(session)) or state
        return _meta_path_result(case, state, meta)
    feedback, feedback_ok, late = await _learn(case, meta)
    final = await repo.aio.session_row(session)
    assert final is not None
    return _meta_path_result(
        case, final, meta, feedback=feedback, feedback_parse_ok=feedback_ok, versions=meta.early.versions + late.versions,
        condensed=meta.early.condensed or late.condensed,
    )


def _vanilla_result(judge: CallContext, session: str, state: dict[str, Any], vanilla: VanillaPair) -> LweResult:
    """The result of a case whose vanilla verdicts agree: the meta-prompt and the feedback buffer untouched."""
    return LweResult(
        winner=vanilla.ab,
        path="vanilla_consistent",
        vanilla=vanilla,
        orders_disagreed=False,
        eval_prompt=None,
        feedback=None,
        meta_prompt_version=state["current_version"],
        refined=False,
        new_meta_prompt_version=None,
        pending_feedback=state["pending"],
        batch_size=state["batch_size"],
        session=session,
        model=judge.model_id,
        usage=judge.usage(),
    )


def _disagreed(vanilla: VanillaPair | None) -> bool | None:
    """Both vanilla orders parsed and named different answers; None when not run or an order was unparsed."""
    return None if vanilla is None or vanilla.ab is None or vanilla.ba is None else vanilla.ab != vanilla.ba


def _meta_path_result(
    case: _Case, state: dict[str, Any], meta: _MetaJudgment, *, feedback: str | None = None,
    feedback_parse_ok: bool | None = None, versions: list[int] | None = None, condensed: bool = False,
) -> LweResult:
    """The result of a meta-prompt-path case; `feedback` None when the case was judged for scoring only."""
    versions = versions or []
    return LweResult(
        winner=meta.winner,
        path="meta_prompt",
        vanilla=case.vanilla,
        orders_disagreed=_disagreed(case.vanilla),
        eval_prompt=meta.eval_prompt,
        judgment=meta.judgment,
        parse_ok=meta.winner is not None,
        reasked=meta.reasked,
        feedback=feedback,
        feedback_parse_ok=feedback_parse_ok,
        meta_prompt_version=meta.meta_version,
        refined=bool(versions),
        new_meta_prompt_version=versions[-1] if versions else None,
        new_meta_prompt_versions=versions,
        condensed=condensed,
        pending_feedback=state["pending"],
        batch_size=state["batch_size"],
        session=case.session,
        warnings=case.warnings,
        model=case.judge.model_id,
        usage=case.judge.usage(),
    )
