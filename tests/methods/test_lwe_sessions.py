"""LWE sessions: persistence across SqliteEngine instances, concurrency (two judges in one loop; threads with loops of their
own, like separate processes) without a feedback item lost or used twice, a refinement that restarts from the
version it read when the session changed, reset and rollback, the session errors, stale commits refused, and the
listing, history and export the resources and the CLI show."""

from __future__ import annotations

import threading

import anyio
import pytest

from judge_mcp.methods import lwe
from judge_mcp.storage.lwe_sessions import LweConflict, LweRepository
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.contract.fields import InputError
from testkit.scripted_judges import LweScript, lwe_case, role_of
from tests.helpers import Hold, Rendezvous, integrity_ok, judge_for, until
from tests.engines import on_both_engines


# ---- persistence and concurrency ------------------------------------------------------------------------------------
async def test_new_store_on_the_same_file_continues(scripted, tmp_path):
    script = LweScript("first")
    server = scripted(script)
    path = tmp_path / "persist.db"
    first = SqliteEngine(path)
    judge = judge_for(server, first)
    for i in range(2):
        await lwe.lwe_judge(judge, **lwe_case(i), session="p", batch_size=2)
    for i in range(2, 3):
        await lwe.lwe_judge(judge, **lwe_case(i), session="p")  # a batch half filled before the "restart"
    first.close()

    second = SqliteEngine(path)
    judge = judge_for(server, second)
    result = await lwe.lwe_judge(judge, **lwe_case(3), session="p", batch_size=8)  # batch_size is fixed at creation
    assert result.meta_prompt_version == 2 and result.batch_size == 2
    assert result.refined and result.new_meta_prompt_version == 3
    history = lwe.session_history(second, "p")
    assert [(h["version"], h["parent"], h["reason"]) for h in history] == [(1, None, "initial"), (2, 1, "refine"), (3, 2, "refine")]
    used = [f["used_in_version"] for f in LweRepository(second).feedback("p")]
    assert used == [2, 2, 3, 3]
    second.close()


def _check_every_item_used_once(store: SqliteEngine, session: str, n_items: int, batch: int) -> None:
    versions = LweRepository(store).versions(session)
    refines = [v for v in versions if v["reason"] == "refine"]
    assert len(refines) == n_items // batch
    ids = [i for v in refines for i in v["feedback_ids"]]
    assert len(ids) == len(set(ids)) == n_items
    rows = LweRepository(store).feedback(session)
    assert len(rows) == n_items and all(r["status"] == "used" for r in rows)
    assert sorted(ids) == sorted(r["id"] for r in rows)
    for v in refines:  # every refinement started from the version it replaced, one chain
        assert len(v["feedback_ids"]) == batch
        assert all(r["used_in_version"] == v["version"] for r in rows if r["id"] in v["feedback_ids"])
    assert [v["parent"] for v in versions] == [None] + [v["version"] for v in versions[:-1]]
    assert integrity_ok(store)


