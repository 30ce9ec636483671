"""The bench's datasets (judge_mcp/bench/data.py): errors that name the file, samples spread over it in order, and
which answer of a pair is the longer."""

from __future__ import annotations

import json

import pytest

from judge_mcp.bench.data import DatasetError, load_items
from tests.bench.datasets import PAIRS


def test_dataset_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "p"}\n')
    with pytest.raises(DatasetError, match="bad.jsonl line 1"):
        load_items(bad)
    items = load_items(PAIRS)
    assert [it.id for it in items if it.degenerate] == ["p0"]
    assert [it.id for it in load_items(PAIRS, limit=2)] == ["p1", "p2"]


def test_sample_spreads_over_the_file_in_order(tmp_path):
    path = tmp_path / "sorted.jsonl"
    rows = [{"id": f"{cat}{i}", "category": cat, "prompt": "p", "chosen": f"good {cat}{i}", "rejected": f"bad {cat}{i}"}
            for cat in "abcd" for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    picked = load_items(path, sample=8)
    assert [it.id for it in picked] == ["a0", "a2", "b0", "b2", "c0", "c2", "d0", "d2"]
    assert [it.category for it in picked] == ["a", "a", "b", "b", "c", "c", "d", "d"]
    assert [it.seq for it in picked] == sorted(it.seq for it in picked)  # file order kept (LWE learns in order)
    assert len(load_items(path, sample=50)) == 20  # more than the file holds: the whole file
    with pytest.raises(DatasetError, match="either a limit"):
        load_items(path, limit=2, sample=2)


def test_the_longer_response_of_a_pair_and_equal_lengths():
    from judge_mcp.bench.data import Item

    pair = dict(seq=0, id="x", category="c", kind="pairwise", prompt="q")
    assert Item(**pair, chosen="a long answer", rejected="short").longer == "chosen"
    assert Item(**pair, chosen="short", rejected="a long answer").longer == "rejected"
    assert Item(**pair, chosen="same!", rejected="other").longer is None  # equal lengths: left out
    assert Item(seq=0, id="y", category="c", kind="listwise", prompt="q", responses=("a", "bb")).longer is None


PAIR = '{"id": "a1", "category": "c", "prompt": "p", "chosen": "x", "rejected": "y"}'


@pytest.mark.parametrize(("content", "message"), [
    # a line that is not UTF-8: named, not a UnicodeDecodeError traceback
    (PAIR.encode() + b"\n\xff\xfe{}\n", r"bad\.jsonl line 2: not UTF-8 text"),
    # a repeated id: the line and the id, and where it first appeared
    ((PAIR + "\n\n" + PAIR + "\n").encode(), r"bad\.jsonl line 3: item id 'a1' repeats the id of line 1"),
    # one kind per file: the first line of the other kind
    ((PAIR + '\n{"id": "b", "prompt": "p", "responses": ["a", "b"], "best": 0}\n').encode(),
     r"bad\.jsonl line 2: a listwise item in a file of pairwise items \(from line 1\)"),
    # null, true/false or an object where a text is due: an error, never the text "None", "True" or a dict's repr
    (b'{"id": "a1", "prompt": null, "chosen": "x", "rejected": "y"}\n', r"line 1: 'prompt' must be text, got null"),
    (b'{"id": "a1", "prompt": "p", "chosen": "x", "rejected": null}\n', r"line 1: 'rejected' must be text, got null"),
    (b'{"id": "a1", "prompt": "p", "chosen": {"text": "x"}, "rejected": "y"}\n', r"line 1: 'chosen' must be text, got an object"),
    (b'{"id": "a1", "prompt": "p", "responses": ["a", true], "best": 0}\n', r"line 1: 'responses\[1\]' must be text, got true/false"),
    (b'{"id": "a1", "prompt": ["p"], "responses": ["a", "b"], "best": 0}\n', r"line 1: 'prompt' must be text, got a list"),
    # a blank prompt, which every method refuses: named at load, not as one error per judgment of the run
    (b'{"id": "a1", "prompt": " \\n", "chosen": "x", "rejected": "y"}\n', r"line 1: 'prompt' is empty"),
    (b'{"id": "a1", "prompt": "", "responses": ["a", "b"], "best": 0}\n', r"line 1: 'prompt' is empty"),
])
def test_bad_lines_are_named(tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        load_items(bad)


def test_numbers_are_read_as_their_text_and_a_folder_is_named(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text('{"id": 7, "prompt": "2+2?", "chosen": 4, "rejected": 4.5}\n')
    (item,) = load_items(path)
    assert (item.id, item.chosen, item.rejected) == ("7", "4", "4.5")
    with pytest.raises(DatasetError, match="is a folder, not a JSONL file"):
        load_items(tmp_path)


def test_a_line_separator_inside_a_string_does_not_split_the_line(tmp_path):
    path = tmp_path / "sep.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "one\u2028two", "chosen": "x\x1cy", "rejected": "z"}, ensure_ascii=False) + "\n", encoding="utf-8")
    (item,) = load_items(path)
    assert item.prompt == "one\u2028two" and item.chosen == "x\x1cy"
