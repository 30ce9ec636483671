"""Images a caller brings: checked once, at the arguments, and carried to the wire as bytes with their hash.

An image argument is a `data:image/<type>;base64,<data>` URI (PNG, JPEG, WebP or GIF). It is checked by its magic
bytes, not only its declared type, and by its decoded size. http(s) URLs are refused: the server never fetches on a
client's behalf. Over stdio only, an image may also be a file path inside a folder the operator lists in
JUDGE_MCP_IMAGE_DIRS (`read_path`): resolved (symlinks and `..` included), checked like a data: URI, then carried as
one. What is logged or stored of an image is its SHA-256, media type and size (`Image.described`),
never its bytes; the call cache keys an image by its SHA-256.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

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
    media_type: str
    data: bytes = field(repr=False)

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_uri(self) -> str:
        return f"data:{self.media_type};base64,{self.base64}"

    def described(self) -> dict[str, object]:
        """What the logs, the database and the cache key hold of the image."""
        return {"sha256": self.sha256, "media_type": self.media_type, "bytes": len(self.data)}


@lru_cache(maxsize=8)  # a URI is checked, logged and sent: decoded once (a few, since an image may be 5 MiB)
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
    encoded = value[comma + 1:]
    if len(encoded) > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise ValueError(f"is larger than {MAX_IMAGE_BYTES:,} bytes decoded")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"is {len(data):,} bytes decoded; the limit is {MAX_IMAGE_BYTES:,}")
    actual = sniff(data)
    if actual is None:
        raise ValueError(f"is not an image: its bytes are not {', '.join(t.split('/')[1].upper() for t in MEDIA_TYPES)}")
    if actual != declared:
        raise ValueError(f"declares {declared} but its bytes are {actual}")
    return Image(actual, data)


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
    try:
        resolved = Path(value).expanduser().resolve()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"is not a readable path ({type(exc).__name__})") from None
    if not any(resolved.is_relative_to(folder) for folder in policy.dirs):
        raise ValueError("is outside the folders listed in JUDGE_MCP_IMAGE_DIRS (after resolving symlinks and '..')")
    if not resolved.is_file():  # a folder, a missing file, or a FIFO/device whose read could block
        raise ValueError("is not a regular file inside JUDGE_MCP_IMAGE_DIRS")
    try:
        with open(resolved, "rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"is a file larger than {MAX_IMAGE_BYTES:,} bytes; the limit is {MAX_IMAGE_BYTES:,}")
    actual = sniff(data)
    if actual is None:
        raise ValueError(f"is not an image: its bytes are not {', '.join(t.split('/')[1].upper() for t in MEDIA_TYPES)}")
    return Image(actual, data).data_uri()
