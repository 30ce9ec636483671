"""Error texts that say a thing once: a backend failure names the backend once and counts attempts only when there
was more than one; the missing-xllamacpp and missing-model messages name commands that work and the setting as the
user wrote it."""

from __future__ import annotations

import pytest

from judge_mcp.backends.errors import BackendError
from judge_mcp.backends.local_models import EMBEDDED_INSTALL, PIPX_INSTALL, ModelNotFoundError, resolve_model_path


def test_a_backend_error_counts_attempts_only_when_it_retried() -> None:
    once = str(BackendError("default", "HTTP 400: bad request", where="openai at http://h/v1, model m"))
    assert once == "backend 'default' (openai at http://h/v1, model m) failed: HTTP 400: bad request"
    assert "attempt" not in once
    assert str(BackendError("default", "HTTP 503", attempts=3, where="w")) == "backend 'default' (w) failed after 3 attempts: HTTP 503"


def test_a_cause_that_names_the_backend_is_not_wrapped_in_its_name_again() -> None:
    cause = "backend 'default' (openai at https://api.openai.com/v1, model gpt-4o-mini) has no API key: set JUDGE_MCP_API_KEY"
    text = str(BackendError("default", cause, where="openai at https://api.openai.com/v1, model gpt-4o-mini"))
    assert text == cause and text.count("backend 'default'") == 1
    assert str(BackendError("default", cause, attempts=2)) == f"{cause} (after 2 attempts)"


def test_the_install_hints_name_commands_that_work_before_judge_mcp_is_published() -> None:
    assert "judge-mcp[local]" not in EMBEDDED_INSTALL and "xllamacpp" in EMBEDDED_INSTALL
    assert PIPX_INSTALL.startswith("pipx inject judge-mcp 'xllamacpp") and "pipx runpip judge-mcp install --no-deps" in PIPX_INSTALL


def test_an_extras_hint_names_its_packages_from_the_metadata_not_the_unpublished_extra() -> None:
    """`pip install 'judge-mcp[postgres]'` fails until judge-mcp is on PyPI: the hint installs what pyproject.toml's
    extra lists, by name, with pip and with pipx."""
    from judge_mcp._version import install_hint, packages

    assert packages("postgres") == ["psycopg[binary]>=3.2", "psycopg-pool>=3.2"]
    assert install_hint("postgres") == (
        "pip install 'psycopg[binary]>=3.2' 'psycopg-pool>=3.2' "
        "(installed with pipx: pipx inject judge-mcp 'psycopg[binary]>=3.2' 'psycopg-pool>=3.2')"
    )
    assert "opentelemetry-exporter-otlp-proto-http>=1.30" in packages("otel") and packages("nosuch") == []


def test_postgres_without_psycopg_names_a_command_that_works(monkeypatch) -> None:
    import sys

    from judge_mcp.storage.engine import StoreError
    from judge_mcp.storage.postgres import PostgresEngine

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as in an install without the postgres extra
    with pytest.raises(StoreError) as err:
        PostgresEngine("postgresql://judge@127.0.0.1:1/judge")
    message = str(err.value)
    assert "PostgreSQL needs psycopg, which is not installed" in message
    assert "pip install 'psycopg[binary]>=3.2' 'psycopg-pool>=3.2'" in message and "judge-mcp[postgres]" not in message


def test_a_missing_model_file_names_the_setting_as_written(tmp_path) -> None:
    from judge_mcp.backends.local import LocalBackend

    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(ModelNotFoundError, match="JUDGE_MCP_MODEL for a local backend"):
        resolve_model_path(missing)
    with pytest.raises(ModelNotFoundError) as err:
        LocalBackend("tiny", missing).resolved_path()
    assert "`model` in [backends.tiny] for a local backend" in str(err.value) and "JUDGE_MCP_MODEL" not in str(err.value)


def test_the_readme_gives_the_same_pipx_line_as_the_error() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert PIPX_INSTALL in readme
