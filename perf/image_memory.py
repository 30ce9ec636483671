"""Peak memory of concurrent image calls over HTTP: `judge-mcp serve --transport http` as a process of its own (the
one measured), a scripted OpenAI-compatible backend in another, and N concurrent compare_pair calls whose bodies each
carry IMAGES images of IMAGE_BYTES bytes (4 x 5,000,000 bytes: a ~27 MB request body, near the transport's default
limit). Each call's images are its own (no call shares another's decoded images or cached answer).

    .venv/bin/python -m perf.image_memory [--calls 4] [--images 4] [--image-bytes 5000000]

The server's peak resident memory (VmHWM in /proc/PID/status) is reset after a warm-up call (`5` written to
/proc/PID/clear_refs) and read after the burst; what it prints is that peak over the resident memory before the
burst, per call, and as a multiple of one request body. Linux only.
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
from pathlib import Path

import anyio

from testkit.scripted_servers import ExternalScripted
from testkit.server_process import HttpServer, server_env

ANSWER = '{"verdict": "[[A>B]]"}'
PNG = b"\x89PNG\r\n\x1a\n"


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def image(call: int, n: int, size: int) -> str:
    """A data URI of `size` bytes whose bytes say PNG, its content its own (call, n)."""
    body = PNG + bytes([call % 256, n % 256]) * ((size - len(PNG)) // 2)
    return "data:image/png;base64," + base64.b64encode(body[:size]).decode()


async def one_call(url: str, args: dict) -> None:
    from mcp import Client

    async with Client(url) as client:
        result = await client.call_tool("compare_pair", args)
        if result.is_error:
            raise RuntimeError(result.content[0].text[:300])


def arguments(call: int, images: int, size: int) -> dict:
    return {"prompt": f"Which answer describes the images? ({call})", "response_a": "a cat", "response_b": "a dog",
            "images": [image(call, n, size) for n in range(images)]}


async def burst(url: str, calls: int, images: int, size: int) -> None:
    async with anyio.create_task_group() as tg:
        for call in range(calls):
            tg.start_soon(one_call, url, arguments(call + 1, images, size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--image-bytes", type=int, default=5_000_000)
    opts = parser.parse_args()
    body = len(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "compare_pair", "arguments": arguments(1, opts.images, opts.image_bytes)}}))
    with ExternalScripted(ANSWER, 0.0) as backend, tempfile.TemporaryDirectory() as tmp:
        server = HttpServer(server_env(backend.base_url, Path(tmp) / "judge.db", JUDGE_MCP_MAX_RETRIES="0"), log=Path(tmp) / "serve.log")
        try:
            anyio.run(burst, server.url, 1, 1, 100_000)  # warm-up: imports, the first connections, a small image
            pid = server.proc.pid
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
            before = _status(pid)["VmRSS"]
            anyio.run(burst, server.url, opts.calls, opts.images, opts.image_bytes)
            peak = _status(pid)["VmHWM"]
        finally:
            server.kill()
    added = peak - before
    print(f"request body: {body / 1e6:.1f} MB ({opts.images} images of {opts.image_bytes:,} bytes); {opts.calls} concurrent calls")
    print(f"server RSS before the burst: {before / 1e6:.0f} MB; peak during it: {peak / 1e6:.0f} MB")
    print(f"peak added: {added / 1e6:.0f} MB, {added / opts.calls / 1e6:.0f} MB per call = {added / opts.calls / body:.1f}x the body")


if __name__ == "__main__":
    main()
