"""Bench datasets with images: loading (paths relative to the JSONL, data URIs, checked by their bytes), the image
arguments each placement passes to the tools, the converters from VL-RewardBench's and Multimodal RewardBench's
public layouts, and image runs end to end over a scripted judge (real HTTP on 127.0.0.1). Every image here is made
by the test."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from judge_mcp.bench.convert import ConvertError, convert
from judge_mcp.bench.data import DatasetError, load_items
from judge_mcp.bench.media import options_media, pair_media
from judge_mcp.bench.runner import BenchError
from testkit.scripted_judges import schema_name
from judge_mcp.cli.main import main
from tests.bench.datasets import bench


def png(seed: int = 0) -> bytes:
    """A valid 1x1 PNG whose one pixel depends on `seed`."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    pixel = bytes([0, seed % 256, (seed * 7) % 256, (seed * 13) % 256])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(pixel)) + chunk(b"IEND", b"")


def uri(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def image_set(tmp_path: Path) -> Path:
    """pics/a.png, pics/b.png, pics/c.png beside a pairwise JSONL naming them relatively, plus a data URI."""
    (tmp_path / "pics").mkdir()
    for n, name in enumerate("abc"):
        (tmp_path / "pics" / f"{name}.png").write_bytes(png(n))
    return write_jsonl(tmp_path / "mm.jsonl", [
        {"id": "q1", "prompt": "What colour is the square?", "chosen": "Red.", "rejected": "Blue.", "images": ["pics/a.png"]},
        {"id": "q2", "prompt": "Which UI is cleaner?", "chosen": "ui", "rejected": "ui", "images": [uri(png(9))],
         "chosen_images": ["pics/b.png"], "rejected_images": ["pics/c.png"]},
    ])


def test_images_load_relative_to_the_file_and_travel_with_their_answer(image_set):
    q1, q2 = load_items(image_set)
    assert q1.images == (str((image_set.parent / "pics" / "a.png").resolve()),) and q1.has_images
    assert not q2.degenerate  # the same text, told apart by its images
    first = pair_media(q2, "chosen_first")
    second = pair_media(q2, "chosen_second")
    chosen_uri, rejected_uri = uri(png(1)), uri(png(2))
    assert first == {"images": [uri(png(9))], "response_a_images": [chosen_uri], "response_b_images": [rejected_uri]}
    assert second == {"images": [uri(png(9))], "response_a_images": [rejected_uri], "response_b_images": [chosen_uri]}
    assert pair_media(q1, "chosen_second") == {"images": [uri(png(0))]}
    assert options_media(q2) == {"images": [uri(png(9))], "option_images": [[chosen_uri], [rejected_uri]]}


def test_text_items_pass_no_image_arguments(tmp_path):
    (item,) = load_items(write_jsonl(tmp_path / "t.jsonl", [{"id": "t", "prompt": "p", "chosen": "a", "rejected": "b"}]))
    assert not item.has_images and pair_media(item, "chosen_first") == {} and options_media(item) == {}


def test_listwise_option_images(tmp_path):
    (tmp_path / "x.png").write_bytes(png(3))
    path = write_jsonl(tmp_path / "l.jsonl", [{"id": "l", "prompt": "p", "responses": ["a", "b", "c"], "best": 1,
                                                 "option_images": [["x.png"], [], ["x.png"]]}])
    (item,) = load_items(path)
    assert options_media(item)["option_images"] == [[uri(png(3))], [], [uri(png(3))]]


@pytest.mark.parametrize("images,expected", [
    (["pics/none.png"], r"line 1: images\[0\]: image file 'pics/none.png' does not exist"),
    (["notes.png"], "is not a PNG, JPEG, WebP or GIF image"),
    (["https://example.com/a.png"], "an image URL"),
    ([uri(png(0), "image/jpeg")], "declared image/jpeg whose bytes are image/png"),
    ([uri(b"hello world, not an image")], "whose bytes are not an image"),
    (["data:text/plain;base64,aGk="], "a data URI of type 'text/plain'"),
    ("pics/a.png", "'images' must be a list"),
    ([7], "an image must be a data URI or a file path"),
])
def test_bad_images_name_the_line_and_the_problem(tmp_path, images, expected):
    (tmp_path / "notes.png").write_text("just text", encoding="utf-8")
    path = write_jsonl(tmp_path / "bad.jsonl", [{"id": "x", "prompt": "p", "chosen": "a", "rejected": "b", "images": images}])
    with pytest.raises(DatasetError, match=expected):
        load_items(path)


def test_image_fields_of_the_other_kind_are_errors(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"id": "x", "prompt": "p", "responses": ["a", "b"], "best": 0, "chosen_images": []}])
    with pytest.raises(DatasetError, match="chosen_images do not apply to a listwise item"):
        load_items(path)
    path = write_jsonl(tmp_path / "bad.jsonl", [{"id": "x", "prompt": "p", "responses": ["a", "b"], "best": 0, "option_images": [[]]}])
    with pytest.raises(DatasetError, match="'option_images' must be a list of 2 lists"):
        load_items(path)


