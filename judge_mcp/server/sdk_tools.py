"""The tools (tools.py) as the MCP SDK's Tool objects, for build_server: the SDK-internal wiring, apart from the
tools themselves.

Each SDK tool takes a client's arguments as they came and hands them, with what the request says about its caller
(the tenant, progress notifications, the connection a sampling backend asks), to the front door every tool call
goes through (`tools.invoke`: the arguments checked, the tenant, telemetry, the settings' warnings). The SDK keeps
its own part: a ToolError's message reaches the client prefixed with "Error executing tool NAME", a result becomes
the CallToolResult checked against the published output schema. Only what has no place in a result model is added
here: the settings' warnings as a text block of their own beside a result without a `warnings` field.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, ConfigDict, Field, create_model

from judge_mcp import tenants
from judge_mcp.calls.context import ProgressFn
from judge_mcp.contract import images as imagelib
from judge_mcp.runtime.app import App
from judge_mcp.server import schemas as tool_schemas
from judge_mcp.server.tools import TOOLS, Caller, ToolSpec, invoke, non_text

log = logging.getLogger("judge_mcp.server")


def _progress(ctx: Context | None) -> ProgressFn | None:
    if ctx is None:
        return None

    async def report(done: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.report_progress(done, total, message)
        except Exception:  # a client that went away must not fail the judgment
            log.debug("progress notification failed", exc_info=True)

    return report


def image_paths(app: App) -> imagelib.PathPolicy:
    """Where the server's clients may name image files: over stdio only, inside JUDGE_MCP_IMAGE_DIRS."""
    return imagelib.PathPolicy(stdio=app.stdio, dirs=app.settings.image_dirs)


class ArgsTool(Tool):
    """An SDK tool whose function takes the client's arguments as they came (the SDK's own argument model holds them
    as one value, so its validation has nothing to check) and calls the tool through its front door
    (`tools.invoke`), which checks them against the tool's model strictly and readably (contract/validation.py)."""

    app: Any = Field(exclude=True)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        return settings_note(await super().run({"arguments": arguments}, context, convert_result), self.app.settings.warnings)


def settings_note(result: Any, warnings: tuple[str, ...]) -> Any:
    """A result whose structured content has no `warnings` field (judge_stats, lwe_session, lwe_session_show,
    record_label) with the settings' warnings as one more text block after its JSON, so a misspelt variable shows
    in every tool's result, as it does in every error and in the judging tools' `warnings` (tools.invoke)."""
    if not warnings or not isinstance(result, CallToolResult) or result.is_error:
        return result
    if isinstance(result.structured_content, dict) and "warnings" in result.structured_content:
        return result  # tools.with_settings_warnings put them there
    note = TextContent(type="text", text=f"judge-mcp settings: {'; '.join(warnings)}")
    return result.model_copy(update={"content": [*result.content, note]})


class _DeferredArgModel(ArgModelBase):
    """The SDK's argument model base, its validator built at a tool's first call (not every tool's at start)."""

    model_config = ConfigDict(defer_build=True)


def mcp_tool(spec: ToolSpec, app: App, schemas: dict[str, Any]) -> ArgsTool:
    """The SDK tool for `spec`, running its function with `app` and the request's progress notifications. `schemas`:
    its published input and output schemas (server/schemas.py: shipped, or generated from its models)."""
    _, result_model = spec.models()
    decode = non_text(schemas["input"])  # from the published input schema: no schema generated at a call

    async def call(arguments: dict[str, Any], ctx: Context) -> BaseModel | InputRequiredResult:
        # the caller's tenant (tenants.py): the HTTP gate's, or `local`; a sampling backend asks this request's client
        caller = Caller(image_paths(app), tenants.of_request(ctx), _progress(ctx), decode, ctx)
        result: BaseModel | InputRequiredResult = await invoke(app, spec, arguments, caller)
        return result

    holder = create_model(f"{spec.name}Call", __base__=_DeferredArgModel, arguments=(Any, ...))
    return ArgsTool(
        fn=call,
        name=spec.name,
        title=spec.title,
        description=reflow(spec.fn.__doc__ or ""),
        parameters=schemas["input"],
        fn_metadata=FuncMetadata(arg_model=holder, output_model=result_model, output_schema=schemas["output"]),
        is_async=True,
        context_kwarg="ctx",
        annotations=spec.annotations,
        app=app,
    )


def mcp_tools(app: App) -> list[Tool]:
    published = tool_schemas.schemas(TOOLS)  # read from the shipped file when it is current: no schema generation
    return [mcp_tool(spec, app, published[spec.name]) for spec in TOOLS]


def reflow(docstring: str) -> str:
    """A docstring as a description: its indentation gone and each paragraph on one line."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
