"""The engine parameters of the embedded backend: what llama.cpp (through xllamacpp's `CommonParams`) is told when
a GGUF file is loaded, and the defaults they come from."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

MIN_SLOT_CTX = 8192  # tokens of KV cache each slot gets at least (LWE refine prompts reach ~4,500 tokens; SmolLM2 was trained to 8192)
MAX_DEFAULT_THREADS = 8  # a tiny model gains nothing past a few threads
SEED = 1234  # fixed sampling seed: temperature > 0 samples are reproducible for the same batch
# No cap on the answer budget by default: the embedded backend sends each method's budget as a model server gets it
# (compare_pair 4,096 tokens, JudgeBench's Arena-Hard judge setting that the GRP paper uses; FLIP 512, its paper's
# limit; ...), so a verdict means the same on every path. `max_output_tokens` lowers it for one backend.
MAX_OUTPUT_TOKENS: int | None = None
LOG_VERBOSITY = 1  # llama.cpp log threshold: 0 output, 1 errors, 2 warnings, 3 info, 4 debug


def default_threads() -> int:
    """Half the usable cores (1 on a 2-core machine), at most MAX_DEFAULT_THREADS.

    Not all of them: llama.cpp's threads wait for each other at every step, so when another process takes a core
    (the agent's own builds and tests, a second model) a generation with as many threads as cores slows down
    10-20 times, where one with half of them only loses its share (measured on a busy 2-core machine with
    `perf/local_throughput.py --threads 1,2`). Set `n_threads` to use every core on a machine that does nothing
    else.
    """
    return max(1, min(usable_cores() // 2, MAX_DEFAULT_THREADS))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 2


def default_batch_threads() -> int:
    """Every usable core (at most MAX_DEFAULT_THREADS) for batches: prompts, and steps that decode several slots.

    llama.cpp runs a step with `n_threads_batch` threads whenever it holds more than one token, and with `n_threads`
    only for one slot's next token. Continuous batching puts concurrent requests (compare_pair's two orders) in one
    step, whose cost on a CPU grows with the tokens in it: with one thread, two orders took about twice one; with
    every core for those steps, 1.3-1.5 times one on 2 busy cores (`perf/local_throughput.py --pair`). One
    request's token-by-token generation keeps `n_threads` (half the cores), which is what suffers most when another
    process takes a core.
    """
    return max(1, min(usable_cores(), MAX_DEFAULT_THREADS))


def engine_params(
    xllamacpp: Any, path: Path, mmproj: Path | None, n_parallel: int, n_ctx: int, n_threads: int, n_threads_batch: int
) -> Any:
    """The `xllamacpp.CommonParams` that load `path` with `n_parallel` slots sharing `n_ctx` tokens of KV cache,
    decoded together (continuous batching), one slot's next token with `n_threads` threads and batches with
    `n_threads_batch`."""
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    if mmproj is not None:
        params.mmproj.path = str(mmproj)
    params.n_parallel = n_parallel
    params.n_ctx = n_ctx
    params.cont_batching = True
    params.kv_unified = False
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads_batch
    params.sampling.seed = SEED
    params.warmup = False
    params.verbosity = LOG_VERBOSITY
    params.n_threads_http = 1
    params.api_keys = [secrets.token_urlsafe(32)]
    return params
