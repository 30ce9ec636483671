"""stdin read by the event loop where it is a pipe (transports/stdio.py `_PipeLines`): the lines the SDK's thread
reader would give (UTF-8 with bad bytes replaced, CRLF read as LF, a last line without LF), the descriptor's
blocking mode given back, and anything that is not a pipe or a socket left to the thread reader."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from judge_mcp.server.transports.stdio import _PipeLines

SENT = b'{"a": 1}\n{"b": "\xff"}\r\n' + b'{"c": "' + b"x" * 300_000 + b'"}\n\n{"last": true}'


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


async def _read(writes: list[bytes]) -> tuple[list[str], bool]:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as buffer:
        lines = await _PipeLines.open(buffer)
        assert lines is not None
        got: list[str] = []

        async def writer() -> None:
            for chunk in writes:  # in pieces, a line split across them; from a thread, as a client writes from its own
                await anyio.to_thread.run_sync(_write_all, write_fd, chunk)
                await anyio.sleep(0.01)
            os.close(write_fd)

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            async for line in lines:
                got.append(line)
        lines.close()
        return got, os.get_blocking(read_fd)


def test_pipe_lines_read_as_the_text_reader_reads_them():
    pieces = [SENT[:5], SENT[5:100], SENT[100:200_000], SENT[200_000:]]
    got, blocking = anyio.run(_read, pieces)
    assert got == ['{"a": 1}\n', '{"b": "\ufffd"}\n', '{"c": "' + "x" * 300_000 + '"}\n', "\n", '{"last": true}']
    assert blocking  # given back as it was


def test_a_file_is_left_to_the_thread_reader(tmp_path: Path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n')

    async def opened() -> object:
        with path.open("rb") as f:
            return await _PipeLines.open(f)

    assert anyio.run(opened) is None
