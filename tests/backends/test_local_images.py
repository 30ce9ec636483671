"""Images on the embedded backend: refused with the setting to use unless a multimodal projector (`mmproj`) is
configured; with one, the projector's path reaches xllamacpp's CommonParams and the images reach the embedded
server as OpenAI `image_url` parts. No projector ships here: a stand-in for xllamacpp records what it is given."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from judge_mcp.backends import BackendError, build_backend, local, user
from judge_mcp.backends.local import LocalBackend
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.contract.images import Image
from tests.backends.test_local_backend import FakeServer, clean_registry, fake_gguf, ok_body  # noqa: F401 (a fixture)
from tests.image_data import png

SHOT = Image.of("image/png", png(5, size=512))
WITH_IMAGE = user("Which is clearer?", images=(("Images the prompt shows:", (SHOT,)),), max_tokens=16)


async def test_without_a_projector_images_are_refused_naming_the_setting(tmp_path: Path) -> None:
    backend = LocalBackend("loc", str(fake_gguf(tmp_path / "m.gguf")))
    with pytest.raises(BackendError) as err:
        await backend.complete(WITH_IMAGE)
    assert "mmproj" in err.value.cause and "JUDGE_MCP_MMPROJ" in err.value.cause and err.value.attempts == 1
    assert str((tmp_path / "m.gguf").resolve()) not in local.loaded_models()  # refused before loading


async def test_with_a_projector_images_reach_the_embedded_server(tmp_path: Path, clean_registry, monkeypatch) -> None:  # noqa: F811
    model, projector = fake_gguf(tmp_path / "m.gguf"), fake_gguf(tmp_path / "mmproj-m.gguf")
    server, given = FakeServer(ok_body), []
    fake = types.ModuleType("xllamacpp")
    fake.CommonParams = lambda: SimpleNamespace(model=SimpleNamespace(), mmproj=SimpleNamespace(), cpuparams=SimpleNamespace(),
                                                cpuparams_batch=SimpleNamespace(), sampling=SimpleNamespace())
    fake.Server = lambda params: given.append(params) or server
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    seeing = LocalBackend("seeing", str(model), mmproj=str(projector))
    completion = await seeing.complete(WITH_IMAGE)
    assert completion.text == '{"verdict": "A"}'
    (params,) = given
    assert params.model.path == str(model.resolve()) and params.mmproj.path == str(projector.resolve())
    parts = server.payloads[0]["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url"]
    assert parts[2]["image_url"]["url"] == SHOT.data_uri()
    assert seeing.identity() != LocalBackend("blind", str(model)).identity()  # cached answers never cross
    assert local.unload_model(model) and local.loaded_models() == {}


async def test_a_projector_that_is_not_gguf_is_named(tmp_path: Path, clean_registry) -> None:  # noqa: F811
    (tmp_path / "p.bin").write_bytes(b"not a projector")
    backend = LocalBackend("loc", str(fake_gguf(tmp_path / "m.gguf")), mmproj=str(tmp_path / "p.bin"))
    with pytest.raises(BackendError) as err:
        await backend.complete(WITH_IMAGE)
    assert "mmproj" in err.value.cause and "not a GGUF file" in err.value.cause


def test_the_setting_comes_from_the_environment_and_the_toml_file(tmp_path: Path) -> None:
    env = {"JUDGE_MCP_DB": str(tmp_path / "j.db"), "JUDGE_MCP_MMPROJ": "/models/mmproj.gguf"}
    assert load_settings(env).default_backend.mmproj == "/models/mmproj.gguf"
    assert load_settings({**env, "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_API_KEY": "k"}).default_backend.mmproj is None
    toml = tmp_path / "b.toml"
    toml.write_text('[backends.vision]\nkind = "local"\nmodel = "/m/model.gguf"\nmmproj = "/m/mmproj.gguf"\n')
    settings = load_settings({**env, "JUDGE_MCP_CONFIG": str(toml)})
    backend = build_backend(settings.backend("vision"))
    assert isinstance(backend, LocalBackend) and backend.mmproj == "/m/mmproj.gguf"
    toml.write_text('[backends.api]\nkind = "openai"\nmmproj = "/m/mmproj.gguf"\n')
    with pytest.raises(ConfigError, match=r"\[backends.api\]: mmproj .*\"local\" only"):
        load_settings({**env, "JUDGE_MCP_CONFIG": str(toml), "OPENAI_API_KEY": "k"}).backend("api")