# ---- converters ------------------------------------------------------------------------------------------------------
def vl_source(root: Path) -> Path:
    """VL-RewardBench's repository layout: data/data.jsonl with image_path relative to data/."""
    (root / "data" / "images" / "rlaif-v").mkdir(parents=True)
    for n in range(3):
        (root / "data" / "images" / "rlaif-v" / f"R-{n}.jpg").write_bytes(png(n))  # a PNG named .jpg: typed by its bytes
    rows = [
        {"id": "R-0", "image_path": "images/rlaif-v/R-0.jpg", "query": "Count the dogs.", "response": ["Two dogs.", "Three dogs."],
         "human_ranking": [1, 0], "query_source": "RLAIF-V", "models": ["m1", "m2"], "meta": {}},
        {"id": "R-1", "image_path": "images/rlaif-v/R-1.jpg", "query": "Describe it.", "response": ["A cat.", "A car."],
         "human_ranking": [0, 1], "query_source": "RLAIF-V"},
        {"id": "R-2", "image_path": "images/rlaif-v/R-2.jpg", "query": "Tie?", "response": ["x", "y"], "human_ranking": [0, 0]},
    ]
    return write_jsonl(root / "data" / "data.jsonl", rows)


def mm_source(root: Path) -> Path:
    """Multimodal RewardBench's layout: data/all_data.json (a JSON list) with Image relative to data/."""
    (root / "data" / "images" / "mathvista").mkdir(parents=True)
    (root / "data" / "images" / "mathvista" / "1.png").write_bytes(png(5))
    rows = [
        {"ID": "math-1", "Text": "What is x?", "Image": "images/mathvista/1.png", "Output1": "x=2", "Output2": "x=3", "Better": "Output2", "Category": "reasoning"},
        {"ID": "pairs-7", "Text": "Who is the doctor?", "Image": "images/mathvista/1.png", "Output1": "Cannot tell.", "Output2": "The man.",
         "Better": "Output1", "Category": "safety"},
        {"ID": "vqa-3", "Text": "Colour?", "Image": "images/mathvista/1.png", "Output1": "red", "Output2": "blue", "Better": "Tie", "Category": "vqa"},
    ]
    path = root / "data" / "all_data.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def test_vl_rewardbench_converter(tmp_path, capsys):
    source = vl_source(tmp_path / "VL_RewardBench")
    out = tmp_path / "sets" / "vl_rewardbench.jsonl"
    assert main(["bench-convert", "vl-rewardbench", str(source), "--images", str(source.parent), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote 2 items" in printed and "1 no strict preference" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["chosen"] == "Three dogs." and rows[0]["rejected"] == "Two dogs."  # ranking [1, 0]: the second is preferred
    assert rows[1]["chosen"] == "A cat." and rows[0]["category"] == "RLAIF-V"
    assert rows[0]["images"] == ["../VL_RewardBench/data/images/rlaif-v/R-0.jpg"]  # relative to the written file
    with pytest.raises(DatasetError, match="is outside the allowed folders"):  # beside the set, not below it
        load_items(out)
    items = load_items(out, image_dirs=(source.parent.resolve(),))  # JUDGE_MCP_IMAGE_DIRS names the images' folder
    assert pair_media(items[0], "chosen_first") == {"images": [uri(png(0))]}


def test_multimodal_rewardbench_converter(tmp_path):
    source = mm_source(tmp_path / "mmrb")
    out = tmp_path / "mm.jsonl"
    done = convert("multimodal-rewardbench", source, None, out)  # images default to the source's folder
    assert done.written == 2 and done.skipped == {"no strict preference": 1}
    items = load_items(out)
    assert [(i.id, i.category, i.chosen) for i in items] == [("math-1", "reasoning/math", "x=3"), ("pairs-7", "safety/bias", "Cannot tell.")]
    assert all(i.images and Path(i.images[0]).is_file() for i in items)


def test_a_missing_image_stops_the_conversion_unless_skipped(tmp_path, capsys):
    source = vl_source(tmp_path / "vl")
    (source.parent / "images" / "rlaif-v" / "R-1.jpg").unlink()
    out = tmp_path / "vl.jsonl"
    assert main(["bench-convert", "vl-rewardbench", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "id 'R-1'" in err and "does not exist" in err and not out.exists()
    done = convert("vl-rewardbench", source, None, out, skip_missing=True)
    assert done.written == 1 and done.skipped == {"no strict preference": 1, "image missing or not an image": 1}
    with pytest.raises(ConvertError, match="image folder"):
        convert("vl-rewardbench", source, tmp_path / "nowhere", out)


# ---- runs ----------------------------------------------------------------------------------------------------------------
async def test_text_only_methods_refuse_image_data(scripted, image_set, tmp_path):
    with pytest.raises(BenchError, match="method 'flip' judges text only, but mm carries images"):
        await bench(scripted, lambda p: "x", image_set, "flip", tmp_path)


JUDGING_SCHEMAS = ("pairwise_verdict", "lwe_vanilla_verdict", "lwe_case_verdict", "grade_selection")


def image_parts(payload: dict) -> list[str]:
    return [part["image_url"]["url"] for m in payload.get("messages", []) if isinstance(m.get("content"), list)
            for part in m["content"] if isinstance(part, dict) and part.get("type") == "image_url"]


def text_only(payload: dict) -> dict:
    """The payload with each message's content as its first text part, the prompt (what a text judge reads; the
    image groups' captions follow it)."""
    def text(content):
        if not isinstance(content, list):
            return content
        return next((part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"), "")

    return {**payload, "messages": [{**m, "content": text(m.get("content"))} for m in payload.get("messages", [])]}


@pytest.mark.parametrize("method", ["grp", "lwe", "selective-lwe", "grade"])
async def test_image_runs_send_the_images_and_report_the_lwe_papers_metrics(scripted, tmp_path, method):
    from tests.bench.datasets import TokenJudge

    (tmp_path / "shot.png").write_bytes(png(4))
    rows = [
        {"id": "a1", "prompt": "What colour is the square?", "chosen": "GOOD-a1 Red.", "rejected": "BAD-a1 Blue.", "images": ["shot.png"]},
        {"id": "a2", "prompt": "Which UI is cleaner?", "chosen": "GOOD-a2 left", "rejected": "BAD-a2 right", "images": [uri(png(9))],
         "chosen_images": [uri(png(1))], "rejected_images": [uri(png(2))]},
    ]
    dataset = write_jsonl(tmp_path / "mmtiny.jsonl", rows)
    judge = TokenJudge({"a1": rows[0]["prompt"], "a2": rows[1]["prompt"]})
    summary, server = await bench(scripted, lambda p: judge(text_only(p)), dataset, method, tmp_path)
    o = summary["overall"]
    assert (o["n"], o["parse_failures"], o["pair_accuracy"], o["consistency"]) == (2, 0, 1.0, 1.0)
    if method != "grade":
        assert o["single_order_accuracy"] == 1.0
    assert o["chars_per_item"] > 0
    if method == "selective-lwe":  # its vanilla pair is the unit (plain lwe has none: compare with a vanilla run)
        assert summary["lwe"]["relative_cost"] > 0
    # every call that judges an item carries its images (LWE's meta-prompt refinement stays text)
    judging = [p for p in server.requests if schema_name(p) in JUDGING_SCHEMAS]
    a1 = [p for p in judging if "GOOD-a1" in json.dumps(p)]
    a2 = [p for p in judging if "GOOD-a2" in json.dumps(p)]
    assert a1 and all(uri(png(4)) in image_parts(p) for p in a1)
    assert a2 and all({uri(png(9)), uri(png(1)), uri(png(2))} <= set(image_parts(p)) for p in a2)
