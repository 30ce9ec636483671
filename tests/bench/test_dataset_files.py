"""`judge-mcp bench` does not trust its files (issue 46, break 4): the dataset must be a regular file within a size
bound (a FIFO, a link to /dev/zero, a folder are refused naming the file, never read), a line nested 100,000 deep is
exit 2 naming the line (no traceback), and an item's image file must lie inside the folders the server allows
(JUDGE_MCP_IMAGE_DIRS, else the dataset's own folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge_mcp.bench.data import DatasetError, load_items
from judge_mcp.bench.item_images import ImageError, data_uri
from judge_mcp.bench.media import pair_media
from testkit.server_process import server_env
from tests.bench.test_images import png, write_jsonl
from tests.helpers import ROOT

PAIR = {"id": "q1", "prompt": "What colour is the square?", "chosen": "Red.", "rejected": "Blue."}


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "items.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match=r"is not a regular file \(a FIFO\)") as caught:
        load_items(fifo)  # the old code blocked here for ever, waiting for a writer
    assert str(fifo) in str(caught.value)


def test_a_link_to_a_device_and_a_folder_are_refused(tmp_path: Path) -> None:
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    with pytest.raises(DatasetError, match=r"is not a regular file \(a device\)"):
        load_items(zero)
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(DatasetError, match="is a folder, not a JSONL file"):
        load_items(tmp_path / "folder.jsonl")


def test_a_file_over_the_size_bound_is_refused_and_the_bound_can_be_raised(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "big.jsonl", [{**PAIR, "id": f"q{n}"} for n in range(50)])
    with pytest.raises(DatasetError, match=r"over the limit of 1,000 bytes \(--max-dataset-mb raises it\)"):
        load_items(path, max_bytes=1000)
    assert len(load_items(path, max_bytes=path.stat().st_size)) == 50


def test_a_line_nested_100000_deep_is_exit_2_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(PAIR) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(DatasetError, match="deep.jsonl line 2: JSON nested too deeply"):
        load_items(path)
    env = server_env("http://127.0.0.1:9/v1", tmp_path / "judge.db")
    done = subprocess.run([sys.executable, "-m", "judge_mcp", "bench", str(path), "--method", "grp", "--db", str(tmp_path / "bench.db")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "deep.jsonl line 2: JSON nested too deeply" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """(the dataset's folder with pics/in.png, another folder with secret.png)."""
    data, other = tmp_path / "data", tmp_path / "elsewhere"
    (data / "pics").mkdir(parents=True)
    other.mkdir()
    (data / "pics" / "in.png").write_bytes(png(1))
    (other / "secret.png").write_bytes(png(2))
    return data, other


def test_an_image_outside_the_datasets_folder_is_refused(folders: tuple[Path, Path]) -> None:
    data, other = folders
    outside = write_jsonl(data / "out.jsonl", [{**PAIR, "images": [str(other / "secret.png")]}])
    with pytest.raises(DatasetError, match=r"out.jsonl line 1: images\[0\]: image file .*secret.png.* is outside the allowed folders") as caught:
        load_items(outside)
    assert str(data) in str(caught.value)  # says where images may be
    climbing = write_jsonl(data / "up.jsonl", [{**PAIR, "images": ["../elsewhere/secret.png"]}])
    with pytest.raises(DatasetError, match="is outside the allowed folders"):
        load_items(climbing)
    (data / "pics" / "link.png").symlink_to(other / "secret.png")  # a link inside the folder to a file outside it
    linked = write_jsonl(data / "linked.jsonl", [{**PAIR, "images": ["pics/link.png"]}])
    with pytest.raises(DatasetError, match="symbolic link"):
        load_items(linked)
    inside = write_jsonl(data / "in.jsonl", [{**PAIR, "images": ["pics/in.png"]}])
    (item,) = load_items(inside)
    assert pair_media(item, "chosen_first")["images"][0].startswith("data:image/png;base64,")


def test_judge_mcp_image_dirs_decides_where_images_may_be_when_set(folders: tuple[Path, Path]) -> None:
    data, other = folders
    path = write_jsonl(data / "out.jsonl", [{**PAIR, "images": [str(other / "secret.png")]}])
    (item,) = load_items(path, image_dirs=(other.resolve(),))
    assert item.images == (str(other / "secret.png"),)
    inside = write_jsonl(data / "in.jsonl", [{**PAIR, "images": ["pics/in.png"]}])
    with pytest.raises(DatasetError, match="is outside the allowed folders"):  # the dataset's folder is not one of them
        load_items(inside, image_dirs=(other.resolve(),))
    # read again when judged, under the same folders: a file swapped for a link since loading is refused then
    (other / "secret.png").unlink()
    (other / "secret.png").symlink_to(data / "pics" / "in.png")
    with pytest.raises(ImageError, match="symbolic link|not a regular file"):
        data_uri(item.images[0], item.image_dirs)
