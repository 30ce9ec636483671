"""`judge-mcp bench-convert hh-rlhf`: HH-RLHF's transcript pairs (`{"chosen", "rejected"}`, "\\n\\nHuman: ..." turns,
gzipped as the repository ships them) -> a multi-turn `conversation` and the two last replies as trajectories, with
a manifest; the pairs that cannot be read that way are counted. Synthetic rows in the repository's shape."""

from __future__ import annotations

import gzip
import json
from argparse import Namespace
from pathlib import Path

import pytest

from judge_mcp.bench.convert import ConvertError
from judge_mcp.bench.convert_published import convert
from judge_mcp.bench.data import load_items

SHARED = "\n\nHuman: Can you help me plan a picnic?\n\nAssistant: Sure. Where will it be?\n\nHuman: In the park, for six people."
ROWS = [
    {"chosen": SHARED + "\n\nAssistant: Bring a blanket, sandwiches for six and water.", "rejected": SHARED + "\n\nAssistant: No."},
    {"chosen": "\n\nHuman: Hi\n\nAssistant: Hello! How can I help?", "rejected": "\n\nHuman: Hello\n\nAssistant: Hi."},  # differ early
    {"chosen": "\n\nHuman: Hi\n\nAssistant: Hello!", "rejected": "\n\nHuman: Hi\n\nAssistant: "},  # an empty reply
    {"chosen": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Bye", "rejected": "\n\nHuman: Hi\n\nAssistant: Hey\n\nHuman: Bye"},  # differ early
    {"chosen": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Bye", "rejected": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Ciao"},  # no reply
]


def _source(folder: Path, rows: list, name: str = "test.jsonl.gz") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def _args(source: Path, out: Path) -> Namespace:
    return Namespace(format="hh-rlhf", source=source, out=out, images=None, skip_missing=False, outputs=None, difficulty=None, commit="354e5c3")


def test_shared_turns_become_the_conversation_and_the_last_replies_the_pair(tmp_path):
    out = tmp_path / "hh.jsonl"
    done = convert(_args(_source(tmp_path / "harmless-base", ROWS), out))
    assert done.written == 1
    row = json.loads(out.read_text())
    assert row["id"] == "hh-harmless-base-1" and row["category"] == "harmless-base" and row["turns"] == 2
    assert row["conversation"] == [
        {"role": "user", "content": "Can you help me plan a picnic?"}, {"role": "assistant", "content": "Sure. Where will it be?"},
        {"role": "user", "content": "In the park, for six people."},
    ]
    assert row["chosen"] == [{"role": "assistant", "content": "Bring a blanket, sandwiches for six and water."}]
    assert row["rejected"] == [{"role": "assistant", "content": "No."}]
    manifest = json.loads((tmp_path / "hh.jsonl.manifest.json").read_text())
    assert manifest["repo"] == "anthropics/hh-rlhf" and manifest["license"].startswith("MIT") and manifest["commit"] == "354e5c3"
    assert manifest["skipped"] == {"the transcripts differ before the last reply": 2, "an empty reply": 1,
                                   "a transcript that does not end with an assistant reply": 1}
    item = load_items(out)[0]  # the harness reads it: a three-message conversation, one-message trajectories
    assert [m.role for m in item.prompt] == ["user", "assistant", "user"] and item.longer == "chosen"


def test_plain_jsonl_is_read_too(tmp_path):
    source = tmp_path / "test.jsonl"
    source.write_text(json.dumps(ROWS[0]) + "\n")
    assert convert(_args(source, tmp_path / "hh.jsonl")).written == 1


@pytest.mark.parametrize("row, message", [
    ({"chosen": "Human: Hi\n\nAssistant: Hello", "rejected": "x"}, "test.jsonl.gz line 1: a transcript must start with"),
    ({"chosen": 3, "rejected": "x"}, "test.jsonl.gz line 1: expected an object with 'chosen' and 'rejected'"),
])
def test_bad_lines_are_named_and_nothing_is_written(tmp_path, row, message):
    out = tmp_path / "hh.jsonl"
    with pytest.raises(ConvertError, match=message):
        convert(_args(_source(tmp_path, [row]), out))
    assert not out.exists()


def test_no_convertible_pair_is_an_error(tmp_path):
    with pytest.raises(ConvertError, match="no pair to convert .*2 the transcripts differ"):
        convert(_args(_source(tmp_path, [ROWS[1], ROWS[3]]), tmp_path / "hh.jsonl"))


def test_not_gzip_is_named(tmp_path):
    source = tmp_path / "test.jsonl.gz"
    source.write_text("not gzip")
    with pytest.raises(ConvertError, match="is not a gzip file of text"):
        convert(_args(source, tmp_path / "hh.jsonl"))
