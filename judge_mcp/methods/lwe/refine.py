"""Refining a session's meta-prompt (RefineMetaPrompt, Figure 13, and condensing, Figure 15 / Appendix A).

When the session's buffer holds `batch_size` feedback items, a new version is made from exactly the oldest
`batch_size` items; past 10,000 characters it is condensed into a further version. Model calls never run inside a
database transaction: a round reads (current version, oldest batch), calls the model, then writes (new version,
items marked used) in one transaction that first checks the session is still at the version it read and the items
are still pending; otherwise nothing is written and it re-reads. Within a process, refinements of one session are
serialised by a per-session lock (other sessions run in parallel); across processes the check above keeps every
item used exactly once.
"""

from __future__ import annotations

import weakref
from typing import Any

import anyio
import anyio.lowlevel

from judge_mcp import prompts
from judge_mcp.contract.fields import check_session
from judge_mcp.backends.base import user
from judge_mcp.backends.errors import BackendError
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.ask import ask
from judge_mcp.methods.lwe import text as lwe_text
from judge_mcp.storage.lwe_sessions import LweConflict, LweRepository
from judge_mcp.storage.engine import Engine

MAX_REFINES_PER_CALL = 4  # refinements one call may commit (a backlog of several full batches)
MAX_CONFLICTS_PER_CALL = 8  # re-reads after another client changed the session (each means that client progressed)
MAX_META_TOKENS = 4096


