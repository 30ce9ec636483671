"""The option pool's table: each grade_score_options call's options, under its instruction's hash (made by
migrations.m004_option_pool). methods/grade_score/unrelated_pool.py decides whether and how the pool is drawn from."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.lanes import in_thread


def instruction_hash(instruction: str, tenant: str) -> str:
    """The key of an instruction in `tenant`'s pool (migrations.m013_tenants re-keyed the rows from before tenants):
    the same instruction of two tenants is two keys, so each tenant's options are stored once in its own pool."""
    return hashlib.sha256(f"{tenant}\x00{instruction.strip()}".encode("utf-8")).hexdigest()


class OptionPool:
    """One tenant's option pool (`tenant`; None: the call's, tenants.current()): its reads and writes
    (`pool.aio.add(...)` runs `add` in a worker thread)."""

    def __init__(self, store: Engine, tenant: str | None = None):
        self.store = store
        self.tenant = tenant or tenants.current()
        self.aio = OptionPoolOffLoop(self)

    def add(self, instruction: str, options: list[str]) -> None:
        """Store the options under the instruction, each once (an option already stored for it is left as it is)."""
        digest, now = instruction_hash(instruction, self.tenant), time.time()
        with self.store.transaction() as tx:
            for option in options:
                tx.execute(
                    "INSERT INTO option_pool (instruction_hash, instruction, option, created_at, tenant) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (instruction_hash, option) DO NOTHING",
                    [digest, instruction, option, now, self.tenant],
                )

    def others(self, exclude_instruction: str, limit: int = 200) -> list[dict[str, Any]]:
        """The tenant's stored options that answer a different instruction (newest first)."""
        return self.store.query(
            "SELECT instruction, option FROM option_pool WHERE tenant = ? AND instruction_hash != ? ORDER BY id DESC LIMIT ?",
            [self.tenant, instruction_hash(exclude_instruction, self.tenant), limit],
        )


class OptionPoolOffLoop:
    """`OptionPool.aio`: the write async code needs, awaited in a worker thread."""

    def __init__(self, pool: OptionPool):
        self._pool = pool

    async def add(self, instruction: str, options: list[str]) -> None:
        await in_thread(self._pool.add, instruction, options)
