"""Reading benchmark JSONL (shared/benchmarks/README.md): pairwise `{id, category, prompt, chosen, rejected}` and
listwise `{id, category, prompt, responses, best}` items. The files store no A/B position; the harness places
`chosen` itself. Items may carry images (judge_mcp/bench/item_images.py): `images` (the prompt's), `chosen_images` and
`rejected_images` (pairwise), `option_images` (listwise, one list per response)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from judge_mcp.bench.item_images import ImageError, image_list, option_image_lists


class DatasetError(ValueError):
    """A benchmark file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Item:
    seq: int  # 0-based position in the file (the order LWE learns in)
    id: str
    category: str
    kind: str  # "pairwise" | "listwise"
    prompt: str
    chosen: str | None = None
    rejected: str | None = None
    responses: tuple[str, ...] = field(default_factory=tuple)
    best: int | None = None
    degenerate: bool = False
    # images: data URIs or absolute file paths (checked at load, read when judged)
    images: tuple[str, ...] = ()
    chosen_images: tuple[str, ...] = ()
    rejected_images: tuple[str, ...] = ()
    option_images: tuple[tuple[str, ...], ...] = ()  # listwise: one tuple per response (empty: none for any)

    @property
    def has_images(self) -> bool:
        return bool(self.images or self.chosen_images or self.rejected_images or any(self.option_images))

    @property
    def options_images(self) -> list[tuple[str, ...]]:
        """Each response's images, in the order of `options` (empty tuples when it has none)."""
        if self.kind == "pairwise":
            return [self.chosen_images, self.rejected_images]
        return list(self.option_images) if self.option_images else [() for _ in self.responses]

    @property
    def longer(self) -> str | None:
        """For a pair: "chosen" or "rejected", whichever response has more characters; None for equal lengths
        (or a list). The bench's length preference counts verdicts for it."""
        if self.kind != "pairwise" or self.chosen is None or self.rejected is None or len(self.chosen) == len(self.rejected):
            return None
        return "chosen" if len(self.chosen) > len(self.rejected) else "rejected"

    @property
    def options(self) -> list[str]:
        """The responses to judge: [chosen, rejected] for a pair (gold index 0), else the list."""
        return [self.chosen or "", self.rejected or ""] if self.kind == "pairwise" else list(self.responses)

    @property
    def gold(self) -> int:
        return 0 if self.kind == "pairwise" else int(self.best or 0)


def _is_degenerate(options: list[str], images: list[tuple[str, ...]] | None = None) -> bool:
    """An empty response (text and images) or two identical ones: no judge can be right or wrong on it."""
    shown = list(zip(options, images or [() for _ in options]))
    return any(not text.strip() and not pics for text, pics in shown) or len(set(shown)) < len(shown)


def parse_item(data: dict, seq: int, where: str, base: Path | None = None) -> Item:
    """One dataset line; image paths are relative to `base` (the JSONL file's folder; default: the working one)."""
    item = _text_item(data, seq, where)
    try:
        media = _media(data, item, base or Path.cwd())
    except ImageError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    item = Item(**{**item.__dict__, **media})
    degenerate = bool(data.get("degenerate")) or _is_degenerate(item.options, item.options_images)
    return Item(**{**item.__dict__, "degenerate": degenerate})


IMAGE_FIELDS = {"pairwise": ("images", "chosen_images", "rejected_images"), "listwise": ("images", "option_images")}


def _media(data: dict, item: Item, base: Path) -> dict:
    """The item's image fields, checked; a field of the other kind of item is an error, not ignored."""
    stray = [k for k in ("chosen_images", "rejected_images", "option_images") if k in data and k not in IMAGE_FIELDS[item.kind]]
    if stray:
        raise ImageError(f"{', '.join(stray)} do not apply to a {item.kind} item (it takes {', '.join(IMAGE_FIELDS[item.kind])})")
    media: dict = {"images": image_list(data.get("images"), base, "images")}
    if item.kind == "pairwise":
        media["chosen_images"] = image_list(data.get("chosen_images"), base, "chosen_images")
        media["rejected_images"] = image_list(data.get("rejected_images"), base, "rejected_images")
    else:
        media["option_images"] = option_image_lists(data.get("option_images"), base, len(item.responses))
    return media


def _text_item(data: dict, seq: int, where: str) -> Item:
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    missing = [k for k in ("id", "prompt") if k not in data]
    if missing:
        raise DatasetError(f"{where}: missing {', '.join(missing)}")
    category = str(data.get("category") or "all")
    if "chosen" in data and "rejected" in data:
        item = Item(seq, str(data["id"]), category, "pairwise", str(data["prompt"]), chosen=str(data["chosen"]), rejected=str(data["rejected"]))
    elif "responses" in data and "best" in data:
        responses = data["responses"]
        best = data["best"]
        if not isinstance(responses, list) or len(responses) < 2:
            raise DatasetError(f"{where}: 'responses' must be a list of at least 2 strings")
        if isinstance(best, bool) or not isinstance(best, int) or not 0 <= best < len(responses):
            raise DatasetError(f"{where}: 'best' must be an index into 'responses', got {best!r}")
        item = Item(seq, str(data["id"]), category, "listwise", str(data["prompt"]), responses=tuple(str(r) for r in responses), best=best)
    else:
        raise DatasetError(f"{where}: neither pairwise (chosen, rejected) nor listwise (responses, best)")
    return item


def load_items(path: str | Path, limit: int | None = None, sample: int | None = None) -> list[Item]:
    """The first `limit` items of the file (all when None), in file order; or, with `sample`, that many items spread
    evenly over the whole file (items i*total//sample), so a file sorted by category is covered in proportion. Every
    item must be of one kind."""
    if limit is not None and sample is not None:
        raise DatasetError("choose either a limit (the first N items) or a sample (N items spread over the file), not both")
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"dataset {str(path)!r} does not exist") from None
    items: list[Item] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if limit is not None and len(items) >= limit:
            break
        where = f"{path.name} line {number}"
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{where}: not JSON ({exc})") from None
        items.append(parse_item(data, len(items), where, path.parent))
    if not items:
        raise DatasetError(f"dataset {str(path)!r} holds no items")
    kinds = {it.kind for it in items}
    if len(kinds) > 1:
        raise DatasetError(f"dataset {str(path)!r} mixes pairwise and listwise items")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise DatasetError(f"dataset {str(path)!r} repeats item ids")
    if sample is not None and sample < len(items):
        items = [items[i * len(items) // sample] for i in range(sample)]
    return items


def dataset_name(path: str | Path) -> str:
    """The key a dataset's results are stored under: the file name without .jsonl."""
    name = Path(path).name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else Path(path).stem
