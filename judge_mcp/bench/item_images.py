"""Images in benchmark items: a dataset line names each image as a `data:image/...;base64,` URI or as a file path
relative to the JSONL file (an absolute path also works). A file must lie inside the folders the server allows
image files in (JUDGE_MCP_IMAGE_DIRS) or, when that is not set, inside the dataset's own folder (`allowed_dirs`): a
dataset someone else wrote cannot make the bench upload any image the user can read. It is read as the server reads
an image argument's file (contract/image_files.py: a regular file, no symbolic link followed below the folder, never
blocking, at most 5 MiB). Loading checks every image (the file exists and its
first bytes are a PNG, JPEG, WebP or GIF; a data URI's declared type is one of those and its bytes agree) so a bad
dataset fails at once naming the line; the bytes are read and encoded only when an item is judged.

The fields follow the tools' arguments (the contract (docs/tools.md)): `images` (the prompt's), per answer `chosen_images` /
`rejected_images` (pairwise items; they become `response_a_images` / `response_b_images` as the pair is placed) or
`option_images` (listwise items: one list per response, as grade_score_options takes them).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

from judge_mcp.contract import image_files
from judge_mcp.contract.images import MAX_IMAGE_BYTES, sniff

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


def allowed_dirs(image_dirs: tuple[Path, ...], base: Path) -> tuple[Path, ...]:
    """The folders a dataset's image files may be in: JUDGE_MCP_IMAGE_DIRS (resolved by the settings) when set,
    else the dataset's own folder, resolved."""
    return tuple(image_dirs) if image_dirs else (base.resolve(),)


def _read(path: Path, ref: str, dirs: tuple[Path, ...]) -> bytes:
    """The file's bytes as the server reads an image argument's file (contract/image_files.read_file) inside `dirs`;
    ImageError naming the file and the allowed folders else."""
    try:
        return image_files.read_file(str(path), dirs, MAX_IMAGE_BYTES)
    except ValueError as exc:
        why = str(exc).replace("the folders listed in JUDGE_MCP_IMAGE_DIRS", "the allowed folders").replace(
            "inside JUDGE_MCP_IMAGE_DIRS", "inside the allowed folders")
        allowed = ", ".join(repr(str(d)) for d in dirs)
        raise ImageError(f"image file {ref!r} (looked at {str(path)!r}) {why}; allowed: {allowed} "
                         "(JUDGE_MCP_IMAGE_DIRS when set, else the dataset's own folder)") from None


def check_path(ref: str, base: Path, dirs: tuple[Path, ...] | None = None) -> str:
    """The absolute path of the image file `ref` (relative to `base`), checked to be a PNG/JPEG/WebP/GIF file; with
    `dirs`, read as the server reads an image file (inside one of `dirs`, a regular file, no link followed below it)."""
    path = Path(ref).expanduser()
    path = path if path.is_absolute() else base / path
    if dirs is not None:
        absolute = os.path.normpath(os.path.abspath(path))
        if not os.path.lexists(absolute):  # the bench's own user asks: say so plainly (the server does not)
            raise ImageError(f"image file {ref!r} does not exist (looked at {absolute!r})")
        if sniff(_read(Path(absolute), ref, dirs)[:16]) is None:
            raise ImageError(f"image file {ref!r} is not a PNG, JPEG, WebP or GIF image (by its first bytes)")
        return absolute
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


def check_image(ref: Any, base: Path, dirs: tuple[Path, ...] | None = None) -> str:
    """One image reference from a dataset: a data URI (kept as is) or a file path (made absolute); ImageError else."""
    if not isinstance(ref, str) or not ref.strip():
        raise ImageError(f"an image must be a data URI or a file path, got {ref!r}"[:200])
    if ref.startswith(("http://", "https://")):
        raise ImageError("an image URL; give a data URI or a file path (nothing is fetched)")
    if ref[:5].lower() == "data:":
        return check_data_uri(ref)
    return check_path(ref, base, dirs)


def image_list(value: Any, base: Path, field: str, dirs: tuple[Path, ...] | None = None) -> tuple[str, ...]:
    """A dataset field holding a list of image references (absent or null: none)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ImageError(f"{field!r} must be a list of images (data URIs or file paths)")
    out = []
    for index, ref in enumerate(value):
        try:
            out.append(check_image(ref, base, dirs))
        except ImageError as exc:
            raise ImageError(f"{field}[{index}]: {exc}") from None
    return tuple(out)


def option_image_lists(value: Any, base: Path, n_options: int, dirs: tuple[Path, ...] | None = None) -> tuple[tuple[str, ...], ...]:
    """`option_images`: one list of images per response (absent or null: none for any)."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) != n_options:
        raise ImageError(f"'option_images' must be a list of {n_options} lists, one per response")
    return tuple(image_list(images, base, f"option_images[{index}]", dirs) for index, images in enumerate(value))


def data_uri(ref: str, dirs: tuple[Path, ...]) -> str:
    """An item's image as a data URI: a data URI as it is, a file read (inside `dirs`, as when it was loaded) and
    encoded now (type by its bytes)."""
    if ref[:5].lower() == "data:":
        return ref
    data = _read(Path(ref), ref, dirs)
    media_type = sniff(data[:16])
    if media_type is None:  # changed since the dataset was loaded
        raise ImageError(f"image file {ref!r} is no longer a PNG, JPEG, WebP or GIF image")
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
