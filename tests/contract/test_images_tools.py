"""Images through the official MCP client over every transport, on both wire formats: two UI screenshots reach the
model as OpenAI `image_url` parts or Anthropic base64 `image` blocks, each answer's screenshot moves with it when the
order is swapped, and the database holds their hashes, never their bytes."""

from __future__ import annotations

import base64
import hashlib

import pytest

from testkit.scripted_judges import CAPITAL_Q, UniversalJudge
from tests.image_data import ScreenshotJudge, gif, image_groups, jpeg, png, uri, webp

ANTHROPIC = {"JUDGE_MCP_MODEL": "claude-scripted", "JUDGE_MCP_API_KEY": "sk-ant-test", "JUDGE_MCP_MAX_RETRIES": "1"}
UI_A, UI_B = png(1, size=4096), png(2, size=4096)  # the screenshot of UI B is the one the scripted judge prefers
SCREENSHOTS = {"prompt": "Which login page is clearer?", "response_a": "Login page A (screenshot attached).",
               "response_b": "Login page B (screenshot attached).", "response_a_images": [uri(UI_A)], "response_b_images": [uri(UI_B)]}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_two_screenshots_reach_the_model_and_move_with_their_answers(connect, kind: str) -> None:
    env = ANTHROPIC if kind == "anthropic" else {}
    question = jpeg(9)
    async with connect(ScreenshotJudge(UI_B), kind, **env) as judged:
        result = await judged.client.call_tool("compare_pair", {**SCREENSHOTS, "images": [uri(question, "image/jpeg")]})
    assert not result.is_error, result.content
    assert result.structured_content["winner"] == "B" and result.structured_content["consistent"] is True
    ab, ba = judged.backend.requests  # the orders run concurrently: tell them apart by what is shown first
    if UI_A in next(v for k, v in image_groups(ab).items() if "part of Assistant A" in k):
        ab, ba = ab, ba
    else:
        ab, ba = ba, ab
    groups_ab, groups_ba = image_groups(ab), image_groups(ba)
    assert list(groups_ab)[0].startswith("<|User Prompt|>") and groups_ab[list(groups_ab)[0]] == []  # the text first, then the images
    assert "Login page A" in list(groups_ab)[0].split("Assistant A's Answer|>")[1]  # order AB shows answer A first, its screenshot too
    captions = list(groups_ab)[1:]
    assert [groups_ab[c] for c in captions] == [[question], [UI_A], [UI_B]]
    assert [groups_ba[c] for c in captions] == [[question], [UI_B], [UI_A]]  # the answers' screenshots swapped with them
    if kind == "openai":
        part = next(p for p in ab["messages"][-1]["content"] if p["type"] == "image_url")
        assert part["image_url"]["url"].startswith("data:image/")
    else:
        block = next(p for p in ab["messages"][-1]["content"] if p["type"] == "image")
        assert block["source"]["media_type"] in ("image/png", "image/jpeg")


async def test_the_database_keeps_image_hashes_never_image_bytes(connect) -> None:
    async with connect(ScreenshotJudge(UI_B)) as judged:
        first = await judged.client.call_tool("compare_pair", SCREENSHOTS)
        again = await judged.client.call_tool("compare_pair", SCREENSHOTS)
        other = await judged.client.call_tool("compare_pair", {**SCREENSHOTS, "response_a_images": [uri(png(3, size=4096))]})
        grade = await judged.client.call_tool(
            "grade_score_options",
            {"instruction": CAPITAL_Q, "options": ["a", "b", "c"], "option_images": [[uri(gif(1), "image/gif")], [], [uri(webp(1), "image/webp")]]},
        )
    assert not any(r.is_error for r in (first, again, other, grade)), [r.content for r in (first, again, other, grade)]
    assert again.structured_content["usage"]["cached_calls"] == 2  # the same images: a cache hit
    assert other.structured_content["usage"]["cached_calls"] == 0  # another image: a miss
    assert len(judged.backend.requests) == 2 + 2 + 3
    row = next(r for r in judged.verdicts("compare_pair"))
    assert row["inputs"]["response_b_images"] == [{"sha256": hashlib.sha256(UI_B).hexdigest(), "media_type": "image/png", "bytes": len(UI_B)}]
    raw = b"".join(p.read_bytes() for p in judged.db.parent.glob(judged.db.name + "*"))
    for image in (UI_A, UI_B, gif(1), webp(1)):
        assert image[8:40] not in raw and base64.b64encode(image)[8:60] not in raw
        assert hashlib.sha256(image).hexdigest().encode() in raw or image in (gif(1), webp(1))


async def test_bad_images_are_refused_naming_the_image(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        url = await judged.client.call_tool("compare_pair", {**SCREENSHOTS, "response_b_images": [uri(UI_B), "https://example.com/b.png"]})
        fake = await judged.client.call_tool("compare_pair", {**SCREENSHOTS, "images": [uri(b"not an image at all")]})
        flip = await judged.client.call_tool("infer_instruction_reward", {"instruction": "i", "responses": ["r"], "images": [uri(UI_A)]})
    assert url.is_error and "'response_b_images[1]' is a URL" in url.content[0].text
    assert fake.is_error and "'images[0]' is not an image" in fake.content[0].text
    assert flip.is_error and "unknown argument 'images'" in flip.content[0].text
    assert judged.backend.requests == []


async def test_lwe_passes_the_case_images_to_every_call_about_the_case(connect) -> None:
    from testkit.scripted_judges import LweScript, role_of

    script = LweScript("first")  # position-biased: the vanilla orders disagree: the meta-prompt path writes and judges the case
    async with connect(script) as judged:
        result = await judged.client.call_tool("lwe_judge", {**SCREENSHOTS, "images": [uri(jpeg(4), "image/jpeg")], "session": "ui", "batch_size": 1})
    assert not result.is_error, result.content
    assert result.structured_content["path"] == "meta_prompt"
    roles = [role_of(r) for r in judged.backend.requests]
    about_case = [r for r, role in zip(judged.backend.requests, roles) if role not in ("refine", "condense")]
    assert sorted(role_of(r) for r in about_case) == ["build", "feedback", "judge", "vanilla", "vanilla"]
    for request in about_case:
        groups = image_groups(request)
        assert [jpeg(4)] in groups.values() and [UI_A] in groups.values() and [UI_B] in groups.values()
    assert "refine" in roles
    for request, role in zip(judged.backend.requests, roles):
        if role == "refine":  # the meta-prompt stays text
            assert all(isinstance(m["content"], str) for m in request["messages"])


async def test_images_past_mcps_default_body_limit_are_accepted_and_the_limit_is_configurable(connect) -> None:
    big_a, big_b = png(11, size=3 * 2**20), png(12, size=3 * 2**20)  # ~8 MB of JSON: past the MCP SDK's 4 MiB default
    args = {**SCREENSHOTS, "response_a_images": [uri(big_a)], "response_b_images": [uri(big_b)]}
    async with connect(ScreenshotJudge(big_b)) as judged:
        result = await judged.client.call_tool("compare_pair", args)
    assert not result.is_error, result.content
    assert result.structured_content["winner"] == "B"
    if judged.transport == "http":
        fits = []
        with pytest.raises(Exception, match="error"):  # past the configured limit the server answers 413 unread
            async with connect(ScreenshotJudge(UI_B), JUDGE_MCP_HTTP_MAX_BODY_BYTES=str(2**20)) as small:
                fits.append(await small.client.call_tool("compare_pair", SCREENSHOTS))  # under it: judged
                await small.client.call_tool("compare_pair", args)
        assert len(fits) == 1 and not fits[0].is_error and len(small.backend.requests) == 2
