"""Learning While Evaluating with a persistent, versioned meta-prompt (shared/papers/learning_while_evaluating.txt).

`lwe_judge` is Algorithm 2 (Selective LWE) for one case, with Algorithm 1's meta-prompt path for the cases that
need it:

1. selective (default): the vanilla prompt (Figure 9) in both orders, concurrently. Both parsed and agreeing:
   answered at once, the meta-prompt and the feedback buffer are not touched.
2. otherwise the meta-prompt path, judged once in the caller's order (Algorithm 1 is one-sided):
   BuildEvalPrompt (meta-prompt + example) -> Judge (case prompt + example) -> Feedback (Figure 12) -> buffer.
3. when the session's buffer holds `batch_size` items, RefineMetaPrompt (Figure 13) makes a new version from
   exactly the oldest `batch_size` items; past 10,000 characters it is condensed (Figure 15, Appendix A) into a
   further version.

State lives in the Store (tables lwe_sessions / lwe_versions / lwe_feedback). Model calls never run inside a
database transaction. A refinement reads (current version, oldest batch) and later writes (new version, items
marked used) in one transaction that first checks the session is still at the version it read and the items are
still pending; otherwise nothing is written and it re-reads. Within a process, refinements of one session are
serialised by a per-session lock (other sessions run in parallel); across processes the check above keeps every
item used exactly once. A process killed at any moment leaves either the whole new version or none of it.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

import anyio
import anyio.lowlevel

from judge_mcp import prompts, validation
from judge_mcp.backends.base import Message, user
from judge_mcp.backends.errors import BackendError
from judge_mcp.methods.lwe import text as t
from judge_mcp.methods import text_work
from judge_mcp.methods.ask import ask
from judge_mcp.calls.fanout import run_each
from judge_mcp.calls.judge import Judge
from judge_mcp.storage.lwe_sessions import LweConflict, LweRepository
from judge_mcp.storage.sqlite import Store
from judge_mcp.outputs import LweResult, VanillaPair

ACTIONS = ("show", "reset", "rollback")
MAX_BATCH_SIZE = 64
MAX_REFINES_PER_CALL = 4  # refinements one call may commit (a backlog of several full batches)
MAX_CONFLICTS_PER_CALL = 8  # re-reads after another client changed the session (each means that client progressed)
# Answer budgets in tokens. They bound what a looping model can cost (the bundled 135M model writes ~20 tokens/s
# on 2 cores and often runs to the limit on free text); a strong model's answers fit well inside them.
MAX_TOKENS = {"vanilla": 512, "build": 768, "judge": 768, "feedback": 1024}
MAX_META_TOKENS = 4096


def refine_budget(meta_prompt: str) -> int:
    """Tokens for a refined meta-prompt: room to grow by half plus ~2,000 characters of new tips per batch
    (4 characters ~ 1 token), never more than MAX_META_TOKENS."""
    return min(MAX_META_TOKENS, max(768, len(meta_prompt) * 3 // 8 + 512))


def condense_budget(meta_prompt: str) -> int:
    """Tokens for the condensed meta-prompt (asked to be about half as long): up to three quarters of it."""
    return min(MAX_META_TOKENS, max(512, len(meta_prompt) * 3 // 16))


def initial_meta_prompt() -> str:
    """Figure 11: M0."""
    return prompts.load("lwe_initial_meta_prompt.txt").strip()


# ---- per-session serialisation within a process ----------------------------------------------------------------
_LOCKS: weakref.WeakValueDictionary[tuple[Any, str, str], anyio.Lock] = weakref.WeakValueDictionary()


def _session_lock(store: Store, session: str) -> anyio.Lock:
    """One lock per (event loop, database file, session): every Store on the same file in this loop shares it."""
    where = str(store.path.resolve()) if str(store.path) != ":memory:" else f"memory:{id(store)}"
    key = (anyio.lowlevel.current_token(), where, session)
    lock = _LOCKS.get(key)
    if lock is None:
        lock = _LOCKS[key] = anyio.Lock()
    return lock


# ---- validation --------------------------------------------------------------------------------------------------
def _check_batch_size(value: Any) -> int:
    return validation.whole_number("batch_size", value, 1, MAX_BATCH_SIZE)


def _require_store(judge: Judge) -> Store:
    if judge.store is None:
        raise RuntimeError("lwe_judge needs a Store (judge.store is None)")
    return judge.store


# ---- the vanilla pair ----------------------------------------------------------------------------------------------
async def _vanilla_order(judge: Judge, prompt: str, first: str, second: str, order: str) -> str | None:
    structured = judge.structured
    request = user(
        await text_work.run(t.vanilla_prompt, prompt, first, second, structured, size=text_work.chars(prompt, first, second)),
        max_tokens=MAX_TOKENS["vanilla"],
        json_schema=t.verdict_schema() if structured else None,
        schema_name="lwe_vanilla_verdict",
        purpose=f"lwe_judge:vanilla:{order}",
    )
    reminder = prompts.load("lwe_reask_json.txt" if structured else "lwe_reask_text.txt")
    result = await ask(judge, request, t.parse_verdict, reminder)
    return t.to_caller(result.value, order)


async def vanilla_pair(judge: Judge, prompt: str, response_a: str, response_b: str) -> VanillaPair:
    """The vanilla prompt in both orders, concurrently; verdicts in the caller's A/B."""

    async def one(k: int) -> str | None:
        order = ("AB", "BA")[k]
        first, second = (response_a, response_b) if order == "AB" else (response_b, response_a)
        return await _vanilla_order(judge, prompt, first, second, order)

    ab, ba = await run_each(judge, 2, one)
    return VanillaPair(ab=ab, ba=ba, consistent=ab is not None and ab == ba)


