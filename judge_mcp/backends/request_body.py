"""A request's JSON body, sent without a copy of its images (issue 46: four concurrent 27 MB image calls peaked at
~205 MB each).

A payload's long strings (an image's data URI or base64, LONG_CHARS and more, of characters JSON writes as they are)
are not encoded into the body: the rest of the payload is encoded with a placeholder for each (a few hundred
bytes), and `SplicedBody`, an aiohttp payload of known length (so it goes out with its Content-Length), writes the
pieces in turn, each long string in CHUNK_CHARS slices. The strings are the arguments' own objects (contract/images.py
keeps the caller's data URI), so an image call holds its images once, whatever the number of requests carrying them
(compare_pair's two orders, a panel's members) and of retries. A payload without long strings is the bytes it was.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload

LONG_CHARS = 64 * 1024  # a string this long is spliced in, not encoded into the body
CHUNK_CHARS = 256 * 1024  # written this many characters at a time
# What JSON writes otherwise than as itself: a string holding any of these is encoded into the body as usual
_ESCAPED = re.compile(r'[\x00-\x1f"\\\x7f-\U0010ffff]')


def encode_json(payload: Any) -> bytes:
    """The request body as httpx sent it: compact UTF-8 JSON, NaN refused."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _splice(value: Any, long: list[str], mark: str) -> Any:
    """`value` with each long string that JSON writes as it is replaced by `mark` and its index in `long`."""
    if isinstance(value, str):
        if len(value) >= LONG_CHARS and _ESCAPED.search(value) is None:
            long.append(value)
            return f"{mark}{len(long) - 1}"
        return value
    if isinstance(value, list):
        return [_splice(v, long, mark) for v in value]
    if isinstance(value, dict):
        return {k: _splice(v, long, mark) for k, v in value.items()}
    return value


class SplicedBody(Payload):
    """Encoded pieces (bytes) and long strings (written as ASCII slices), in order; `size` is their length in bytes."""

    def __init__(self, pieces: list[bytes | str]) -> None:
        super().__init__(pieces, content_type="application/json")
        self._pieces = pieces
        self._size = sum(len(p) for p in pieces)  # a long string is ASCII (_ESCAPED): one byte a character

    @property
    def size(self) -> int | None:
        return self._size

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return "".join(p if isinstance(p, str) else p.decode(encoding, errors) for p in self._pieces)

    async def write(self, writer: AbstractStreamWriter) -> None:
        for piece in self._pieces:
            if isinstance(piece, bytes):
                await writer.write(piece)
                continue
            for start in range(0, len(piece), CHUNK_CHARS):
                await writer.write(piece[start : start + CHUNK_CHARS].encode("ascii"))


def request_body(payload: dict[str, Any]) -> bytes | SplicedBody:
    """The encoded request: bytes, or, when it carries long strings (images), a SplicedBody that writes them from
    the payload's own strings."""
    long: list[str] = []
    mark = f"\x00{uuid.uuid4().hex}:"  # in no caller's text: a fresh random token (NUL is written \u0000)
    skeleton = _splice(payload, long, mark)
    encoded = encode_json(skeleton)
    if not long:
        return encoded
    placeholder = re.compile(re.escape(json.dumps(mark)[1:-1].encode()) + rb"(\d+)")
    pieces: list[bytes | str] = []
    end = 0
    for match in placeholder.finditer(encoded):
        pieces += [encoded[end : match.start()], long[int(match.group(1))]]
        end = match.end()
    pieces.append(encoded[end:])
    return SplicedBody(pieces)
