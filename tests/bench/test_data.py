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
