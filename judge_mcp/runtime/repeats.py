"""The same tool call sent again: a client that gave up on a slow call (the MCP Inspector waits 60 s by default, an
LWE judgment on a local model can take two minutes) and sends it once more must get the verdict being worked out,
not a second judgment. Within one server process:

- a call identical to one still running (same tenant, tool and arguments) joins it and returns its result, with a
  warning saying so; if the running call is cancelled (its client went away), the one waiting runs it itself;
- an `lwe_judge` call identical to one answered within REPLAY_S returns that stored result (with a warning), since
  judging it again would buffer the case's feedback twice. The other tools are deterministic at temperature 0, so
  a repeat is answered from the call cache anyway (`cached_calls`), and a repeat with samples at a temperature is a
  request for new samples: they are judged again.

Calls at a temperature (score_response's samples) and calls on the `sampling` backend (the client's own model,
whose answers are never served to another MCP session) are never joined.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

REPLAY_S = 900.0  # how long an lwe_judge result is answered again to the same call
KEPT = 256  # lwe_judge results kept for that, newest first


def call_key(tenant: str, tool: str, arguments: dict[str, Any]) -> str:
    """The identity of a call: its tenant, tool and (validated, JSON) arguments."""
    payload = json.dumps([tenant, tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class Repeats:
    """The calls running now, by key, and lwe_judge's recent results (one per App, on its event loop)."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[asyncio.Future[Any], float]] = {}  # (its result to come, when it started)
        self.answered: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    async def run(self, key: str, call: Callable[[], Awaitable[Any]], *, replay: bool) -> tuple[Any, str | None]:
        """(the call's result, a note when it was not judged for this call: joined or answered again)."""
        while True:
            if replay:
                kept = self._recent(key)
                if kept is not None:
                    age, result = kept
                    return result, (f"the same call was answered {age:.0f} s ago: that verdict is returned, not judged "
                                    "again (a second judgment would buffer the case's feedback twice)")
            if key not in self.running:
                break
            running, started = self.running[key]
            try:
                result = await asyncio.shield(running)
            except asyncio.CancelledError:
                if running.cancelled():  # the first caller went away: this one runs it (unless it is cancelled itself)
                    continue
                raise
            return result, f"joined the same call, still running since {time.monotonic() - started:.0f} s ago (sent again?)"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.running[key] = (future, time.monotonic())
        try:
            result = await call()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: no "exception was never retrieved" when nobody joined
            raise
        finally:
            if self.running.get(key, (None,))[0] is future:
                del self.running[key]
        future.set_result(result)
        if replay:
            self.answered[key] = (time.monotonic(), result)
            while len(self.answered) > KEPT:
                self.answered.popitem(last=False)
        return result, None

    def _recent(self, key: str) -> tuple[float, Any] | None:
        kept = self.answered.get(key)
        if kept is None:
            return None
        age = time.monotonic() - kept[0]
        if age > REPLAY_S:
            del self.answered[key]
            return None
        return age, kept[1]
