"""Converters from the public layouts of the LWE paper's two benchmarks to the bench's pairwise JSONL, with each
item's image as a path relative to the written file (the images stay where they were downloaded).

- VL-RewardBench (github.com/vl-rewardbench/VL_RewardBench, `data/data.jsonl`): one JSON object a line with `id`,
  `query`, `response` (two answers), `human_ranking` (rank per answer, 0 the preferred: [0, 1] means the first is
  better), `image_path` (relative to the images' parent folder, `data/` in that repository), `query_source`.
- Multimodal RewardBench (github.com/facebookresearch/multimodal_rewardbench, `data/all_data.json`, written by its
  download script): one JSON list of objects with `ID`, `Text`, `Image` (relative to the image folder, `data/`),
  `Output1`, `Output2`, `Better` ("Output1" | "Output2"), `Category`. As that repository's accuracy script does,
  safety splits into safety/bias (PAIRS items) and safety/toxicity, reasoning into reasoning/math and
  reasoning/coding, by the item's ID.

Items without a strict preference are left out and counted; a missing image file stops the conversion naming the
item (a partial download would otherwise bias the scores), unless `skip_missing` leaves such items out, counted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_mcp.bench.item_images import ImageError, check_path

FORMATS = ("vl-rewardbench", "multimodal-rewardbench")


class ConvertError(ValueError):
    """A source that cannot be converted; the message names the file and the item."""


@dataclass
class Converted:
    written: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def _vl_records(source: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) per line of a VL-RewardBench JSONL file."""
    for number, line in enumerate(_read(source).splitlines(), start=1):
        if line.strip():
            yield f"{source.name} line {number}", _json(line, f"{source.name} line {number}")


def _vl_item(raw: dict[str, Any], where: str) -> dict[str, Any] | str:
    """A VL-RewardBench object as a bench item (image path as given), or why it is left out."""
    responses, ranking = raw.get("response"), raw.get("human_ranking")
    if not isinstance(responses, list) or len(responses) != 2 or not isinstance(ranking, list) or len(ranking) != 2:
        raise ConvertError(f"{where}: expected 'response' and 'human_ranking' lists of two")
    if ranking[0] == ranking[1]:
        return "no strict preference"
    chosen = 0 if ranking[0] < ranking[1] else 1
    image = raw.get("image_path")
    if not isinstance(image, str) or not image:
        raise ConvertError(f"{where}: no 'image_path'")
    return {
        "id": str(raw.get("id") or where),
        "category": str(raw.get("query_source") or "all"),
        "prompt": str(raw.get("query") or ""),
        "chosen": str(responses[chosen]),
        "rejected": str(responses[1 - chosen]),
        "images": [image],
    }


def _mm_records(source: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) per element of a Multimodal RewardBench JSON list (a JSONL file works too)."""
    text = _read(source)
    try:
        data = json.loads(text)
    except ValueError:
        yield from _vl_records(source)  # one object a line
        return
    if not isinstance(data, list):
        raise ConvertError(f"{source.name}: expected a JSON list of items")
    for index, raw in enumerate(data):
        yield f"{source.name} item {index}", raw


def mm_category(raw: dict[str, Any]) -> str:
    category = str(raw.get("Category") or "all").strip().lower()
    item_id = str(raw.get("ID") or "").lower()
    if category == "safety":
        return "safety/bias" if item_id.startswith("pairs") else "safety/toxicity"
    if category == "reasoning":
        return "reasoning/math" if item_id.startswith("math") else "reasoning/coding"
    return category


def _mm_item(raw: dict[str, Any], where: str) -> dict[str, Any] | str:
    better = raw.get("Better")
    if better not in ("Output1", "Output2"):
        return "no strict preference"
    image = raw.get("Image")
    if not isinstance(image, str) or not image:
        raise ConvertError(f"{where}: no 'Image'")
    chosen, rejected = ("Output1", "Output2") if better == "Output1" else ("Output2", "Output1")
    return {
        "id": str(raw.get("ID") or where),
        "category": mm_category(raw),
        "prompt": str(raw.get("Text") or ""),
        "chosen": str(raw.get(chosen) or ""),
        "rejected": str(raw.get(rejected) or ""),
        "images": [image],
    }


READERS = {"vl-rewardbench": (_vl_records, _vl_item), "multimodal-rewardbench": (_mm_records, _mm_item)}


def convert(fmt: str, source: Path, images: Path | None, out: Path, *, skip_missing: bool = False) -> Converted:
    """Write `source` (in format `fmt`) to `out` as bench JSONL; image paths are resolved in `images` (default: the
    source file's folder) and written relative to `out`'s folder. Nothing is written when the source has an error."""
    if fmt not in READERS:
        raise ConvertError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    records, to_item = READERS[fmt]
    image_root = (images or source.parent).expanduser()
    if not image_root.is_dir():
        raise ConvertError(f"image folder {str(image_root)!r} does not exist")
    out_dir = out.expanduser().resolve().parent
    result, lines, seen = Converted(), [], set()
    for where, raw in records(source):
        if not isinstance(raw, dict):
            raise ConvertError(f"{where}: expected a JSON object")
        item = to_item(raw, where)
        if isinstance(item, str):
            result.skip(item)
            continue
        if item["id"] in seen:
            raise ConvertError(f"{where}: id {item['id']!r} repeats")
        seen.add(item["id"])
        try:
            absolute = check_path(item["images"][0], image_root)
        except ImageError as exc:
            if skip_missing:
                result.skip("image missing or not an image")
                continue
            raise ConvertError(f"{where} (id {item['id']!r}): {exc}; is --images the folder the paths are relative to?") from None
        item["images"] = [Path(os.path.relpath(absolute, out_dir)).as_posix()]
        lines.append(json.dumps(item, ensure_ascii=False))
    if not lines:
        raise ConvertError(f"{source.name}: no item to write (left out: {result.skipped or 'none'})")
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(out.name + ".part")
    temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    temporary.replace(out)  # a finished file or none
    result.written = len(lines)
    return result


def _read(source: Path) -> str:
    try:
        return source.expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConvertError(f"source {str(source)!r} does not exist") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConvertError(f"source {str(source)!r} cannot be read as text ({type(exc).__name__})") from None


def _json(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise ConvertError(f"{where}: not JSON ({exc})") from None
