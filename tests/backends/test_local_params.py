"""What the embedded backend tells llama.cpp, checked with a stand-in for xllamacpp that records its CommonParams:
concurrent requests share one batch (slots, continuous batching) whose steps use every core, and a request's answer
budget is the method's own, as a model server over HTTP gets it."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from judge_mcp.contract.fields import PAIR_MAX_TOKENS
from judge_mcp.backends import build_backend, local, user
from judge_mcp.backends.local import LocalBackend
from judge_mcp.calls.cache import CallCache
from judge_mcp.calls.context import CallContext
from judge_mcp.config.settings import load_settings
from judge_mcp.methods import pairwise
from judge_mcp.storage.sqlite import SqliteEngine
from tests.backends.test_local_backend import FakeServer, clean_registry, fake_gguf  # noqa: F401 (a fixture)
from tests.helpers import app_env, start_scripted

SOP_ANSWER = json.dumps({"own_answer": "2 + 2 = 4.", "evaluation": "B says 5, which is wrong.", "verdict": "[[B>A]]"})


def stand_in(monkeypatch: pytest.MonkeyPatch, server: Any) -> list[Any]:
    """Install a stand-in xllamacpp whose Server is `server`; returns the CommonParams each load was given."""
    given: list[Any] = []
    fake = types.ModuleType("xllamacpp")
    fake.CommonParams = lambda: SimpleNamespace(model=SimpleNamespace(), cpuparams=SimpleNamespace(), cpuparams_batch=SimpleNamespace(),
                                                sampling=SimpleNamespace())
    fake.Server = lambda params: given.append(params) or server
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    return given


def answer(content: str) -> Any:
    return lambda payload: {
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20},
    }


@pytest.mark.parametrize("cores", [2, 8])
async def test_batches_of_slots_use_every_core(tmp_path: Path, clean_registry, monkeypatch, cores: int) -> None:  # noqa: F811
    """compare_pair's two orders are decoded in one batch: llama.cpp runs such steps (and prompts) with
    `n_threads_batch`, all the cores, and one slot's next token with `n_threads`, half of them."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    given = stand_in(monkeypatch, FakeServer(answer("{}")))
    await LocalBackend("loc", str(fake_gguf(tmp_path / "m.gguf")), concurrency=2).loaded()
    (params,) = given
    assert params.n_parallel == 2 and params.cont_batching is True and params.kv_unified is False
    assert params.cpuparams.n_threads == cores // 2
    assert params.cpuparams_batch.n_threads == cores
    assert params.n_ctx >= 2 * local.MIN_SLOT_CTX  # each slot gets at least MIN_SLOT_CTX of the shared KV cache


async def test_thread_settings_are_kept_and_checked(tmp_path: Path, clean_registry, monkeypatch) -> None:  # noqa: F811
    given = stand_in(monkeypatch, FakeServer(answer("{}")))
    path = str(fake_gguf(tmp_path / "m.gguf"))
    loaded = await LocalBackend("loc", path, n_threads=1, n_threads_batch=3).loaded()
    assert (given[0].cpuparams.n_threads, given[0].cpuparams_batch.n_threads) == (1, 3)
    assert (loaded.n_threads, loaded.n_threads_batch) == (1, 3)
    for setting in ("n_threads", "n_threads_batch"):
        with pytest.raises(ValueError, match=setting):
            LocalBackend("loc", path, **{setting: 0})


async def default_compare_pair(backend: Any, tmp_path: Path) -> None:
    """A compare_pair with every argument at its default (template sop, both orders) on `backend`."""
    store = SqliteEngine(tmp_path / f"{backend.kind}.db")
    try:
        result = await pairwise.compare_pair(
            CallContext(backend, CallCache(store), store), prompt="What is 2 + 2?", response_a="2 + 2 = 4.", response_b="2 + 2 = 5."
        )
    finally:
        await backend.aclose()
        store.close()
    assert [t.parse_ok for t in result.trials] == [True, True]


async def test_the_default_answer_budget_is_the_same_embedded_and_over_http(tmp_path: Path, clean_registry, monkeypatch) -> None:  # noqa: F811
    """Both paths take their defaults from the settings; a default compare_pair asks both for the method's budget
    (4,096 tokens, JudgeBench's Arena-Hard judge setting), with the method's own length caps in the schema."""
    embedded = FakeServer(answer(SOP_ANSWER))
    stand_in(monkeypatch, embedded)
    model = fake_gguf(tmp_path / "m.gguf")
    local_settings = load_settings({"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_MODEL": str(model), "JUDGE_MCP_DB": str(tmp_path / "l.db")})
    await default_compare_pair(build_backend(local_settings.default_backend), tmp_path)

    scripted = start_scripted(lambda payload: SOP_ANSWER)
    try:
        http_settings = load_settings(app_env(scripted, tmp_path / "h.db"))
        await default_compare_pair(build_backend(http_settings.default_backend), tmp_path)
    finally:
        scripted.stop()

    sent = {"embedded": embedded.payloads, "http": scripted.requests}
    for path, payloads in sent.items():
        assert [p["max_tokens"] for p in payloads] == [PAIR_MAX_TOKENS, PAIR_MAX_TOKENS], path
    schemas = [p["response_format"]["json_schema"]["schema"]["properties"] for p in sent["embedded"] + sent["http"]]
    assert {s["own_answer"]["maxLength"] for s in schemas} == {pairwise.FIELD_MAX_CHARS["own_answer"]}
    assert {s["evaluation"]["maxLength"] for s in schemas} == {pairwise.FIELD_MAX_CHARS["evaluation"]}


def test_a_configured_cap_still_lowers_the_budget_and_keys_the_cache(tmp_path: Path) -> None:
    """`max_output_tokens` (JUDGE_MCP_MAX_OUTPUT_TOKENS) lowers every budget above it and names itself in the
    backend's identity, so answers cut at a cap never answer calls made without it."""
    path = str(fake_gguf(tmp_path / "m.gguf"))
    settings = load_settings({"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_MODEL": path, "JUDGE_MCP_MAX_OUTPUT_TOKENS": "1024"})
    capped, full = build_backend(settings.default_backend), LocalBackend("loc", path)
    request = user("x", max_tokens=PAIR_MAX_TOKENS, json_schema=pairwise.verdict_schema("sop"))
    assert capped.payload(request)["max_tokens"] == 1024 and full.payload(request)["max_tokens"] == PAIR_MAX_TOKENS
    assert len({capped.identity(), full.identity(), LocalBackend("loc", path, max_output_tokens=512).identity()}) == 3


def test_batch_threads_are_a_backend_setting(tmp_path: Path) -> None:
    from judge_mcp.config.settings import ConfigError

    model = str(fake_gguf(tmp_path / "m.gguf"))
    toml = tmp_path / "judge.toml"
    toml.write_text(f'[backends.tiny]\nkind = "local"\nmodel = "{model}"\nn_threads = 1\nn_threads_batch = 1\n', encoding="utf-8")
    settings = load_settings({"JUDGE_MCP_CONFIG": str(toml), "JUDGE_MCP_DB": str(tmp_path / "j.db")})
    backend = build_backend(settings.named_backends["tiny"])
    assert (backend.n_threads, backend.n_threads_batch) == (1, 1)
    toml.write_text(f'[backends.tiny]\nkind = "local"\nmodel = "{model}"\nn_threads_batch = 0\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="n_threads_batch"):
        load_settings({"JUDGE_MCP_CONFIG": str(toml), "JUDGE_MCP_DB": str(tmp_path / "j.db")}).backend("tiny")
