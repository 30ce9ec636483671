"""One Judge used from several threads, each running its own asyncio.run: every call answers (no "attached to a
different loop"), each loop's backend sessions are closed when its loop ends (no unclosed-session warnings pile up),
and the calls share the one database."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from pathlib import Path

from judge_mcp import Judge
from testkit.scripted_judges import UniversalJudge
from tests.helpers import app_env

QUESTION = "What is the capital of Australia?"
THREADS, ROUNDS = 8, 3


def test_one_judge_serves_threads_each_with_its_own_event_loop(scripted, tmp_path: Path) -> None:
    server = scripted(UniversalJudge())
    judge = Judge(env=app_env(server, tmp_path / "judge.db"))
    winners: list[str | None] = []
    errors: list[BaseException] = []

    def work(i: int, r: int) -> None:
        try:
            result = asyncio.run(judge.compare_pair(prompt=f"{QUESTION} ({r}.{i})", response_a="Sydney.", response_b="Canberra."))
            winners.append(result.winner)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    gc.collect()  # what earlier tests left to the collector warns now, not inside the recording below
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for r in range(ROUNDS):
            threads = [threading.Thread(target=work, args=(i, r)) for i in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        gc.collect()  # a session a loop left open would warn as it is collected
        stats = asyncio.run(judge.judge_stats(last=100))
        asyncio.run(judge.aclose())
        gc.collect()
    assert errors == [], [repr(e) for e in errors[:3]]
    assert winners == ["B"] * THREADS * ROUNDS
    assert stats.all_time.verdicts == THREADS * ROUNDS  # every loop's verdicts reached the one database
    unclosed = [str(w.message) for w in caught if "nclosed" in str(w.message) or issubclass(w.category, ResourceWarning)]
    assert unclosed == [], unclosed[:3]


async def test_aclose_on_the_loop_closes_that_loops_backends(scripted, tmp_path: Path) -> None:
    server = scripted(UniversalJudge())
    judge = Judge(env=app_env(server, tmp_path / "judge.db"))
    await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.")
    app = await judge._loops.current()
    sessions = [b._session for b in app._backends.values()]
    assert sessions and all(s is not None and not s.closed for s in sessions)
    await judge.aclose()
    assert all(s.closed for s in sessions)
