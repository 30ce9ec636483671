"""Tiny images made in the tests (no files, no downloads), and a scripted judge that decides by the images it is shown
on either wire format."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

from testkit.scripted_judges import UniversalJudge, method_of


def png(seed: int = 0, size: int = 0) -> bytes:
    """A valid 1x1 RGB PNG whose pixel is `seed`; `size` pads it (an ancillary chunk) to about that many bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    pixel = bytes([0, seed % 256, (seed // 256) % 256, 7])
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(pixel))
    pad = max(0, size - 57 - 12)
    return b"\x89PNG\r\n\x1a\n" + body + (chunk(b"tEXt", b"p\x00" + b"x" * max(0, pad - 2)) if pad else b"") + chunk(b"IEND", b"")


def jpeg(seed: int = 0) -> bytes:
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + bytes([seed % 256]) * 8 + b"\xff\xd9"


def gif(seed: int = 0) -> bytes:
    return b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + bytes([seed % 256, 0, 0, 255, 255, 255]) + b"!\xf9\x04\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"


def webp(seed: int = 0) -> bytes:
    data = b"VP8L" + struct.pack("<I", 5) + b"\x2f\x00\x00\x00" + bytes([seed % 256]) + b"\x00"
    return b"RIFF" + struct.pack("<I", 4 + len(data)) + b"WEBP" + data


def uri(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def image_groups(payload: dict[str, Any]) -> dict[str, list[bytes]]:
    """The images of a request's first user message by their caption, on the OpenAI (image_url parts) or the Anthropic
    (base64 image blocks) wire format."""
    message = next(m for m in payload["messages"] if m["role"] == "user")
    groups: dict[str, list[bytes]] = {}
    caption = ""
    for part in message["content"] if isinstance(message["content"], list) else []:
        if part["type"] == "text":
            caption = part["text"]
            groups.setdefault(caption, [])
        elif part["type"] == "image_url":
            groups[caption].append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
        elif part["type"] == "image":
            assert part["source"]["type"] == "base64"
            groups[caption].append(base64.b64decode(part["source"]["data"]))
    return groups


class ScreenshotJudge:
    """compare_pair by the answers' images: the answer whose screenshot is `good` is better, wherever it is shown; the
    other tools as UniversalJudge answers them."""

    def __init__(self, good: bytes):
        self.good = good
        self.others = UniversalJudge()

    def __call__(self, payload: dict[str, Any]) -> Any:
        if method_of(payload) != "compare_pair":
            return self.others(payload)
        groups = image_groups(payload)
        first = next(v for k, v in groups.items() if "Assistant A's answer" in k)
        label = "[[A>B]]" if self.good in first else "[[B>A]]"
        return json.dumps({"own_answer": "", "evaluation": "looked at both screenshots", "verdict": label})
