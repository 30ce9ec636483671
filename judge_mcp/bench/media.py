"""An item's images as tool arguments (the names of the contract (docs/tools.md)): `images` for the prompt's; `response_a_images` /
`response_b_images` for a placed pair (they travel with their answer: chosen's go where chosen is shown);
`option_images` for grade_score_options, one list per option in the order of `Item.options`. A text item gives no
image arguments at all, so its tool calls are exactly what they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge_mcp.bench.data import Item
from judge_mcp.bench.item_images import data_uri

# the bench methods whose tools take images (FLIP is reference-free and text-only by design; the pointwise and
# Arena-Hard baselines are text-only prompts of their papers)
IMAGE_METHODS = ("vanilla", "grp", "grp-better", "lwe", "selective-lwe", "grade")


def _uris(refs: tuple[str, ...], dirs: tuple[Path, ...]) -> list[str]:
    return [data_uri(ref, dirs) for ref in refs]


def pair_media(item: Item, placement: str) -> dict[str, Any]:
    """compare_pair / lwe_judge image arguments for a placement ("chosen_first" | "chosen_second"); {} for text."""
    if not item.has_images:
        return {}
    first, second = (item.chosen_images, item.rejected_images) if placement == "chosen_first" else (item.rejected_images, item.chosen_images)
    media: dict[str, Any] = {}
    if item.images:
        media["images"] = _uris(item.images, item.image_dirs)
    if first:
        media["response_a_images"] = _uris(first, item.image_dirs)
    if second:
        media["response_b_images"] = _uris(second, item.image_dirs)
    return media


def options_media(item: Item) -> dict[str, Any]:
    """grade_score_options image arguments for the item's options; {} for text."""
    if not item.has_images:
        return {}
    media: dict[str, Any] = {}
    if item.images:
        media["images"] = _uris(item.images, item.image_dirs)
    if any(item.options_images):
        media["option_images"] = [_uris(refs, item.image_dirs) for refs in item.options_images]
    return media


def images_problem(method: str, items: list[Item], dataset: str) -> str | None:
    """Why `method` cannot judge `dataset`'s images (None when it can, or the items carry none)."""
    if not any(it.has_images for it in items):
        return None
    if method not in IMAGE_METHODS:
        return f"method {method!r} judges text only, but {dataset} carries images (methods for image data: {', '.join(IMAGE_METHODS)})"
    return None