# ---- the meta-prompt path --------------------------------------------------------------------------------------------
async def _generate_text(judge: Judge, content: str, kind: str, session: str, max_tokens: int) -> tuple[str | None, bool]:
    """One free-text generation (a case prompt or a meta-prompt), re-asked once when it comes back empty.
    (text or None, whether the answer was cut at `max_tokens`)."""
    request = user(content, max_tokens=max_tokens, purpose=f"lwe_judge:{kind}:{session}")
    result = await ask(judge, request, t.clean_generated_prompt, prompts.load("lwe_text_reask.txt"))
    return result.value, result.completion.finish_reason == "length"


async def _judge_case(judge: Judge, judge_prompt_text: str) -> tuple[str | None, str, bool]:
    structured = judge.structured
    request = user(
        judge_prompt_text,
        max_tokens=MAX_TOKENS["judge"],
        json_schema=t.verdict_schema() if structured else None,
        schema_name="lwe_case_verdict",
        purpose="lwe_judge:judge",
    )
    reminder = prompts.load("lwe_reask_json.txt" if structured else "lwe_reask_text.txt")
    result = await ask(judge, request, t.parse_verdict, reminder)
    return result.value, result.text, result.reasked


async def _feedback(judge: Judge, meta_prompt: str, judge_prompt_text: str, judgment: str) -> tuple[str, bool]:
    structured = judge.structured
    request = user(
        t.feedback_prompt(meta_prompt, judge_prompt_text, judgment),
        max_tokens=MAX_TOKENS["feedback"],
        json_schema=t.feedback_schema() if structured else None,
        schema_name="lwe_feedback",
        purpose="lwe_judge:feedback",
    )
    first = await judge.complete(request)
    parsed = t.parse_feedback(first.text)
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
    parsed = t.parse_feedback(second.text)
    if parsed is not None:
        return parsed, True
    return (second.text.strip() or first.text.strip() or "(the model wrote no feedback)"), False


async def _condense(judge: Judge, text: str, session: str) -> str | None:
    """Figure 15; the condensed text only when it is non-empty and shorter (no re-ask: a re-ask could not help)."""
    completion = await judge.complete(
        user(t.condense_prompt(text), max_tokens=condense_budget(text), purpose=f"lwe_judge:condense:{session}")
    )
    condensed = t.clean_generated_prompt(completion.text)
    return condensed if condensed and len(condensed) < len(text) else None


class _Refinement:
    def __init__(self) -> None:
        self.versions: list[int] = []
        self.refined = False
        self.condensed = False
        self.warnings: list[str] = []