async def test_two_judges_in_one_loop_share_the_session_safely(scripted, tmp_path):
    """The first refinement is held in flight until the other client, whose next item is due for refinement too, is
    waiting for the session's lock: the window where a second refinement of the same batch could start is hit."""
    from judge_mcp.methods.lwe import refine

    script = LweScript("first")
    hold = Hold(script, when=lambda payload: role_of(payload) == "refine")
    server = scripted(hold)
    path = tmp_path / "conc.db"
    stores = [SqliteEngine(path), SqliteEngine(path)]
    judges = [judge_for(server, s) for s in stores]

    async def client(k: int) -> None:
        for i in range(k, 8, 2):
            await lwe.lwe_judge(judges[k], **lwe_case(i), session="shared", batch_size=4)

    def waiting_for_the_lock() -> int:
        return sum(lock.statistics().tasks_waiting for lock in list(refine._LOCKS.values()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(client, 0)
        tg.start_soon(client, 1)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)  # one client refines (held)...
        await until(lambda: waiting_for_the_lock() == 1)  # ...while the other waits to refine the same session
        hold.release()
    _check_every_item_used_once(stores[0], "shared", 8, 4)
    assert script.roles["refine"] == 2  # the in-process lock: no refinement was wasted
    for s in stores:
        s.close()


def test_two_processes_worth_of_clients_never_lose_or_reuse_feedback(scripted, tmp_path):
    """Two threads, each with its own event loop and SqliteEngine (so no shared in-process lock): only the
    database's check-and-commit keeps each item used exactly once. The race is forced, not hoped for: the first
    refine request of each thread waits at a barrier until the other's is in flight too, so both refine the same
    version from the same batch and one of them must lose at the commit."""
    script = LweScript("first")
    race = Rendezvous(2, script, rounds=1, when=lambda payload: role_of(payload) == "refine")
    server = scripted(race)
    path = tmp_path / "conc2.db"
    SqliteEngine(path).close()
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def worker(k: int) -> None:
        store = SqliteEngine(path)
        try:
            judge = judge_for(server, store)

            async def run() -> None:
                barrier.wait()
                for i in range(k, 12, 2):
                    await lwe.lwe_judge(judge, **lwe_case(100 + i), session="shared", batch_size=4)

            anyio.run(run)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors
    assert (race.met, race.broken) == (2, 0)  # both threads were refining at once
    check = SqliteEngine(path)
    _check_every_item_used_once(check, "shared", 12, 4)
    committed = [v for v in LweRepository(check).versions("shared") if v["reason"] == "refine"]
    check.close()
    # the refinement that lost the race was made but not committed: its items stayed pending for a later batch
    assert script.roles["refine"] > len(committed) == 3


@on_both_engines
async def test_refinement_restarts_from_the_version_it_read_when_the_session_changes(make_judge, store):
    script = LweScript("first")
    hold = Hold(script, when=lambda payload: role_of(payload) == "refine")  # the first refine call waits for release()
    judge, server = make_judge(hold)
    LweRepository(store).ensure_session("race", 4, lwe.initial_meta_prompt())
    LweRepository(store).commit_version("race", expected_version=1, text="LEARNED v2: compare facts first.", reason="refine")
    for i in range(3, 6):
        await lwe.lwe_judge(judge, **lwe_case(i), session="race")

    async with anyio.create_task_group() as tg:
        holder = {}

        async def fourth() -> None:
            holder["r"] = await lwe.lwe_judge(judge, **lwe_case(6), session="race")

        tg.start_soon(fourth)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)
        lwe.lwe_session(store, session="race", action="rollback", version=1)  # v3 while the refine of v2 is in flight
        hold.release()
    result = holder["r"]
    assert result.refined and result.new_meta_prompt_version == 4
    history = lwe.session_history(store, "race")
    assert [(h["version"], h["parent"], h["reason"], h["restored_from"]) for h in history] == [
        (1, None, "initial", None),
        (2, 1, "refine", None),
        (3, 2, "rollback", 1),
        (4, 3, "refine", None),
    ]
    assert script.roles["refine"] == 2  # the first refinement (of v2) was dropped, not committed
    refine_requests = [p["messages"][0]["content"] for p in server.requests if p["messages"][0]["content"].startswith("Optimize")]
    assert "LEARNED v2" in refine_requests[0] and "LEARNED v2" not in refine_requests[1]
    assert lwe.initial_meta_prompt() in refine_requests[1]  # the retry refined the rolled-back text
    rows = LweRepository(store).feedback("race")
    assert [(r["status"], r["used_in_version"]) for r in rows] == [("used", 4)] * 4


