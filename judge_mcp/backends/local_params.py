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
# Plumbing cap on the answer budget (tokens): the bundled 135M model writes ~20 tokens/s on 2 cores, so a request's
# paper budget (4,096 for the SOP judge) is lowered to this here, and only here; remote backends send the method's
# budget. Configurable per backend (`max_output_tokens`).
MAX_OUTPUT_TOKENS = 1024
LOG_VERBOSITY = 1  # llama.cpp log threshold: 0 output, 1 errors, 2 warnings, 3 info, 4 debug


def default_threads() -> int:
    """Half the usable cores (1 on a 2-core machine), at most MAX_DEFAULT_THREADS.

    Not all of them: llama.cpp's threads wait for each other at every step, so when another process takes a core
    (the agent's own builds and tests, a second model) a generation with as many threads as cores slows down
    10-20 times, where one with half of them only loses its share (measured on a busy 2-core machine with
    `bench/local_throughput.py --threads 1,2`). Set `n_threads` to use every core on a machine that does nothing
    else.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, min(cores // 2, MAX_DEFAULT_THREADS))


def engine_params(xllamacpp: Any, path: Path, mmproj: Path | None, n_parallel: int, n_ctx: int, n_threads: int) -> Any:
    """The `xllamacpp.CommonParams` that load `path` with `n_parallel` slots sharing `n_ctx` tokens of KV cache."""
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    if mmproj is not None:
        params.mmproj.path = str(mmproj)
    params.n_parallel = n_parallel
    params.n_ctx = n_ctx
    params.cont_batching = True
    params.kv_unified = False
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    params.sampling.seed = SEED
    params.warmup = False
    params.verbosity = LOG_VERBOSITY
    params.n_threads_http = 1
    params.api_keys = [secrets.token_urlsafe(32)]
    return params