async def refine_if_due(
    judge: Judge, store: Store, session: str, progress_at: tuple[float, float, float], *, partial: bool = False
) -> _Refinement:
    """Refine the session's meta-prompt while its buffer holds a full batch (and condense what grew too long).
    With `partial`, a last batch smaller than `batch_size` is refined too (Algorithm 1's "or t = T").

    Serialised per session within the process. Each round reads the current version and the oldest batch,
    calls the model outside any transaction, then commits version + used items atomically if the session is
    still at the version read; after a concurrent change it re-reads (the items stay buffered meanwhile).
    `progress_at` = (done value while refining, done value while condensing, total).
    """
    out = _Refinement()
    repo = LweRepository(store)
    at_refine, at_condense, total = progress_at
    state = await repo.aio.session_row(session)
    if state is None or state["pending"] < (1 if partial else state["batch_size"]):
        return out  # nothing due: do not wait behind another task's refinement
    refines = conflicts = 0
    async with _session_lock(store, session):
        while refines < MAX_REFINES_PER_CALL and conflicts <= MAX_CONFLICTS_PER_CALL:
            state = await repo.aio.session_row(session)
            assert state is not None
            batch = await repo.aio.pending(session, limit=state["batch_size"])
            if not batch or (len(batch) < state["batch_size"] and not partial):
                break
            await judge.progress(at_refine, total, f"refining the meta-prompt (v{state['current_version']}) from {len(batch)} feedback items")
            budget = refine_budget(state["text"])
            try:
                refined, cut = await _generate_text(judge, t.refine_prompt(state["text"], t.batch_text(batch)), "refine", session, budget)
            except BackendError as exc:
                # The case itself was judged; a refinement that fails (e.g. a prompt past a small local model's
                # context) must not fail it. The items stay buffered for the next attempt.
                out.warnings.append(f"the refinement of v{state['current_version']} failed ({exc}); its {len(batch)} feedback items stay buffered")
                break
            if refined is None:
                out.warnings.append(
                    f"the refinement of v{state['current_version']} produced no text; its {len(batch)} feedback items stay buffered"
                )
                break
            try:
                version = await repo.aio.commit_version(
                    session,
                    expected_version=state["current_version"],
                    text=refined,
                    reason="refine",
                    use_feedback=[item["id"] for item in batch],
                )
            except LweConflict:
                conflicts += 1
                continue  # another client refined (or reset) meanwhile: re-read and, if a batch is still due, retry
            refines += 1
            out.versions.append(version)
            out.refined = True
            if cut:
                out.warnings.append(f"the refined meta-prompt v{version} was cut at the {budget}-token limit")
            if len(refined) > t.CONDENSE_AT:
                await judge.progress(at_condense, total, f"condensing the meta-prompt (v{version}, {len(refined):,} characters)")
                condensed = await _condense(judge, refined, session)
                if condensed is None:
                    out.warnings.append(f"v{version} has {len(refined):,} characters and condensing it did not shorten it")
                    continue
                try:
                    out.versions.append(await repo.aio.commit_version(session, expected_version=version, text=condensed, reason="condense"))
                    out.condensed = True
                except LweConflict:
                    conflicts += 1
    return out


async def refine_pending(judge: Judge, store: Store, session: str) -> _Refinement:
    """The end of a run (Algorithm 1, "t mod B = 0 or t = T"): refine the meta-prompt from whatever feedback is
    still buffered, even fewer than `batch_size` items. Nothing buffered: nothing happens."""
    validation.session_name(session)
    return await refine_if_due(judge, store, session, (0.0, 0.5, 1.0), partial=True)


