"""Image arguments as local file paths: over stdio only, inside a folder of JUDGE_MCP_IMAGE_DIRS (`..` taken as
written; no symbolic link followed below the folder: test_image_file_races.py), checked by magic bytes and size as a data: URI is, then carried as one; refused over HTTP and
in memory with an error naming the image and the setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judge_mcp.contract import images as imagelib
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import ComparePairArgs
from judge_mcp.config.settings import ConfigError, load_settings
from tests.image_data import ScreenshotJudge, image_groups, png, uri

UI_A, UI_B = png(1, size=2048), png(2, size=2048)
PAIR = {"prompt": "Which login page is clearer?", "response_a": "Page A.", "response_b": "Page B."}


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """(an allowed folder holding b.png, a folder outside it holding secret.png)."""
    allowed, outside = (tmp_path / "allowed").resolve(), (tmp_path / "outside").resolve()
    allowed.mkdir(), outside.mkdir()
    (allowed / "b.png").write_bytes(UI_B)
    (outside / "secret.png").write_bytes(UI_A)
    return allowed, outside


async def test_a_file_in_an_allowed_folder_reaches_the_model_over_stdio_only(connect, folders) -> None:
    allowed, outside = folders
    async with connect(ScreenshotJudge(UI_B), JUDGE_MCP_IMAGE_DIRS=str(allowed)) as judged:
        result = await judged.client.call_tool(
            "compare_pair", {**PAIR, "response_a_images": [uri(UI_A)], "response_b_images": [str(allowed / "b.png")]})
        escaped = await judged.client.call_tool("compare_pair", {**PAIR, "images": [str(allowed / ".." / "outside" / "secret.png")]})
    assert escaped.is_error and "'images[0]'" in escaped.content[0].text
    if judged.transport != "stdio":
        assert result.is_error, result.structured_content
        text = result.content[0].text
        assert "'response_b_images[0]'" in text and "only over stdio" in text and "JUDGE_MCP_IMAGE_DIRS" in text
        assert judged.backend.requests == []
        return
    assert not result.is_error, result.content
    assert result.structured_content["winner"] == "B"  # the scripted judge saw the file's bytes as answer B's image
    shown = [image_groups(request) for request in judged.backend.requests]
    assert all(any(UI_B in images for images in groups.values()) for groups in shown)
    part = next(p for p in judged.backend.requests[0]["messages"][-1]["content"] if p["type"] == "image_url")
    assert part["image_url"]["url"].startswith("data:image/png;base64,")
    assert "outside the folders" in escaped.content[0].text
    assert str(allowed).encode() not in judged.db.read_bytes() and UI_B not in judged.db.read_bytes()
    logged = judged.verdicts("compare_pair")[0]
    assert imagelib.Image.of("image/png", UI_B).sha256 in str(logged)


def _refusal(value: str, policy: imagelib.PathPolicy, name: str = "images") -> str:
    with pytest.raises(InputError) as caught:
        ComparePairArgs.parse({**PAIR, name: [value]}, policy)
    return str(caught.value)


def test_paths_out_of_the_folders_are_refused(folders) -> None:
    allowed, outside = folders
    stdio = imagelib.PathPolicy(stdio=True, dirs=(allowed,))
    (allowed / "link.png").symlink_to(outside / "secret.png")
    (allowed / "sub").mkdir()
    for value in (str(outside / "secret.png"), str(allowed / "sub" / ".." / ".." / "outside" / "secret.png"), str(allowed / "link.png")):
        message = _refusal(value, stdio)
        assert message.startswith("'images[0]' is outside the folders listed in JUDGE_MCP_IMAGE_DIRS"), message
    assert ComparePairArgs.parse({**PAIR, "images": [str(allowed / "sub" / ".." / "b.png")]}, stdio).images == [uri(UI_B)]


def test_files_are_checked_as_data_uris_are(folders) -> None:
    allowed, _ = folders
    stdio = imagelib.PathPolicy(stdio=True, dirs=(allowed,))
    (allowed / "notes.png").write_bytes(b"just text, named .png")
    (allowed / "huge.png").write_bytes(png(3, size=imagelib.MAX_IMAGE_BYTES + 100))
    assert _refusal(str(allowed / "notes.png"), stdio, "response_b_images").startswith("'response_b_images[0]' is not an image")
    assert "larger than 5,242,880 bytes" in _refusal(str(allowed / "huge.png"), stdio)
    os.mkfifo(allowed / "pipe.png")  # opening it to read would wait for a writer
    for value in (allowed / "missing.png", allowed, allowed / "pipe.png"):
        assert "is not a regular file" in _refusal(str(value), stdio), value


def test_without_stdio_or_folders_the_error_says_what_to_do(folders) -> None:
    allowed, _ = folders
    path = str(allowed / "b.png")
    assert "only over stdio, inside a folder listed in JUDGE_MCP_IMAGE_DIRS" in _refusal(path, imagelib.PathPolicy(dirs=(allowed,)))
    assert "only over stdio" in _refusal(path, imagelib.NO_PATHS)  # the default: the bench, scripts, in memory
    assert "set JUDGE_MCP_IMAGE_DIRS" in _refusal(path, imagelib.PathPolicy(stdio=True))
    assert "is a URL" in _refusal("https://example.com/a.png", imagelib.PathPolicy(stdio=True, dirs=(allowed,)))


def test_the_setting_lists_existing_folders(folders, tmp_path: Path) -> None:
    allowed, outside = folders
    env = {"JUDGE_MCP_DB": str(tmp_path / "j.db")}
    assert load_settings(env).image_dirs == ()
    both = load_settings({**env, "JUDGE_MCP_IMAGE_DIRS": f"{allowed}{os.pathsep}{outside}{os.pathsep}"}).image_dirs
    assert both == (allowed, outside)
    with pytest.raises(ConfigError, match="JUDGE_MCP_IMAGE_DIRS lists .*not a folder"):
        load_settings({**env, "JUDGE_MCP_IMAGE_DIRS": str(allowed / "b.png")})


def test_the_input_schema_names_the_path_form() -> None:
    prop = ComparePairArgs.input_schema()["properties"]["images"]
    assert "JUDGE_MCP_IMAGE_DIRS" in str(prop) and "stdio" in str(prop)
