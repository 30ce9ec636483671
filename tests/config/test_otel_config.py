"""When tracing is on (config_values.otel_settings), and what happens when it is asked for without the extra."""

from __future__ import annotations

import logging
import sys

import pytest

from judge_mcp.telemetry import hooks as telemetry
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.config.values import otel_settings

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(("env", "on"), [
    ({}, False),
    ({"JUDGE_MCP_OTEL": "1"}, True),
    (ENDPOINT, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none"}, False),  # the standard way to say no traces
    ({**ENDPOINT, "JUDGE_MCP_OTEL": "0"}, False),  # the endpoint is meant for another program
    ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
    ({"JUDGE_MCP_OTEL": "1", "OTEL_TRACES_EXPORTER": "none"}, True),  # spans for a provider the host program set up
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),  # set but empty counts as unset
])
def test_tracing_is_on_when_asked_for_or_when_an_exporter_is_configured(env, on) -> None:
    assert otel_settings(env).enabled is on


def test_the_settings_read_the_exporters_the_protocol_and_the_text_opt_in() -> None:
    settings = load_settings({"JUDGE_MCP_DB": "/tmp/x.db", **ENDPOINT, "OTEL_TRACES_EXPORTER": "otlp, console",
                              "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "JUDGE_MCP_OTEL_CAPTURE_TEXT": "1"}).otel
    assert settings.exporters == ("otlp", "console") and settings.protocol == "grpc" and settings.capture_text
    assert not load_settings({"JUDGE_MCP_DB": "/tmp/x.db"}).otel.capture_text


@pytest.mark.parametrize(("env", "named"), [
    ({"JUDGE_MCP_OTEL": "maybe"}, "JUDGE_MCP_OTEL"),
    ({"JUDGE_MCP_OTEL_CAPTURE_TEXT": "all"}, "JUDGE_MCP_OTEL_CAPTURE_TEXT"),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
])
def test_a_bad_value_is_an_error_naming_the_variable(env, named) -> None:
    with pytest.raises(ConfigError, match=named):
        otel_settings(env)


def test_asked_for_without_the_extra_installed_warns_and_stays_off(monkeypatch, caplog) -> None:
    import judge_mcp.telemetry

    monkeypatch.setitem(sys.modules, "judge_mcp.telemetry.otel", None)  # as if opentelemetry-sdk were missing
    monkeypatch.delattr(judge_mcp.telemetry, "otel", raising=False)  # imported by an earlier test
    monkeypatch.setattr(telemetry, "_on", None)
    with caplog.at_level(logging.INFO, logger="judge_mcp.telemetry"):
        telemetry.configure(load_settings({"JUDGE_MCP_DB": "/tmp/x.db", "JUDGE_MCP_OTEL": "1"}))
        assert not telemetry.enabled()
        assert telemetry.tool_call("compare_pair") is telemetry.OFF
    # this logger's records only: an aiohttp session an earlier test left open may be collected (and logged) meanwhile
    (record,) = [r for r in caplog.records if r.name == "judge_mcp.telemetry"]
    assert record.levelno == logging.WARNING and "judge-mcp[otel]" not in record.getMessage()  # not on PyPI: that fails
    assert ": pip install 'opentelemetry-api>=1.30' 'opentelemetry-sdk>=1.30' " in record.getMessage()
    assert "pipx inject judge-mcp 'opentelemetry-api>=1.30'" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="judge_mcp.telemetry"):  # only the standard variables: not worth a warning
        telemetry.configure(load_settings({"JUDGE_MCP_DB": "/tmp/x.db", **ENDPOINT}))
    assert [r.levelno for r in caplog.records] == [logging.INFO] and not telemetry.enabled()