async def lwe_judge(
    judge: Judge,
    *,
    prompt: str,
    response_a: str,
    response_b: str,
    session: str = "default",
    selective: bool = True,
    batch_size: int = 4,
    learn: bool = True,
) -> LweResult:
    """`learn=False` judges the case with the session's current meta-prompt for scoring only: no feedback is
    written or buffered and nothing is refined (the bench's swapped placement, the paper's Appendix A protocol)."""
    validation.text("prompt", prompt)
    validation.text("response_a", response_a)
    validation.text("response_b", response_b)
    validation.total(prompt, response_a, response_b)
    validation.session_name(session)
    validation.flag("selective", selective)
    _check_batch_size(batch_size)
    validation.flag("learn", learn)
    store = _require_store(judge)
    repo = LweRepository(store)

    state = await repo.aio.ensure_session(session, batch_size, initial_meta_prompt())
    # Progress steps: [vanilla pair], case prompt, judgment, feedback, buffering, refinement (+ condensing).
    base = 1.0 if selective else 0.0
    total = base + 5
    vanilla: VanillaPair | None = None
    warnings: list[str] = []

    if selective:
        await judge.progress(0, total, "vanilla judgments in both orders")
        vanilla = await vanilla_pair(judge, prompt, response_a, response_b)
        if vanilla.consistent:
            await judge.progress(total, total, f"consistent in both orders ({vanilla.ab}): answered without the meta-prompt")
            state = (await repo.aio.session_row(session)) or state
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
        unparsed = [order for order, side in (("AB", vanilla.ab), ("BA", vanilla.ba)) if side is None]
        if unparsed:
            warnings.append(f"the vanilla judgment stayed unparsed in order {' and '.join(unparsed)}: treated as inconsistent")
        else:
            warnings.append(f"the vanilla verdicts disagreed between the orders (AB: {vanilla.ab}, BA: {vanilla.ba}): the "
                            "winner is the meta-prompt path's judgment in one order, which position bias may decide")
        await judge.progress(base, total, f"inconsistent vanilla verdicts (AB: {vanilla.ab}, BA: {vanilla.ba}): meta-prompt path")

    # A full batch left buffered (by a crash mid-refinement, or a refinement that produced no text) is refined
    # first, so that this case is judged with the newest meta-prompt.
    early = await refine_if_due(judge, store, session, (base + 0.1, base + 0.15, total)) if learn else _Refinement()

    state = await repo.aio.session_row(session)
    assert state is not None
    meta_version, meta_prompt = state["current_version"], state["text"]
    example = t.example_text(prompt, response_a, response_b)

    await judge.progress(base + 0.2, total, f"writing the case-specific evaluation prompt from meta-prompt v{meta_version}")
    build = t.build_eval_prompt_request(meta_prompt, example)
    eval_prompt, cut = await _generate_text(judge, build, "build", session, MAX_TOKENS["build"])
    warnings.extend(early.warnings)
    if cut:
        warnings.append(f"the case-specific evaluation prompt was cut at the {MAX_TOKENS['build']}-token limit")
    if eval_prompt is None:
        warnings.append("the model wrote an empty evaluation prompt; the case was judged with the answer format only")
    await judge.progress(base + 1, total, "judging with the case-specific prompt")
    judge_prompt_text = t.judge_prompt(eval_prompt or "", example, judge.structured)
    winner, judgment, reasked = await _judge_case(judge, judge_prompt_text)
    if winner is None:
        warnings.append("the meta-path judgment stayed unparsed after a re-ask: winner is null (the feedback still records it)")
    if not learn:
        await judge.progress(total, total, "done (scoring only: no feedback, no refinement)")
        state = (await repo.aio.session_row(session)) or state
        return _meta_path_result(judge, session, state, warnings, winner=winner, vanilla=vanilla, eval_prompt=eval_prompt, judgment=judgment, reasked=reasked, meta_version=meta_version)
    await judge.progress(base + 2, total, "writing self-feedback on the judgment")
    feedback, feedback_ok = await _feedback(judge, meta_prompt, judge_prompt_text, judgment)
    await judge.progress(base + 3, total, "buffering the feedback")
    _, pending = await repo.aio.add_feedback(
        session,
        {
            "meta_version": meta_version,
            "prompt": prompt,
            "response_a": response_a,
            "response_b": response_b,
            "eval_prompt": eval_prompt or "",
            "judgment": judgment,
            "winner": winner,
            "feedback": feedback,
            "feedback_parse_ok": feedback_ok,
        },
    )
    late = _Refinement()
    if pending >= state["batch_size"]:
        late = await refine_if_due(judge, store, session, (base + 4, base + 4.5, total))
    warnings.extend(late.warnings)
    await judge.progress(total, total, "done" + (" (meta-prompt refined)" if late.refined else f" ({pending} of {state['batch_size']} feedback items buffered)"))

    versions = early.versions + late.versions
    final = await repo.aio.session_row(session)
    assert final is not None
    return _meta_path_result(
        judge, session, final, warnings, winner=winner, vanilla=vanilla, eval_prompt=eval_prompt, judgment=judgment, reasked=reasked,
        meta_version=meta_version, feedback=feedback, feedback_parse_ok=feedback_ok, versions=versions,
        condensed=early.condensed or late.condensed,
    )


def _meta_path_result(
    judge: Judge, session: str, state: dict[str, Any], warnings: list[str], *, winner: str | None, vanilla: Any,
    eval_prompt: str | None, judgment: str, reasked: bool, meta_version: int, feedback: str | None = None,
    feedback_parse_ok: bool | None = None, versions: list[int] | None = None, condensed: bool = False,
) -> LweResult:
    """The result of a meta-prompt-path case; `feedback` None when the case was judged for scoring only."""
    versions = versions or []
    return LweResult(
        winner=winner,
        path="meta_prompt",
        vanilla=vanilla,
        orders_disagreed=None if vanilla is None or vanilla.ab is None or vanilla.ba is None else vanilla.ab != vanilla.ba,
        eval_prompt=eval_prompt,
        judgment=judgment,
        parse_ok=winner is not None,
        reasked=reasked,
        feedback=feedback,
        feedback_parse_ok=feedback_parse_ok,
        meta_prompt_version=meta_version,
        refined=bool(versions),
        new_meta_prompt_version=versions[-1] if versions else None,
        new_meta_prompt_versions=versions,
        condensed=condensed,
        pending_feedback=state["pending"],
        batch_size=state["batch_size"],
        session=session,
        warnings=warnings,
        model=judge.model_id,
        usage=judge.usage(),
    )
