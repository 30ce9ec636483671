"""Image arguments: each accepted format, every bad input named, the limits in the schema, and the method side (an
answer's images move with it, the cache keys an image by its hash, nothing of an image in the logs)."""

from __future__ import annotations

import base64
import logging

import pytest

from judge_mcp.contract import images
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import ComparePairArgs, GradeScoreOptionsArgs, LweJudgeArgs
from judge_mcp.backends.base import user
from testkit.scripted_servers import Reply
from judge_mcp.methods import pairwise
from tests.image_data import ScreenshotJudge, gif, image_groups, jpeg, png, uri, webp

PAIR = {"prompt": "Which UI is clearer?", "response_a": "UI A", "response_b": "UI B"}


@pytest.mark.parametrize(("data", "media_type"), [(png(1), "image/png"), (jpeg(1), "image/jpeg"), (gif(1), "image/gif"), (webp(1), "image/webp")])
def test_each_format_is_accepted_by_its_magic_bytes(data: bytes, media_type: str) -> None:
    image = images.decode(uri(data, media_type))
    assert image.media_type == media_type and image.data == data
    assert image.described() == {"sha256": image.sha256, "media_type": media_type, "bytes": len(data)}


def _refusal(**extra) -> str:
    with pytest.raises(InputError) as refused:
        ComparePairArgs.parse({**PAIR, **extra})
    return str(refused.value)


def test_every_bad_image_is_refused_naming_it() -> None:
    good = uri(png(1))
    assert "'images[1]' is a URL" in _refusal(images=[good, "https://example.com/a.png"])
    assert "'images[0]' is a URL" in _refusal(images=["http://example.com/a.png"])
    assert "'response_a_images[0]' is not an image" in _refusal(response_a_images=[uri(b"%PDF-1.4 not an image")])
    assert "'response_b_images[0]' declares image/png but its bytes are image/gif" in _refusal(response_b_images=[uri(gif(1))])
    assert "'images[0]' declares 'image/svg+xml'" in _refusal(images=["data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode()])
    assert "'images[0]' is not valid base64" in _refusal(images=["data:image/png;base64,@@not base64@@"])
    assert "'images[0]' is not a data: URI" in _refusal(images=["/home/me/screenshot.png"])
    assert "'images[0]' is not a base64 data: URI" in _refusal(images=["data:image/png,rawbytes"])
    too_big = uri(png(1, size=images.MAX_IMAGE_BYTES + 1))
    assert f"'images[0]' is larger than {images.MAX_IMAGE_BYTES:,} bytes decoded" in _refusal(images=[too_big])
    assert f"'images' must hold 0 to {images.MAX_IMAGES} items, got {images.MAX_IMAGES + 1}" in _refusal(images=[good] * (images.MAX_IMAGES + 1))
    full = [good] * images.MAX_IMAGES
    assert f"the limit for one call is {images.MAX_CALL_IMAGES}" in _refusal(images=full, response_a_images=full, response_b_images=[good])
    with pytest.raises(InputError, match="'option_images' must hold one list per option: 3, got 2"):
        GradeScoreOptionsArgs.parse({"instruction": "q", "options": ["a", "b", "c"], "option_images": [[good], []]})
    with pytest.raises(InputError, match=r"'option_images\[1\]\[0\]' is a URL"):
        GradeScoreOptionsArgs.parse({"instruction": "q", "options": ["a", "b"], "option_images": [[good], ["https://x/y.png"]]})


def test_the_input_schemas_state_the_image_limits() -> None:
    for model, names in ((ComparePairArgs, ("images", "response_a_images", "response_b_images")), (LweJudgeArgs, ("images", "response_a_images", "response_b_images")),
                         (GradeScoreOptionsArgs, ("images",))):
        props = model.input_schema()["properties"]
        for name in names:
            array = props[name]["anyOf"][0]
            assert array["maxItems"] == images.MAX_IMAGES and array["items"]["maxLength"] == images.MAX_IMAGE_CHARS
            assert "data:image/" in props[name]["description"] or name == "response_b_images"
    assert GradeScoreOptionsArgs.input_schema()["properties"]["option_images"]["anyOf"][0]["maxItems"] == 10


def test_logged_arguments_and_cache_keys_hold_hashes_not_bytes() -> None:
    shot = png(5, size=2048)
    args = ComparePairArgs.parse({**PAIR, "response_a_images": [uri(shot)]})
    assert args.logged()["response_a_images"] == [images.decode(uri(shot)).described()]
    request = user("text", images=(("caption", (images.decode(uri(shot)),)),))
    assert base64.b64encode(shot).decode()[:40] not in str(request.to_record()) + str(request.summary())
    other = user("text", images=(("caption", (images.decode(uri(png(6, size=2048))),)),))
    assert request.cache_key("b") != other.cache_key("b") and request.cache_key("b") == user("text", images=request.messages[0].images).cache_key("b")
    assert user("text").cache_key("b") == user("text", images=()).cache_key("b")  # no images: the key it always had


async def test_each_answers_images_move_with_it_in_both_orders(make_judge) -> None:
    ui_a, ui_b = png(1, size=512), png(2, size=512)
    judge, server = make_judge(ScreenshotJudge(ui_a))
    result = await pairwise.compare_pair(judge, **PAIR, response_a_images=[uri(ui_a)], response_b_images=[uri(ui_b)])
    assert result.winner == "A" and result.consistent
    seen = sorted(tuple(next(v for k, v in image_groups(p).items() if "part of Assistant A" in k)) for p in server.requests)
    assert seen == sorted([(ui_a,), (ui_b,)])
    again = await pairwise.compare_pair(judge, **PAIR, response_a_images=[uri(ui_a)], response_b_images=[uri(ui_b)])
    assert again.usage.cached_calls == 2 and len(server.requests) == 2


async def test_nothing_of_an_image_reaches_the_logs(make_judge, caplog: pytest.LogCaptureFixture) -> None:
    shot = png(7, size=4096)
    judge, _ = make_judge(lambda p: Reply(status=500, content="boom"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as failed:
        await pairwise.compare_pair(judge, **PAIR, images=[uri(shot)])
    assert "500" in str(failed.value)  # the failure is reported ...
    assert base64.b64encode(shot).decode()[20:80] not in caplog.text + str(failed.value)  # ... without the image


async def test_identical_calls_with_images_share_their_backend_calls_and_survive_a_cancelled_one(scripted, store) -> None:
    from judge_mcp.calls.cache import CallCache
    from judge_mcp.calls.context import CallContext
    from tests.helpers import Hold, http_backend, survivor_of_twin

    ui_a, ui_b = png(21, size=2048), png(22, size=2048)
    hold = Hold(ScreenshotJudge(ui_b), count=2)  # both orders of the first call stay in flight until released
    server = scripted(hold)
    backend, cache = http_backend(server, max_retries=0), CallCache(store)
    args = dict(**PAIR, response_a_images=[uri(ui_a)], response_b_images=[uri(ui_b)])
    result = await survivor_of_twin(lambda: pairwise.compare_pair(CallContext(backend, cache, store), **args), hold, store)
    assert result.winner == "B" and result.consistent
    assert len(server.requests) == 2  # each order sent once, shared by the identical call
    await backend.aclose()
