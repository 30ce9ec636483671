"""Images a caller brings: checked once, at the arguments, and carried to the wire as bytes with their hash.

An image argument is a `data:image/<type>;base64,<data>` URI (PNG, JPEG, WebP or GIF). It is checked by its magic
bytes, not only its declared type, and by its decoded size. http(s) URLs are refused: the server never fetches on a
client's behalf. Over stdio only, an image may also be a file path inside a folder the operator lists in
JUDGE_MCP_IMAGE_DIRS (`read_path`): opened once, without following a link below the folder and without blocking
(image_files.py), checked like a data: URI, then carried as one; the arguments are checked in a worker thread where
paths are allowed (tools.checked_args). What is logged or stored of an image is its SHA-256, media type and size
(`Image.described`), never its bytes; the call cache keys an image by its SHA-256.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from judge_mcp.contract import image_files

MAX_IMAGES = 8  # images in one list (`images`, `response_a_images`, one option's list)
MAX_CALL_IMAGES = 16  # images in one call, all lists together
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # one image, decoded (Anthropic's per-image limit)
MAX_IMAGE_CHARS = 64 + (MAX_IMAGE_BYTES + 2) // 3 * 4  # the data URI's length at that size
MAX_CALL_IMAGE_BYTES = 20 * 1024 * 1024  # all images of one call together, decoded
# The HTTP transport's request-body limit by default: a call's images as base64 plus room for its text (200,000
# characters, up to 6 bytes each when JSON-escaped) and the envelope.
HTTP_BODY_BYTES = (MAX_CALL_IMAGE_BYTES + 2) // 3 * 4 + 2 * 1024 * 1024
MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
_PREFIX = "data:"
_BASE64 = ";base64,"


def sniff(data: bytes) -> str | None:
    """The media type the bytes' magic says, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True)
class Image:
    """A checked image, carried as its data URI: the caller's own string when it was given canonically (the same
    object as the argument: no copy of a 5 MiB image's 6.7 MB of base64 is made to carry it), with the hash and size
    of its decoded bytes. The bytes are decoded again only where a backend needs them (`data`); the base64 alone is
    sliced once where a wire sends it without the prefix (`base64`). Build one from bytes with `Image.of`."""

    media_type: str
    uri: str = field(repr=False)  # data:<media_type>;base64,<data>
    size: int = 0  # bytes, decoded
    sha256: str = ""

    @classmethod
    def of(cls, media_type: str, data: bytes) -> "Image":
        return cls(media_type, f"{_PREFIX}{media_type}{_BASE64}{base64.b64encode(data).decode('ascii')}", len(data), hashlib.sha256(data).hexdigest())

    @property
    def data(self) -> bytes:
        """The image's bytes, decoded now (not kept)."""
        return base64.b64decode(self.uri[self.uri.index(",") + 1 :])

    @cached_property
    def base64(self) -> str:
        return self.uri[self.uri.index(",") + 1 :]

    def data_uri(self) -> str:
        return self.uri

    def described(self) -> dict[str, object]:
        """What the logs, the database and the cache key hold of the image."""
        return {"sha256": self.sha256, "media_type": self.media_type, "bytes": self.size}


@lru_cache(maxsize=8)  # a URI is checked, logged and sent: decoded once (a few: the cache keeps their strings alive)
def decode(value: str) -> Image:
    """The image of a data URI, or a ValueError saying what is wrong with it (the caller names the argument)."""
    head = value[:64].lower()
    if head.startswith(("http://", "https://")):
        raise ValueError("is a URL; images are accepted as data: URIs (data:image/png;base64,...), never fetched")
    if not head.startswith(_PREFIX):
        raise ValueError("is not a data: URI (data:image/png;base64,...)")
    comma = value.find(",", 0, 64)
    if comma < 0 or not value[:comma + 1].lower().endswith(_BASE64):
        raise ValueError("is not a base64 data: URI (data:image/png;base64,...)")
    declared = value[len(_PREFIX):comma + 1 - len(_BASE64)].lower()
    if declared not in MEDIA_TYPES:
        raise ValueError(f"declares {declared or 'no type'!r}; accepted: {', '.join(MEDIA_TYPES)}")
    if len(value) - comma - 1 > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise ValueError(f"is larger than {MAX_IMAGE_BYTES:,} bytes decoded")
    try:
        data = base64.b64decode(memoryview(value.encode("ascii"))[comma + 1 :], validate=True)
    except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError: a character base64 never has
        raise ValueError("is not valid base64") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"is {len(data):,} bytes decoded; the limit is {MAX_IMAGE_BYTES:,}")
    actual = sniff(data)
    if actual is None:
        raise ValueError(f"is not an image: its bytes are not {', '.join(t.split('/')[1].upper() for t in MEDIA_TYPES)}")
    if actual != declared:
        raise ValueError(f"declares {declared} but its bytes are {actual}")
    canonical = f"{_PREFIX}{actual}{_BASE64}"
    uri = value if value.startswith(canonical) and comma + 1 == len(canonical) else canonical + value[comma + 1 :]
    return Image(actual, uri, len(data), hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class PathPolicy:
    """Where an image argument may be a file path: over stdio (`stdio`), inside one of `dirs`."""

    stdio: bool = False
    dirs: tuple[Path, ...] = ()


NO_PATHS = PathPolicy()
PATHS_ONLY = "a file path is accepted only over stdio, inside a folder listed in JUDGE_MCP_IMAGE_DIRS"


def is_data_or_url(value: str) -> bool:
    return value[:16].lower().startswith(("data:", "http://", "https://"))


def read_path(value: str, policy: PathPolicy) -> str:
    """The data: URI of the image file at `value`, or a ValueError saying why it is refused (never which files exist
    outside the allowed folders)."""
    if not policy.stdio:
        raise ValueError(f"is not a data: URI (data:image/png;base64,...); {PATHS_ONLY}")
    if not policy.dirs:
        raise ValueError("is a file path, but no folder allows them: set JUDGE_MCP_IMAGE_DIRS (folders separated by "
                         f"{os.pathsep!r}) in the server's environment, or send a data: URI")
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    data = image_files.read_file(value, policy.dirs, MAX_IMAGE_BYTES)  # one open, no link followed (image_files.py)
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"is a file larger than {MAX_IMAGE_BYTES:,} bytes; the limit is {MAX_IMAGE_BYTES:,}")
    actual = sniff(data)
    if actual is None:
        raise ValueError(f"is not an image: its bytes are not {', '.join(t.split('/')[1].upper() for t in MEDIA_TYPES)}")
    return Image.of(actual, data).data_uri()