def refine_budget(meta_prompt: str) -> int:
    """Tokens for a refined meta-prompt: room to grow by half plus ~2,000 characters of new tips per batch
    (4 characters ~ 1 token), never more than MAX_META_TOKENS."""
    return min(MAX_META_TOKENS, max(768, len(meta_prompt) * 3 // 8 + 512))


def condense_budget(meta_prompt: str) -> int:
    """Tokens for the condensed meta-prompt (asked to be about half as long): up to three quarters of it."""
    return min(MAX_META_TOKENS, max(512, len(meta_prompt) * 3 // 16))


# ---- per-session serialisation within a process ----------------------------------------------------------------
_LOCKS: weakref.WeakValueDictionary[tuple[Any, str, str], anyio.Lock] = weakref.WeakValueDictionary()


def _session_lock(store: Engine, session: str) -> anyio.Lock:
    """One lock per (event loop, database, session): every store open on the same database in this loop shares it."""
    key = (anyio.lowlevel.current_token(), store.location, session)
    lock = _LOCKS.get(key)
    if lock is None:
        lock = _LOCKS[key] = anyio.Lock()
    return lock


# ---- the model calls -----------------------------------------------------------------------------------------------
async def generate_text(
    judge: CallContext, content: str, kind: str, session: str, max_tokens: int, images: tuple = ()
) -> tuple[str | None, bool]:
    """One free-text generation (a case prompt, with the case's images, or a meta-prompt), re-asked once when it
    comes back empty. (text or None, whether the answer was cut at `max_tokens`)."""
    request = user(content, max_tokens=max_tokens, purpose=f"lwe_judge:{kind}:{session}", images=images)
    result = await ask(judge, request, lwe_text.clean_generated_prompt, prompts.load("lwe_text_reask.txt"))
    return result.value, result.completion.finish_reason == "length"


async def _condense(judge: CallContext, meta_prompt: str, session: str) -> str | None:
    """Figure 15; the condensed text only when it is non-empty and shorter (no re-ask: a re-ask could not help)."""
    completion = await judge.complete(
        user(lwe_text.condense_prompt(meta_prompt), max_tokens=condense_budget(meta_prompt), purpose=f"lwe_judge:condense:{session}")
    )
    condensed = lwe_text.clean_generated_prompt(completion.text)
    return condensed if condensed and len(condensed) < len(meta_prompt) else None


# ---- refinement rounds -----------------------------------------------------------------------------------------------
class Refinement:
    """What one call's refinements did: the versions committed, and warnings for the tool's result."""

    def __init__(self) -> None:
        self.versions: list[int] = []
        self.refines = 0  # refined versions committed (condensed ones not counted)
        self.condensed = False
        self.conflicts = 0  # commits refused because another client changed the session first
        self.warnings: list[str] = []

    @property
    def refined(self) -> bool:
        return self.refines > 0


async def _condense_version(judge: CallContext, repo: LweRepository, session: str, version: int, refined: str, out: Refinement) -> None:
    """Condense a refined meta-prompt that grew past CONDENSE_AT into a further version (when that shortens it). A
    backend failure leaves the refined version current, as a failed refinement leaves the batch buffered: the case and
    the committed refinement stand, and a warning says so."""
    try:
        condensed = await _condense(judge, refined, session)
    except BackendError as exc:
        out.warnings.append(f"condensing v{version} ({len(refined):,} characters) failed ({exc}); it stays the current version")
        return
    if condensed is None:
        out.warnings.append(f"v{version} has {len(refined):,} characters and condensing it did not shorten it")
        return
    try:
        out.versions.append(await repo.aio.commit_version(session, expected_version=version, text=condensed, reason="condense"))
        out.condensed = True
    except LweConflict:
        out.conflicts += 1


async def _refine_round(
    judge: CallContext, repo: LweRepository, session: str, progress_at: tuple[float, float, float], partial: bool, out: Refinement
) -> bool:
    """One round: read the current version and the oldest batch, refine, commit. False when no further round
    should run (nothing due, or a failure that leaves the batch buffered)."""
    at_refine, at_condense, total = progress_at
    state = await repo.aio.session_row(session)
    assert state is not None
    batch = await repo.aio.pending(session, limit=state["batch_size"])
    if not batch or (len(batch) < state["batch_size"] and not partial):
        return False
    version_read = state["current_version"]
    await judge.progress(at_refine, total, f"refining the meta-prompt (v{version_read}) from {len(batch)} feedback items")
    budget = refine_budget(state["text"])
    request = lwe_text.refine_prompt(state["text"], lwe_text.batch_text(batch))
    try:
        refined, cut = await generate_text(judge, request, "refine", session, budget)
    except BackendError as exc:
        # The case itself was judged; a refinement that fails (e.g. a prompt past a small local model's
        # context) must not fail it. The items stay buffered for the next attempt.
        out.warnings.append(f"the refinement of v{version_read} failed ({exc}); its {len(batch)} feedback items stay buffered")
        return False
    if refined is None:
        out.warnings.append(f"the refinement of v{version_read} produced no text; its {len(batch)} feedback items stay buffered")
        return False
    try:
        version = await repo.aio.commit_version(
            session, expected_version=version_read, text=refined, reason="refine", use_feedback=[item["id"] for item in batch]
        )
    except LweConflict:
        out.conflicts += 1
        return True  # another client refined (or reset) meanwhile: re-read and, if a batch is still due, retry
    out.versions.append(version)
    out.refines += 1
    if cut:
        out.warnings.append(f"the refined meta-prompt v{version} was cut at the {budget}-token limit")
    if len(refined) > lwe_text.CONDENSE_AT:
        await judge.progress(at_condense, total, f"condensing the meta-prompt (v{version}, {len(refined):,} characters)")
        await _condense_version(judge, repo, session, version, refined, out)
    return True


async def refine_if_due(
    judge: CallContext, store: Engine, session: str, progress_at: tuple[float, float, float], *, partial: bool = False
) -> Refinement:
    """Refine the session's meta-prompt while its buffer holds a full batch (and condense what grew too long).
    With `partial`, a last batch smaller than `batch_size` is refined too (Algorithm 1's "or t = T").

    Serialised per session within the process. Each round reads the current version and the oldest batch,
    calls the model outside any transaction, then commits version + used items atomically if the session is
    still at the version read; after a concurrent change it re-reads (the items stay buffered meanwhile).
    `progress_at` = (done value while refining, done value while condensing, total).
    """
    out = Refinement()
    repo = LweRepository(store)
    state = await repo.aio.session_row(session)
    if state is None or state["pending"] < (1 if partial else state["batch_size"]):
        return out  # nothing due: do not wait behind another task's refinement
    async with _session_lock(store, session):
        while out.refines < MAX_REFINES_PER_CALL and out.conflicts <= MAX_CONFLICTS_PER_CALL:
            if not await _refine_round(judge, repo, session, progress_at, partial, out):
                break
    return out


async def refine_pending(judge: CallContext, store: Engine, session: str) -> Refinement:
    """The end of a run (Algorithm 1, "t mod B = 0 or t = T"): refine the meta-prompt from whatever feedback is
    still buffered, even fewer than `batch_size` items. Nothing buffered: nothing happens."""
    check_session(session)
    return await refine_if_due(judge, store, session, (0.0, 0.5, 1.0), partial=True)
