"""`judge-mcp bench-convert mt-bench-human`: MT-Bench's human judgments (Zheng et al. 2023, Hugging Face dataset
lmsys/mt_bench_human_judgments, split "human": 3,355 votes of experts and authors, CC BY 4.0) -> pairwise items with
a `conversation` and trajectories (judge_mcp/bench/data.py).

The source is the split as a JSON list or as JSONL, one vote a row: `question_id`, `model_a`, `model_b`, `winner`
("model_a" | "model_b" | "tie"), `judge`, `conversation_a` / `conversation_b` (the two models' conversations, user
and assistant turns alternating), `turn` (1 or 2: which answer was judged).

- One item per (question, pair of models) judged on turn 1: `conversation` the user's first turn, `chosen` and
  `rejected` one assistant message each; the label is the votes' majority (a model needs more votes than the other
  model and than "tie"); the votes are kept (`votes`), with the two models (`chosen_model`, `rejected_model`).
- Turn-2 votes are left out (counted): the second answer follows each model's own first answer, so the two runs share
  no conversation that both could answer as a trajectory (which holds no user turn).
- Ties and votes without a majority, and pairs with an empty answer, are left out (counted).
- Category: MT-Bench's, by question id (81-90 writing, 91-100 roleplay, ... 151-160 humanities).
Bad input stops the conversion naming the file and the row; nothing is written then.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from judge_mcp.bench import convert_hh_rlhf
from judge_mcp.bench.convert import ConvertError, Converted, _json, _read

PROVENANCE = {
    "kind": "pairwise", "repo": "lmsys/mt_bench_human_judgments (Hugging Face dataset, split human)",
    "license": "CC BY 4.0 per the HF dataset card lmsys/mt_bench_human_judgments",
    "label": "expert and author pairwise votes on turn 1 of MT-Bench, majority per (question, model pair); ties dropped",
}
CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")  # 10 questions each from 81
TURN2 = "turn 2 (each model's second answer follows its own first)"
NO_MAJORITY = "tie or no majority"
EMPTY = "an empty answer"


def rows(source: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of a JSON list or JSONL file."""
    text = _read(source)
    if text.lstrip().startswith("["):
        data = _json(text, source.name)
        return [(f"{source.name} row {k}", r) for k, r in enumerate(data)]
    return [(f"{source.name} line {n}", _json(line, f"{source.name} line {n}")) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _turns(row: dict[str, Any], key: str, where: str) -> list[str]:
    """A conversation's contents, checked to alternate user and assistant from a user turn."""
    conv = row.get(key)
    if not isinstance(conv, list) or len(conv) < 2:
        raise ConvertError(f"{where}: {key!r} must be a list of at least 2 messages")
    out = []
    for k, m in enumerate(conv):
        role = "user" if k % 2 == 0 else "assistant"
        if not isinstance(m, dict) or m.get("role") != role or not isinstance(m.get("content"), str):
            raise ConvertError(f"{where}: {key}[{k}] must be a {role} message with text 'content'")
        out.append(m["content"])
    return out


def _vote(row: Any, where: str) -> tuple[tuple[int, str, str], str, list[str], list[str]] | None:
    """((question, model, model) sorted, winning model or "tie", the first model's turns, the second's); None for turn 2."""
    if not isinstance(row, dict):
        raise ConvertError(f"{where}: expected a JSON object")
    missing = [k for k in ("question_id", "model_a", "model_b", "winner", "turn") if k not in row]
    if missing:
        raise ConvertError(f"{where}: missing {', '.join(missing)}")
    if row["turn"] not in (1, 2):
        raise ConvertError(f"{where}: 'turn' must be 1 or 2, got {row['turn']!r}")
    if row["winner"] not in ("model_a", "model_b", "tie"):
        raise ConvertError(f"{where}: 'winner' must be model_a, model_b or tie, got {row['winner']!r}")
    qid, a, b = row["question_id"], row["model_a"], row["model_b"]
    if isinstance(qid, bool) or not isinstance(qid, int) or not isinstance(a, str) or not isinstance(b, str) or not a or not b or a == b:
        raise ConvertError(f"{where}: 'question_id' must be a number and 'model_a', 'model_b' two different model names")
    if row["turn"] == 2:
        return None
    turns_a, turns_b = _turns(row, "conversation_a", where), _turns(row, "conversation_b", where)
    if turns_a[0] != turns_b[0]:
        raise ConvertError(f"{where}: the two conversations start with different user turns")
    winner = row[row["winner"]] if row["winner"] != "tie" else "tie"
    first, second = sorted((a, b))
    texts = (turns_a, turns_b) if first == a else (turns_b, turns_a)
    return (qid, first, second), winner, texts[0], texts[1]


def category(qid: int) -> str:
    k = (qid - 81) // 10
    return CATEGORIES[k] if 0 <= k < len(CATEGORIES) else "all"


def mt_bench_human(source: Path, done: Converted) -> list[dict[str, Any]]:
    votes: dict[tuple[int, str, str], Counter[str]] = {}
    texts: dict[tuple[int, str, str], tuple[list[str], list[str]]] = {}
    for where, row in rows(source):
        vote = _vote(row, where)
        if vote is None:
            done.skip(TURN2)
            continue
        key, winner, turns_first, turns_second = vote
        votes.setdefault(key, Counter())[winner] += 1
        texts.setdefault(key, (turns_first, turns_second))
    out = []
    for key, counts in votes.items():
        qid, first, second = key
        (top, n), *rest = counts.most_common()
        if top == "tie" or any(m == n for _, m in rest):
            done.skip(NO_MAJORITY)
            continue
        loser = second if top == first else first
        answers = dict(zip((first, second), (texts[key][0][1], texts[key][1][1])))
        if not answers[top].strip() or not answers[loser].strip():
            done.skip(EMPTY)
            continue
        out.append({
            "id": f"mt-bench-q{qid}-{first}-vs-{second}", "source": "mt_bench_human/turn1", "category": category(qid),
            "conversation": [{"role": "user", "content": texts[key][0][0]}],
            "chosen": [{"role": "assistant", "content": answers[top]}], "rejected": [{"role": "assistant", "content": answers[loser]}],
            "chosen_model": top, "rejected_model": loser, "votes": dict(sorted(counts.items())), "question_id": qid,
        })
    return out


def write(fmt: str, source: Path, out: Path, commit: str | None, done: Converted, manifest: Any) -> None:
    """Convert (mt-bench-human here, hh-rlhf in convert_hh_rlhf.py) and write OUT and OUT.manifest.json (through
    `manifest`, convert_published.manifest, plus the pairs left out)."""
    items = mt_bench_human(source, done) if fmt == "mt-bench-human" else convert_hh_rlhf.hh_rlhf(source, done)
    if not items:
        raise ConvertError(f"{source.name}: no pair to convert ({', '.join(f'{n} {why}' for why, n in done.skipped.items()) or 'empty'})")
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items)
    info = {**manifest(fmt, out, items, [source], commit, text), "skipped": dict(done.skipped)}
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, body in ((out, text), (out.with_name(out.name + ".manifest.json"), json.dumps(info, indent=1) + "\n")):
        part = path.with_name(path.name + ".part")
        part.write_text(body, encoding="utf-8")
        part.replace(path)
    done.written = len(items)
