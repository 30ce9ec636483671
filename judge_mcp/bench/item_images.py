"""Images in benchmark items: a dataset line names each image as a `data:image/...;base64,` URI or as a file path
relative to the JSONL file (an absolute path also works). Loading checks every image (the file exists and its
first bytes are a PNG, JPEG, WebP or GIF; a data URI's declared type is one of those and its bytes agree) so a bad
dataset fails at once naming the line; the bytes are read and encoded only when an item is judged.

The fields follow the tools' arguments (the contract (docs/tools.md)): `images` (the prompt's), per answer `chosen_images` /
`rejected_images` (pairwise items; they become `response_a_images` / `response_b_images` as the pair is placed) or
`option_images` (listwise items: one list per response, as grade_score_options takes them).
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

from judge_mcp.contract.images import sniff

MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")


class ImageError(ValueError):
    """An image reference that cannot be used; the message says which and why."""


def _data_uri_parts(ref: str) -> tuple[str, str]:
    """(declared media type, base64 payload) of a data URI; ImageError when it is not a base64 image data URI."""
    header, comma, payload = ref.partition(",")
    declared = header[len("data:") :].lower()
    if not comma or not declared.endswith(";base64"):
        raise ImageError("a data URI must read data:image/<type>;base64,<data>")
    declared = declared[: -len(";base64")]
    if declared not in MEDIA_TYPES:
        raise ImageError(f"a data URI of type {declared!r}; images are {', '.join(MEDIA_TYPES)}")
    return declared, payload


def check_data_uri(ref: str) -> str:
    """`ref` unchanged when it is a base64 image data URI whose bytes are the type it declares; else ImageError."""
    declared, payload = _data_uri_parts(ref)
    try:
        head = base64.b64decode(payload[:32], validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("a data URI whose data is not base64") from None
    found = sniff(head)
    if found is None:
        raise ImageError(f"a data URI declared {declared} whose bytes are not an image")
    if found != declared:
        raise ImageError(f"a data URI declared {declared} whose bytes are {found}")
    return ref


def check_path(ref: str, base: Path) -> str:
    """The absolute path of the image file `ref` (relative to `base`), checked to be a PNG/JPEG/WebP/GIF file."""
    path = Path(ref).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except FileNotFoundError:
        raise ImageError(f"image file {ref!r} does not exist (looked at {str(path)!r})") from None
    except (IsADirectoryError, PermissionError, OSError) as exc:
        raise ImageError(f"image file {ref!r} cannot be read ({type(exc).__name__})") from None
    if sniff(head) is None:
        raise ImageError(f"image file {ref!r} is not a PNG, JPEG, WebP or GIF image (by its first bytes)")
    return str(path.resolve())


def check_image(ref: Any, base: Path) -> str:
    """One image reference from a dataset: a data URI (kept as is) or a file path (made absolute); ImageError else."""
    if not isinstance(ref, str) or not ref.strip():
        raise ImageError(f"an image must be a data URI or a file path, got {ref!r}"[:200])
    if ref.startswith(("http://", "https://")):
        raise ImageError("an image URL; give a data URI or a file path (nothing is fetched)")
    if ref[:5].lower() == "data:":
        return check_data_uri(ref)
    return check_path(ref, base)


def image_list(value: Any, base: Path, field: str) -> tuple[str, ...]:
    """A dataset field holding a list of image references (absent or null: none)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ImageError(f"{field!r} must be a list of images (data URIs or file paths)")
    out = []
    for index, ref in enumerate(value):
        try:
            out.append(check_image(ref, base))
        except ImageError as exc:
            raise ImageError(f"{field}[{index}]: {exc}") from None
    return tuple(out)


def option_image_lists(value: Any, base: Path, n_options: int) -> tuple[tuple[str, ...], ...]:
    """`option_images`: one list of images per response (absent or null: none for any)."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) != n_options:
        raise ImageError(f"'option_images' must be a list of {n_options} lists, one per response")
    return tuple(image_list(images, base, f"option_images[{index}]") for index, images in enumerate(value))


def data_uri(ref: str) -> str:
    """An item's image as a data URI: a data URI as it is, a file read and encoded now (type by its bytes)."""
    if ref[:5].lower() == "data:":
        return ref
    data = Path(ref).read_bytes()
    media_type = sniff(data[:16])
    if media_type is None:  # changed since the dataset was loaded
        raise ImageError(f"image file {ref!r} is no longer a PNG, JPEG, WebP or GIF image")
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