# ---- reset, rollback, errors, listing ---------------------------------------------------------------------------------
@on_both_engines
def test_reset_and_rollback_add_versions(store):
    LweRepository(store).ensure_session("adm", 4, lwe.initial_meta_prompt())
    v2 = LweRepository(store).commit_version("adm", expected_version=1, text="learned v2", reason="refine")
    assert v2 == 2
    LweRepository(store).add_feedback("adm", {"meta_version": 2, "prompt": "q", "response_a": "a", "response_b": "b", "eval_prompt": "e",
                                    "judgment": "[[A]]", "winner": "A", "feedback": "fb", "feedback_parse_ok": True})
    rolled = lwe.lwe_session(store, session="adm", action="rollback", version=1)
    assert rolled.current_version == 3 and rolled.meta_prompt == lwe.initial_meta_prompt()
    assert rolled.pending_feedback == 1  # rollback keeps the buffer
    assert [(v.version, v.parent, v.reason, v.restored_from) for v in rolled.versions][-1] == (3, 2, "rollback", 1)

    back = lwe.lwe_session(store, session="adm", action="rollback", version=2)
    assert back.meta_prompt == "learned v2" and back.versions[-1].parent == 3

    reset = lwe.lwe_session(store, session="adm", action="reset")
    assert reset.current_version == 5 and reset.versions[-1].reason == "reset" and reset.versions[-1].parent == 4
    assert reset.meta_prompt == lwe.initial_meta_prompt()
    assert reset.pending_feedback == 0 and reset.discarded_feedback == 1
    assert [f["status"] for f in LweRepository(store).feedback("adm")] == ["discarded"]

    shown = lwe.lwe_session(store, session="adm", action="show")
    assert shown.current_version == 5 and len(shown.versions) == 5


@on_both_engines
def test_session_errors_name_the_argument(store):
    with pytest.raises(InputError, match="unknown session"):
        lwe.lwe_session(store, session="nope", action="show")
    LweRepository(store).ensure_session("e", 4, lwe.initial_meta_prompt())
    with pytest.raises(InputError, match="'version' is required"):
        lwe.lwe_session(store, session="e", action="rollback")
    with pytest.raises(InputError, match="no version 7"):
        lwe.lwe_session(store, session="e", action="rollback", version=7)
    with pytest.raises(InputError, match="already the current"):
        lwe.lwe_session(store, session="e", action="rollback", version=1)
    with pytest.raises(InputError, match="'action'"):
        lwe.lwe_session(store, session="e", action="delete")
    with pytest.raises(InputError, match="'session'"):
        lwe.lwe_session(store, session="bad name", action="show")
    for fn in (lwe.meta_prompt_text, lwe.session_history, lwe.export_session):
        with pytest.raises(InputError, match="unknown session"):
            fn(store, "missing")


def test_commit_refuses_stale_version_and_used_items(store):
    LweRepository(store).ensure_session("c", 2, "M0")
    ids = [LweRepository(store).add_feedback("c", {"meta_version": 1, "prompt": "q", "response_a": "a", "response_b": "b", "eval_prompt": "e",
                                        "judgment": "j", "winner": None, "feedback": "f", "feedback_parse_ok": False})[0] for _ in range(2)]
    assert LweRepository(store).commit_version("c", expected_version=1, text="M1", reason="refine", use_feedback=ids) == 2
    with pytest.raises(LweConflict):  # stale version: nothing written
        LweRepository(store).commit_version("c", expected_version=1, text="M1'", reason="refine")
    with pytest.raises(LweConflict):  # the items were used already: nothing written
        LweRepository(store).commit_version("c", expected_version=2, text="M2", reason="refine", use_feedback=ids)
    assert [v["version"] for v in LweRepository(store).versions("c")] == [1, 2]
    assert LweRepository(store).session_row("c")["current_version"] == 2


async def test_listing_history_and_export(make_judge, store):
    judge, _ = make_judge(LweScript("first"))
    for i in range(3):
        await lwe.lwe_judge(judge, **lwe_case(i), session="exp", batch_size=2)
    await lwe.lwe_judge(judge, **lwe_case(9), session="other", batch_size=4)
    listed = {row["name"]: row for row in lwe.list_sessions(store)}
    assert listed["exp"]["current_version"] == 2 and listed["exp"]["versions"] == 2
    assert listed["exp"]["pending_feedback"] == 1 and listed["exp"]["batch_size"] == 2
    assert listed["other"]["pending_feedback"] == 1 and listed["other"]["versions"] == 1
    history = lwe.session_history(store, "exp")
    assert [h["current"] for h in history] == [False, True] and history[1]["time"].endswith("Z")
    exported = lwe.export_session(store, "exp")
    assert [v["reason"] for v in exported["versions"]] == ["initial", "refine"]
    assert exported["versions"][1]["text"] == lwe.meta_prompt_text(store, "exp")
    assert [f["status"] for f in exported["feedback"]] == ["used", "used", "pending"]
    assert exported["feedback"][0]["prompt"] == lwe_case(0)["prompt"]
