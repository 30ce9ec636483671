"""`judge-mcp bench-convert hh-rlhf`: Anthropic's HH-RLHF human preference data (github.com/anthropics/hh-rlhf, MIT;
Bai et al. 2022) -> pairwise items with a multi-turn `conversation` and one-message trajectories
(judge_mcp/bench/data.py).

The source is one of the repository's `*/test.jsonl.gz` (or the file unzipped): one pair a line, `{"chosen",
"rejected"}`, each a whole transcript ("\\n\\nHuman: ...\\n\\nAssistant: ..."); a crowdworker preferred `chosen`
(harmless-base: the less harmful reply to a red-teaming conversation; helpful-*: the more helpful). The two
transcripts share every turn but the last assistant reply:
- `conversation` = the shared turns (user and assistant, oldest first), `chosen` / `rejected` = the last replies as
  one assistant message each; `turns` = the user turns in the conversation.
- Pairs whose transcripts differ before the last reply, or do not end with an assistant reply, and pairs with an
  empty reply are left out (counted in the manifest's `skipped`).
The transcripts are split on their turn markers in one pass (linear). Bad input stops the conversion naming the file
and the line; nothing is written then.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

from judge_mcp.bench.convert import ConvertError, Converted, _json, _read

PROVENANCE = {
    "kind": "pairwise", "repo": "anthropics/hh-rlhf",
    "license": "MIT (repo LICENSE); the data holds offensive and upsetting red-teaming text (the repo README's warning)",
    "label": "crowdworker preference between two final assistant replies to one multi-turn conversation",
}
TURN = re.compile(r"\n\n(Human|Assistant): ")
ROLES = {"Human": "user", "Assistant": "assistant"}
DIVERGES = "the transcripts differ before the last reply"
NO_REPLY = "a transcript that does not end with an assistant reply"
EMPTY = "an empty reply"


def _lines(source: Path) -> list[str]:
    if source.name.endswith(".gz"):
        try:
            with gzip.open(source.expanduser(), "rt", encoding="utf-8") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            raise ConvertError(f"source {str(source)!r} does not exist") from None
        except (OSError, UnicodeDecodeError, EOFError) as exc:
            raise ConvertError(f"source {str(source)!r} is not a gzip file of text ({type(exc).__name__})") from None
    return _read(source).splitlines()


def turns(transcript: str) -> list[tuple[str, str]] | None:
    """[(role, content)] of a transcript, or None when it does not start with a turn marker."""
    parts = TURN.split(transcript)
    if parts[0] != "":
        return None
    return [(ROLES[parts[k]], parts[k + 1].strip()) for k in range(1, len(parts), 2)]


def _pair(raw: Any, where: str) -> tuple[list[tuple[str, str]], str, str] | str:
    """(shared turns, chosen reply, rejected reply), or why the pair is left out."""
    if not isinstance(raw, dict) or not isinstance(raw.get("chosen"), str) or not isinstance(raw.get("rejected"), str):
        raise ConvertError(f"{where}: expected an object with 'chosen' and 'rejected' transcripts (text)")
    chosen, rejected = turns(raw["chosen"]), turns(raw["rejected"])
    if chosen is None or rejected is None:
        raise ConvertError(f"{where}: a transcript must start with '\\n\\nHuman: '")
    if chosen[:-1] != rejected[:-1] or len(chosen) < 2:
        return DIVERGES
    if chosen[-1][0] != "assistant" or rejected[-1][0] != "assistant":
        return NO_REPLY
    if not chosen[-1][1] or not rejected[-1][1] or any(not text for _, text in chosen[:-1]):
        return EMPTY
    return chosen[:-1], chosen[-1][1], rejected[-1][1]


def hh_rlhf(source: Path, done: Converted) -> list[dict[str, Any]]:
    subset = source.parent.name or "hh-rlhf"
    out = []
    for n, line in enumerate(_lines(source), start=1):
        if not line.strip():
            continue
        where = f"{source.name} line {n}"
        pair = _pair(_json(line, where), where)
        if isinstance(pair, str):
            done.skip(pair)
            continue
        shared, chosen, rejected = pair
        out.append({
            "id": f"hh-{subset}-{n}", "source": f"hh-rlhf/{subset}", "category": subset,
            "conversation": [{"role": role, "content": text} for role, text in shared],
            "chosen": [{"role": "assistant", "content": chosen}], "rejected": [{"role": "assistant", "content": rejected}],
            "turns": sum(1 for role, _ in shared if role == "user"),
        })
    return out
