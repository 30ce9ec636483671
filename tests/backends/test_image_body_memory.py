"""An image call's memory stays near its body's size (issue 46, the fourth smaller break: four concurrent 27 MB bodies
peaked at 905 MB). The copies removed, each checked by identity or by allocated bytes (tracemalloc), never by time:
an image carries the caller's own data URI (no decoded bytes kept, no base64 made again); a request body splices
those strings in instead of encoding them (the bytes it writes are the JSON it stood for); the `/mcp` body limit
replays the chunks it counted instead of copying them twice. perf/image_memory.py measures the whole server
(docs/performance.md)."""

from __future__ import annotations

import asyncio
import base64
import json
import tracemalloc

import pytest

from judge_mcp.backends.base import user
from judge_mcp.backends.openai_wire import chat_messages
from judge_mcp.backends.request_body import SplicedBody, encode_json, request_body
from judge_mcp.contract import images
from judge_mcp.server.transports.body_limit import BodyLimit

IMAGE_BYTES = 5_000_000


def uri(seed: int) -> str:
    data = b"\x89PNG\r\n\x1a\n" + bytes([seed]) * (IMAGE_BYTES - 8)
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_an_image_carries_the_callers_own_data_uri_and_no_bytes() -> None:
    given = uri(1)
    image = images.decode(given)
    assert image.data_uri() is given  # the very object: no 6.7 MB copy per image
    assert image.size == IMAGE_BYTES and len(image.sha256) == 64
    assert not any(isinstance(v, (bytes, bytearray)) for v in vars(image).values())  # the decoded bytes are not kept
    assert image.data[:8] == b"\x89PNG\r\n\x1a\n" and len(image.data) == IMAGE_BYTES  # decoded again on demand
    upper = "DATA:IMAGE/PNG;BASE64," + given.split(",", 1)[1]
    assert images.decode(upper).data_uri() == given  # a prefix spelt otherwise is made canonical


class _Writer:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)


def test_a_request_body_splices_the_images_in_without_encoding_them() -> None:
    shots = [images.decode(uri(n)) for n in (2, 3, 4, 5)]
    request = user('Which answer "fits" the images?\n', images=(("the images", tuple(shots)),))
    payload = {"model": "m", "messages": chat_messages(request), "temperature": 0}
    tracemalloc.start()
    try:
        body = request_body(payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(body, SplicedBody)
    assert peak < 1_000_000  # encoding it whole took two copies of its 26.7 MB (a str, then bytes)
    assert sum(1 for piece in body._pieces if any(piece is shot.uri for shot in shots)) == 4  # noqa: SLF001 - the callers' strings
    writer = _Writer()
    asyncio.run(body.write(writer))  # type: ignore[arg-type]
    written = b"".join(writer.chunks)
    assert len(written) == body.size and max(len(c) for c in writer.chunks) <= 256 * 1024
    assert json.loads(written) == payload and written == encode_json(payload)


def test_a_body_without_long_strings_is_the_bytes_it_always_was() -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "x" * 100_000 + '"quoted"'}]}
    assert request_body(payload) == encode_json(payload)  # a long string JSON escapes is encoded as before


async def _through(limit: int, chunks: list[bytes], declared: int | None = None) -> tuple[list[bytes], int | None]:
    """(the chunks the app was handed, the status BodyLimit answered itself, if any)."""
    handed: list[bytes] = []
    status: list[int] = []

    async def app(scope, receive, send) -> None:
        while True:
            message = await receive()
            handed.append(message["body"])
            if not message.get("more_body"):
                return

    incoming = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive():
        return incoming.pop(0)

    async def send(message) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    headers = [(b"content-length", str(declared).encode())] if declared is not None else []
    await BodyLimit(app, limit)({"type": "http", "headers": headers}, receive, send)
    return handed, (status[0] if status else None)


@pytest.mark.anyio
async def test_the_mcp_body_limit_replays_the_chunks_it_counted_and_refuses_past_it() -> None:
    chunks = [b"a" * 1000, b"b" * 1000, b"c" * 10]
    handed, status = await _through(5000, chunks)
    assert status is None and all(h is c for h, c in zip(handed, chunks, strict=True))  # the same objects, no copy
    assert (await _through(2009, chunks))[1] == 413  # counted as they come
    assert (await _through(5000, chunks[:1], declared=6000))[1] == 413  # said by its Content-Length: not read
