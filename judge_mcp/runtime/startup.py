"""What a server does once, at start: the imports ahead of the first tool call (`warm_up`) and the heap settled
after start-up (`settle_heap`). The one start-up module: the services (app.py) know no method table; this module
knows both the backends' and the methods' preloads."""

from __future__ import annotations

import gc
import threading

from judge_mcp.backends import preload
from judge_mcp.config.settings import ConfigError, Settings
from judge_mcp.methods import registry


def settle_heap() -> None:
    """Call once start-up is done (imports, settings, the server's tools): what the heap holds moves to the permanent
    generation (gc.freeze), so the collector stops re-scanning the SDK's, pydantic's and our long-lived objects in
    every older-generation collection (~0.05 ms of CPU per compare_pair, ~1.2 ms per 16-response FLIP call, measured
    in process). No full collection first: it took ~30-95 ms of the start (perf/cold_start.py) to free a few hundred
    objects of start-up garbage (3,382 counted with the collector off during the imports, cli.main), which the
    permanent generation now keeps, once. Turns the collector (back) on."""
    gc.freeze()
    gc.enable()


def warm_up(settings: Settings) -> list[threading.Thread]:
    """Ahead of the first tool call: the default backend's HTTP client imported in a thread (backends.preload).
    Nothing for the embedded model or a configuration with an error (each call reports that error). Then the
    judging methods' modules, in a thread of their own (methods/registry.py). Returns the threads (a benchmark
    waits for them, as a client's think time would)."""
    try:
        backend_thread = preload(settings.backend(None).kind)
    except ConfigError:
        backend_thread = None
    methods = registry.preload(after=backend_thread)
    return [methods] if backend_thread is None else [methods, backend_thread]
