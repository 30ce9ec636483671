"""Reading benchmark JSONL (shared/benchmarks/README.md): pairwise `{id, category, prompt, chosen, rejected}` and
listwise `{id, category, prompt, responses, best}` items. The files store no A/B position; the harness places
`chosen` itself."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


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


def _is_degenerate(options: list[str]) -> bool:
    return any(not o.strip() for o in options) or len(set(options)) < len(options)


def parse_item(data: dict, seq: int, where: str) -> Item:
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
    degenerate = bool(data.get("degenerate")) or _is_degenerate(item.options)
    return Item(**{**item.__dict__, "degenerate": degenerate})


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
        items.append(parse_item(data, len(items), where))
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
