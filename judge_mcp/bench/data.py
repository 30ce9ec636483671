"""Reading benchmark JSONL (shared/benchmarks/README.md): pairwise `{id, category, prompt, chosen, rejected}` and
listwise `{id, category, prompt, responses, best}` items; head-to-head rows (AlpacaEval's: `{id, category, prompt,
output_1, output_2, generator_1, generator_2[, instruction_difficulty]}`, output_1 the reference) have no gold label
and are never degenerate (identical outputs score 1.5 and empty ones are judged, as AlpacaEval counts them). The files store no A/B position; the harness places
`chosen` itself. Items may carry images (judge_mcp/bench/item_images.py): `images` (the prompt's), `chosen_images` and
`rejected_images` (pairwise), `option_images` (listwise, one list per response).

Conversations and trajectories (the contract (docs/tools.md), "Conversations and agent trajectories"): a pairwise item may give
`conversation` (chat messages oldest first, judge_mcp/contract/messages.py's shape) in place of the string `prompt`,
and `chosen` / `rejected` as trajectories (lists of the agent's assistant and tool messages) as well as strings.
They are checked with the tools' own types at load (an error names the line, the field and the message) and reach
the tools unchanged; a response's length is its text's characters (contents, tool names, arguments)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from judge_mcp.bench.item_images import ImageError, allowed_dirs, image_list, option_image_lists
from judge_mcp.contract import messages
from judge_mcp.contract.messages import AnswerLike, Message, PromptLike

Value = str | list[Message]  # a prompt (string or conversation) or a pair's response (string or trajectory)
_PROMPT: TypeAdapter[Value] = TypeAdapter(PromptLike)
_ANSWER: TypeAdapter[Value] = TypeAdapter(AnswerLike)


class DatasetError(ValueError):
    """A benchmark file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Item:
    seq: int  # 0-based position in the file (the order LWE learns in)
    id: str
    category: str
    kind: str  # "pairwise" | "listwise"
    prompt: Value  # a string, or a conversation (from the item's `conversation`)
    chosen: Value | None = None  # a string or a trajectory
    rejected: Value | None = None
    responses: tuple[str, ...] = field(default_factory=tuple)
    best: int | None = None
    degenerate: bool = False
    # images: data URIs or absolute file paths (checked at load, read when judged)
    images: tuple[str, ...] = ()
    chosen_images: tuple[str, ...] = ()
    rejected_images: tuple[str, ...] = ()
    option_images: tuple[tuple[str, ...], ...] = ()  # listwise: one tuple per response (empty: none for any)
    generators: tuple[str, str] | None = None  # the models that wrote output_1 and output_2 (head2head), chosen and rejected (pairwise)
    original_label: int | None = None  # pairwise: 1 or 2, which of the source's output_1 / output_2 is `chosen` (LLMBar's order)
    difficulty: float | None = None  # head2head: AlpacaEval's instruction difficulty of the row, when the file has it
    digest: str = ""  # a hash of the item's line (load_items): a stored judgment of an item whose line changed is stale
    image_dirs: tuple[Path, ...] = ()  # the folders its image files may be read from (item_images.allowed_dirs)

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
    def has_messages(self) -> bool:
        """The prompt is a conversation or a response is a trajectory."""
        return any(isinstance(v, list) for v in (self.prompt, self.chosen, self.rejected))

    @property
    def lengths(self) -> tuple[int, int]:
        """A pair's (chosen, rejected) lengths in characters: a trajectory's text (contents, tool names, arguments)."""
        return messages.chars(self.chosen), messages.chars(self.rejected)

    @property
    def longer(self) -> str | None:
        """For a pair: "chosen" or "rejected", whichever response has more characters; None for equal lengths
        (or a list). The bench's length preference counts verdicts for it."""
        if self.kind != "pairwise" or self.chosen is None or self.rejected is None:
            return None
        chosen, rejected = self.lengths
        if chosen == rejected:
            return None
        return "chosen" if chosen > rejected else "rejected"

    @property
    def options(self) -> list[Value]:
        """The responses to judge: [chosen, rejected] for a pair (gold index 0), else the list."""
        return [self.chosen or "", self.rejected or ""] if self.kind == "pairwise" else list(self.responses)

    @property
    def gold(self) -> int:
        return 0 if self.kind == "pairwise" else int(self.best or 0)


