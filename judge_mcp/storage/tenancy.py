"""The tenant a store acts for (judge_mcp/tenants.py says who is calling): the names every tenant-aware store knows,
the context variable holding the tenant of the call being served, and who owns the rows from before tenants. Here,
below the stores, so storage/ imports nothing above it."""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator
from contextlib import contextmanager

LOCAL = "local"  # stdio, the Python API, a loopback HTTP server without a token
DEFAULT = "default"  # the one token of JUDGE_MCP_HTTP_TOKEN
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")

CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("judge_mcp_tenant", default=LOCAL)


def current() -> str:
    """The tenant of the call being served (`local` outside any HTTP call)."""
    return CURRENT.get()


@contextmanager
def acting(tenant: str) -> Iterator[str]:
    """Run the block (and what it starts: tasks and worker threads inherit the variable) as `tenant`."""
    token = CURRENT.set(tenant)
    try:
        yield tenant
    finally:
        CURRENT.reset(token)


def legacy(engine: str) -> str:
    """The tenant of rows written before tenants existed, by engine ("sqlite", "postgresql"): `local` in SQLite (the
    per-user database stdio clients write), `default` in PostgreSQL (shared only by HTTP replicas, which until then
    had the one token of tenant `default`)."""
    return DEFAULT if engine == "postgresql" else LOCAL
