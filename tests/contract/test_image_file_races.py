"""An image file named by path is opened once, and what is checked is what is read: a name swapped for a FIFO or a
folder swapped for a link to elsewhere at the moment of the open (an audit hook swaps it as the open begins, so the
window is hit every time) neither hangs the reader nor leaks a file from outside JUDGE_MCP_IMAGE_DIRS; and the file
is read off the event loop."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from judge_mcp import Judge
from judge_mcp.contract import images as imagelib
from testkit.scripted_judges import UniversalJudge
from tests.helpers import app_env
from tests.image_data import png, uri

INSIDE, OUTSIDE = png(11, size=300), png(12, size=300)
_armed: list[tuple[Callable[[str], bool], Callable[[], None]]] = []  # (which open, what to do first), fired once


def _hook(event: str, args: tuple) -> None:
    if event != "open" or not _armed or not isinstance(args[0], (str, Path)):
        return
    matches, action = _armed[0]
    if matches(os.fspath(args[0])):
        _armed.clear()
        action()


sys.addaudithook(_hook)  # audit hooks stay for the process: this one does nothing unless a test arms it


@pytest.fixture
def arm():
    def arming(matches: Callable[[str], bool], action: Callable[[], None]) -> None:
        _armed[:] = [(matches, action)]

    yield arming
    _armed.clear()


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    folder = (tmp_path / "allowed").resolve()
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "shot.png").write_bytes(INSIDE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shot.png").write_bytes(OUTSIDE)
    return folder


def _read(path: Path, folder: Path) -> tuple[threading.Thread, list]:
    """read_path in a thread (so a read that blocks does not block the test): (the thread, [its result or error])."""
    out: list = []

    def run() -> None:
        try:
            out.append(imagelib.read_path(str(path), imagelib.PathPolicy(stdio=True, dirs=(folder,))))
        except ValueError as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    return thread, out


def test_a_name_swapped_for_a_fifo_as_it_is_opened_is_refused_at_once(allowed: Path, arm) -> None:
    target = allowed / "sub" / "shot.png"
    fifo = allowed / "sub" / "fifo"
    os.mkfifo(fifo)
    fired: list[bool] = []
    arm(lambda p: p.endswith("shot.png"), lambda: (fired.append(True), os.replace(fifo, target)))
    thread, out = _read(target, allowed)
    if thread.is_alive():  # the old reader waits for a writer: give it one (and EOF) so the thread ends
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
    assert fired and not thread.is_alive()
    assert out and isinstance(out[0], ValueError) and "is not a regular file" in str(out[0]), out


def test_a_folder_swapped_for_a_link_outside_as_it_is_walked_leaks_nothing(allowed: Path, arm, tmp_path: Path) -> None:
    sub = allowed / "sub"

    def swap() -> None:
        os.rename(sub, allowed / "moved")
        os.symlink(tmp_path / "outside", sub)

    fired: list[bool] = []
    arm(lambda p: p == "sub" or p.endswith("shot.png"), lambda: (fired.append(True), swap()))
    _, out = _read(sub / "shot.png", allowed)
    assert fired and out
    assert out[0] != uri(OUTSIDE), "read a file from outside JUDGE_MCP_IMAGE_DIRS"
    assert isinstance(out[0], ValueError) and "symbolic link" in str(out[0]), out
    # the link stays refused once it is there, as a folder on the way or as the file itself
    assert "symbolic link" in str(_read(sub / "shot.png", allowed)[1][0])
    (allowed / "moved" / "link.png").symlink_to(allowed / "moved" / "shot.png")
    assert "symbolic link" in str(_read(allowed / "moved" / "link.png", allowed)[1][0])
    assert _read(allowed / "moved" / "shot.png", allowed)[1] == [uri(INSIDE)]


def test_a_path_through_a_link_above_the_allowed_folder_still_reads(allowed: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(allowed)  # e.g. /tmp for /private/tmp: the folder is still the allowed one
    assert _read(tmp_path / "alias" / "sub" / "shot.png", allowed)[1] == [uri(INSIDE)]
    assert _read(tmp_path / "alias" / "sub" / ".." / "sub" / "shot.png", allowed)[1] == [uri(INSIDE)]


async def test_the_file_is_read_off_the_event_loop(scripted, allowed: Path, tmp_path: Path, arm) -> None:
    """While the file's open is held up, the event loop keeps running other tasks."""
    ticks = [0]
    progressed: list[bool] = []

    def slow_open() -> None:
        start = ticks[0]
        for _ in range(100):  # up to ~2 s; the loop, if free, ticks every 10 ms
            time.sleep(0.02)
            if ticks[0] > start:
                break
        progressed.append(ticks[0] > start)

    async def ticker() -> None:
        while True:
            ticks[0] += 1
            await anyio.sleep(0.01)

    server = scripted(UniversalJudge())
    env = app_env(server, tmp_path / "judge.db", JUDGE_MCP_IMAGE_DIRS=str(allowed))
    arm(lambda p: p.endswith("shot.png"), slow_open)
    async with Judge(env=env) as judge, anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        result = await judge.compare_pair(prompt="Which screenshot?", response_a="a", response_b="b",
                                          images=[str(allowed / "sub" / "shot.png")])
        tg.cancel_scope.cancel()
    assert result.winner in ("A", "B", None)
    assert progressed == [True]


def test_the_allowed_folder_itself_swapped_for_a_link_is_refused(allowed: Path, tmp_path: Path) -> None:
    os.rename(allowed, tmp_path / "was-allowed")
    os.symlink(tmp_path / "outside", allowed)  # the folder JUDGE_MCP_IMAGE_DIRS named (resolved at start) is now a link
    (tmp_path / "outside" / "sub").mkdir()
    (tmp_path / "outside" / "sub" / "shot.png").write_bytes(OUTSIDE)
    out = _read(allowed / "sub" / "shot.png", allowed)[1]
    assert out != [uri(OUTSIDE)] and "symbolic link" in str(out[0])