def _is_degenerate(options: list[Value], images: list[tuple[str, ...]] | None = None) -> bool:
    """An empty response (text and images) or two identical ones: no judge can be right or wrong on it. A trajectory
    is never empty (its messages are checked at load)."""
    shown = [(messages.identity(value), pics) for value, pics in zip(options, images or [() for _ in options])]
    return any(kind == "text" and not text.strip() and not pics for (kind, text), pics in shown) or len(set(shown)) < len(shown)


def parse_item(data: dict, seq: int, where: str, base: Path | None = None, image_dirs: tuple[Path, ...] = ()) -> Item:
    """One dataset line; image paths are relative to `base` (the JSONL file's folder; default: the working one) and
    must lie inside `image_dirs` (item_images.allowed_dirs: JUDGE_MCP_IMAGE_DIRS, else `base`)."""
    item = _text_item(data, seq, where)
    if item.kind == "head2head":
        return item
    base = base or Path.cwd()
    dirs = allowed_dirs(image_dirs, base)
    try:
        media = _media(data, item, base, dirs)
    except ImageError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    item = Item(**{**item.__dict__, **media, "image_dirs": dirs})
    degenerate = bool(data.get("degenerate")) or _is_degenerate(item.options, item.options_images)
    return Item(**{**item.__dict__, "degenerate": degenerate})


IMAGE_FIELDS = {"pairwise": ("images", "chosen_images", "rejected_images"), "listwise": ("images", "option_images")}


def _media(data: dict, item: Item, base: Path, dirs: tuple[Path, ...]) -> dict:
    """The item's image fields, checked; a field of the other kind of item is an error, not ignored."""
    stray = [k for k in ("chosen_images", "rejected_images", "option_images") if k in data and k not in IMAGE_FIELDS[item.kind]]
    if stray:
        raise ImageError(f"{', '.join(stray)} do not apply to a {item.kind} item (it takes {', '.join(IMAGE_FIELDS[item.kind])})")
    media: dict = {"images": image_list(data.get("images"), base, "images", dirs)}
    if item.kind == "pairwise":
        media["chosen_images"] = image_list(data.get("chosen_images"), base, "chosen_images", dirs)
        media["rejected_images"] = image_list(data.get("rejected_images"), base, "rejected_images", dirs)
    else:
        media["option_images"] = option_image_lists(data.get("option_images"), base, len(item.responses), dirs)
    return media


def _text_item(data: dict, seq: int, where: str) -> Item:
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    if "conversation" in data:
        return _conversation_item(data, seq, where)
    missing = [k for k in ("id", "prompt") if k not in data]
    if missing:
        raise DatasetError(f"{where}: missing {', '.join(missing)}")
    category = str(data.get("category") or "all")
    if "chosen" in data and "rejected" in data:
        prompt = _prompt(data, where)
        chosen, rejected = (_answer(data, k, where) for k in ("chosen", "rejected"))
        item = Item(seq, str(data["id"]), category, "pairwise", prompt, chosen=chosen, rejected=rejected,
                    generators=_pair_models(data, where), original_label=_original_label(data))
    elif "responses" in data and "best" in data:
        responses = data["responses"]
        best = data["best"]
        if not isinstance(responses, list) or len(responses) < 2:
            raise DatasetError(f"{where}: 'responses' must be a list of at least 2 strings")
        if isinstance(best, bool) or not isinstance(best, int) or not 0 <= best < len(responses):
            raise DatasetError(f"{where}: 'best' must be an index into 'responses', got {best!r}")
        texts = tuple(_text(r, f"responses[{k}]", where) for k, r in enumerate(responses))
        item = Item(seq, str(data["id"]), category, "listwise", _prompt(data, where), responses=texts, best=best)
    elif "output_1" in data and "output_2" in data:
        item = _head2head(data, seq, where, category)
    else:
        raise DatasetError(f"{where}: neither pairwise (chosen, rejected), listwise (responses, best) nor head-to-head (output_1, output_2)")
    return item


def _messages(adapter: TypeAdapter[Value], value: list, field: str, where: str) -> list[Message]:
    """`value` checked as the tools check a conversation or trajectory; an error names the line, field and message."""
    try:
        checked = adapter.validate_python(value, strict=True)
    except ValidationError as exc:
        raise DatasetError(f"{where}: {field!r} {exc.errors()[0]['msg']}") from None
    assert isinstance(checked, list)
    return checked


def _answer(data: dict, field: str, where: str) -> Value:
    """A pair's response: a string as before (a number as its text), a list as a trajectory."""
    value = data[field]
    return _messages(_ANSWER, value, field, where) if isinstance(value, list) else _text(value, field, where)


def _prompt(data: dict, where: str) -> str:
    """A pairwise or listwise item's prompt: text, not blank (every method refuses a blank one, so each of the run's
    judgments of the item would fail on it)."""
    prompt = _text(data["prompt"], "prompt", where)
    if not prompt.strip():
        raise DatasetError(f"{where}: 'prompt' is empty")
    return prompt


def _text(value: object, field: str, where: str) -> str:
    """A prompt or response given as text: a string, or a number as its text; null, true/false or an object is an
    error naming the line and field (it was judged as the text "None", "True" or a Python dict's repr)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    kind = "null" if value is None else "true/false" if isinstance(value, bool) else "a list" if isinstance(value, list) else "an object"
    raise DatasetError(f"{where}: {field!r} must be text, got {kind}")


def _conversation_item(data: dict, seq: int, where: str) -> Item:
    """A pairwise item whose prompt is a conversation: `{id, conversation, chosen, rejected}`."""
    if "prompt" in data:
        raise DatasetError(f"{where}: give either 'prompt' (a string) or 'conversation' (messages), not both")
    missing = [k for k in ("id", "chosen", "rejected") if k not in data]
    if missing:
        raise DatasetError(f"{where}: an item with a 'conversation' is a pair; missing {', '.join(missing)}")
    conversation = data["conversation"]
    if not isinstance(conversation, list):
        raise DatasetError(f"{where}: 'conversation' must be a list of messages, got {type(conversation).__name__}")
    prompt = _messages(_PROMPT, conversation, "conversation", where)
    chosen, rejected = (_answer(data, k, where) for k in ("chosen", "rejected"))
    return Item(seq, str(data["id"]), str(data.get("category") or "all"), "pairwise", prompt, chosen=chosen, rejected=rejected,
                generators=_pair_models(data, where))


def _original_label(data: dict) -> int | None:
    """A pair's `original_label` when it is 1 or 2 (the source's position of `chosen`, as LLMBar's rows give it);
    None otherwise (other sources label in their own words, e.g. JudgeBench's "A>B")."""
    label = data.get("original_label")
    return int(label) if label in (1, 2) and not isinstance(label, bool) else None


def _pair_models(data: dict, where: str) -> tuple[str, str] | None:
    """A pair's `chosen_model` and `rejected_model` (the models that wrote them), when it names them."""
    names = [data.get(k) for k in ("chosen_model", "rejected_model")]
    if names == [None, None]:
        return None
    if not all(isinstance(n, str) and n for n in names):
        raise DatasetError(f"{where}: a pair naming its models gives both 'chosen_model' and 'rejected_model' as text")
    return str(names[0]), str(names[1])


def _head2head(data: dict, seq: int, where: str, category: str) -> Item:
    texts = [data[k] for k in ("prompt", "output_1", "output_2")]
    names = [data.get(k) for k in ("generator_1", "generator_2")]
    if not all(isinstance(t, str) for t in texts):
        raise DatasetError(f"{where}: 'prompt', 'output_1' and 'output_2' must be strings (an output may be empty)")
    if not all(isinstance(n, str) and n for n in names):
        raise DatasetError(f"{where}: a head-to-head row names its models in 'generator_1' and 'generator_2'")
    difficulty = data.get("instruction_difficulty")
    if difficulty is not None and (isinstance(difficulty, bool) or not isinstance(difficulty, (int, float)) or not math.isfinite(difficulty)):
        raise DatasetError(f"{where}: 'instruction_difficulty' must be a finite number, got {difficulty!r}")
    return Item(seq, str(data["id"]), category, "head2head", texts[0], responses=(texts[1], texts[2]), generators=(str(names[0]), str(names[1])),
                difficulty=None if difficulty is None else float(difficulty))


def load_items(
    path: str | Path, limit: int | None = None, sample: int | None = None, *, image_dirs: tuple[Path, ...] = (),
    max_bytes: int | None = None,
) -> list[Item]:
    """The first `limit` items of the file (all when None), in file order; or, with `sample`, that many items spread
    evenly over the whole file (items i*total//sample), so a file sorted by category is covered in proportion. Every
    item must be of one kind. The file must be a regular file of at most `max_bytes` (default MAX_DATASET_BYTES);
    its items' image files must lie inside `image_dirs` (JUDGE_MCP_IMAGE_DIRS), or the file's own folder when none."""
    if limit is not None and sample is not None:
        raise DatasetError("choose either a limit (the first N items) or a sample (N items spread over the file), not both")
    path = Path(path)
    lines = _read_lines(path, MAX_DATASET_BYTES if max_bytes is None else max_bytes)
    items: list[Item] = []
    first_line: dict[str, int] = {}  # item id -> the line it first appeared on
    for number, raw in enumerate(lines, start=1):
        if limit is not None and len(items) >= limit:
            break
        where = f"{path.name} line {number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line); a dataset is UTF-8 JSONL") from None
        if not line.strip():
            continue
        item = _line_item(line, len(items), where, path.parent, image_dirs)
        if items and item.kind != items[0].kind:
            raise DatasetError(f"{where}: a {item.kind} item in a file of {items[0].kind} items (from line {first_line[items[0].id]}); "
                               "one file holds one kind")
        if item.id in first_line:
            raise DatasetError(f"{where}: item id {item.id!r} repeats the id of line {first_line[item.id]}; every item needs its own id")
        first_line[item.id] = number
        items.append(item)
    if not items:
        raise DatasetError(f"dataset {str(path)!r} holds no items")
    if sample is not None and sample < len(items):
        items = [items[i * len(items) // sample] for i in range(sample)]
    return items


def _line_item(line: str, seq: int, where: str, base: Path, image_dirs: tuple[Path, ...]) -> Item:
    """One line's item (its digest set); a line that is not JSON, or nested past what Python can read (a
    RecursionError in the parser or in the checks), is a DatasetError naming the line."""
    try:
        data = json.loads(line)
    except RecursionError:
        raise DatasetError(f"{where}: JSON nested too deeply to read (arrays or objects inside each other past Python's "
                           "recursion limit); a dataset item is a flat object") from None
    except ValueError as exc:
        raise DatasetError(f"{where}: not JSON ({exc})") from None
    try:
        return replace(parse_item(data, seq, where, base, image_dirs), digest=line_digest(data))
    except RecursionError:
        raise DatasetError(f"{where}: a value nested too deeply to check (lists or objects inside each other past "
                           "Python's recursion limit)") from None


def line_digest(data: dict) -> str:
    """A short hash of an item's parsed line (key order and spacing aside): it changes when the prompt, a response,
    the gold label or any other field does."""
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


MAX_DATASET_BYTES = 512 * 1024 * 1024  # a dataset file larger than this is refused (bench --max-dataset-mb overrides)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def _read_lines(path: Path, max_bytes: int) -> list[bytes]:
    """The file's lines as bytes (decoded one by one, so that an error names its line). The file is opened once,
    without blocking (a FIFO opens at once instead of waiting for a writer), and checked on its descriptor before
    anything is read: a regular file (not a FIFO, a device such as /dev/zero behind a link, a folder) of at most
    `max_bytes`. Anything else is a DatasetError naming the file."""
    name = repr(str(path))
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise DatasetError(f"dataset {name} does not exist") from None
    except OSError as exc:
        raise DatasetError(f"dataset {name} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise DatasetError(f"dataset {name} is a folder, not a JSONL file")
        if not stat.S_ISREG(info.st_mode):
            raise DatasetError(f"dataset {name} is not a regular file ({_kind(info.st_mode)}); give a JSONL file")
        if info.st_size > max_bytes:
            raise DatasetError(f"dataset {name} is {info.st_size:,} bytes, over the limit of {max_bytes:,} bytes "
                               f"(--max-dataset-mb raises it)")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:  # grew while it was read
            raise DatasetError(f"dataset {name} grew past the limit of {max_bytes:,} bytes while it was read (--max-dataset-mb raises it)")
        return data.splitlines()
    except OSError as exc:
        raise DatasetError(f"dataset {name} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def dataset_name(path: str | Path) -> str:
    """The key a dataset's results are stored under: the file name without .jsonl."""
    name = Path(path).name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else Path(path).stem
