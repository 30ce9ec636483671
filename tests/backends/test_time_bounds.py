"""How long a backend call may take, and what its errors say, against servers on 127.0.0.1 that hang, stall, fail
slowly, or answer with the wrong page. Small timeouts stand in for the defaults (120 s to the first byte).

The bound checked is the documented one (`Backend.call_bound_s`: two attempts' worth, all retries and waits
included), with slack for two shared cores; before it existed a hung server cost every attempt's full timeout."""

from __future__ import annotations

import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from judge_mcp.backends import user
from judge_mcp.backends.errors import BackendError
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from testkit.scripted_servers import Reply

SLACK_S = 1.5  # machine slack on top of the documented bound (2 shared cores)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_hung_server_is_retried_once_and_fails_within_the_bound(make_backend, kind) -> None:
    backend, server = make_backend(lambda p: Reply(content="late", delay_s=8.0), kind, timeout_s=0.3, max_retries=3, backoff_base_s=0.05)
    start = time.perf_counter()
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    elapsed = time.perf_counter() - start
    assert "timed out after 0.3s waiting for the reply to start" in str(err.value)
    assert err.value.attempts == 2 and len(server.requests) == 2  # a timeout is retried once, not max_retries times
    assert elapsed < backend.call_bound_s + SLACK_S


async def test_refusals_are_still_retried_max_retries_times(make_backend) -> None:
    backend, server = make_backend(lambda p: Reply(status=503), timeout_s=5, max_retries=3, backoff_base_s=0.01)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    assert err.value.attempts == 4 and len(server.requests) == 4


async def test_slow_failures_stop_at_the_call_bound(make_backend) -> None:
    """Each attempt gets a 503 just inside its timeout: the retries stop at the call's bound, not after all of them."""
    backend, server = make_backend(lambda p: Reply(status=503, delay_s=0.25), timeout_s=0.3, max_retries=8, backoff_base_s=0.2)
    assert backend.call_bound_s == pytest.approx(1.2)  # 2 x (0.3 to the first byte + 0.3 for the rest)
    start = time.perf_counter()
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    elapsed = time.perf_counter() - start
    assert elapsed < backend.call_bound_s + SLACK_S
    assert len(server.requests) < 9  # the 8 retries would have taken ~30 s of backoff
    assert "HTTP 503" in str(err.value) or "the call's bound" in str(err.value)


class StallingServer:
    """Answers 200 with a content-length, sends the first bytes of the body, then nothing (a reply that stalls)."""

    def __init__(self) -> None:
        self.requests = 0
        self.release = threading.Event()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                length = 0
                while (line := self.rfile.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length"):
                        length = int(line.split(b":")[1])
                self.rfile.read(length)
                outer.requests += 1
                self.wfile.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"id": "x", ')
                self.wfile.flush()
                outer.release.wait(30)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stalling() -> Iterator[StallingServer]:
    server = StallingServer()
    yield server
    server.stop()


async def test_a_reply_that_stalls_after_its_first_bytes_is_a_timeout_that_says_so(stalling) -> None:
    backend = OpenAICompatBackend("stall", "m", base_url=stalling.base_url, timeout_s=0.4, max_retries=3, backoff_base_s=0.05)
    try:
        start = time.perf_counter()
        with pytest.raises(BackendError) as err:
            await backend.complete(user("q"))
        elapsed = time.perf_counter() - start
    finally:
        await backend.aclose()
    assert "the reply started but had not arrived whole 0.4s later" in str(err.value)
    assert err.value.attempts == 2 and stalling.requests == 2
    assert elapsed < backend.call_bound_s + SLACK_S


# ---- what the errors say ----------------------------------------------------------------------------------------
async def _failure(backend: OpenAICompatBackend) -> BackendError:
    """The BackendError of one request to `backend`, which is closed afterwards."""
    try:
        with pytest.raises(BackendError) as err:
            await backend.complete(user("q"))
    finally:
        await backend.aclose()
    return err.value


async def test_a_404_from_a_base_url_without_v1_names_the_url_and_the_usual_path(scripted) -> None:
    server = scripted(lambda p: Reply(status=404, raw_body=b"404 page not found"))
    root = server.base_url.removesuffix("/v1")
    error = await _failure(OpenAICompatBackend("nov1", "m", base_url=root, max_retries=3))
    message = str(error)
    assert f"POST {root}/chat/completions" in message
    assert f"usually answer at {root}/v1/chat/completions" in message and "add /v1" in message
    assert error.attempts == 1  # a 404 is not retried


async def test_a_404_from_a_base_url_holding_the_endpoint_says_to_drop_it(scripted) -> None:
    """The endpoint copied from a server's docs as the base URL (.../v1/chat/completions): judge-mcp adds the
    endpoint again, the server answers 404, and the message says which base URL to give instead."""
    server = scripted(lambda p: Reply(status=404, raw_body=b"404 page not found"))
    message = str(await _failure(OpenAICompatBackend("endpoint", "m", base_url=f"{server.base_url}/chat/completions", max_retries=3)))
    assert f"POST {server.base_url}/chat/completions/chat/completions" in message
    assert f"the base URL already ends with /chat/completions: set it (JUDGE_MCP_BASE_URL or base_url) to {server.base_url}" in message
    assert "add /v1" not in message


async def test_an_html_error_page_is_summarised_not_dumped(make_backend) -> None:
    page = (
        b"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>502 Bad Gateway</title>"
        b"<style>body { font-family: sans-serif; }</style></head><body><center><h1>502 Bad Gateway</h1></center>"
        b"<hr><center>nginx/1.25.3</center>" + b"<!-- padding -->" * 200 + b"</body></html>"
    )
    backend, _ = make_backend(lambda p: Reply(status=502, raw_body=page), max_retries=0)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    message = str(err.value)
    assert "HTTP 502: an HTML page ('502 Bad Gateway'" in message
    assert "<" not in message and "font-family" not in message and len(message) < 400


async def test_an_html_page_with_status_200_says_the_base_url_is_probably_wrong(make_backend) -> None:
    page = b"<html><head><title>Open WebUI</title></head><body>" + b"x" * 5000 + b"</body></html>"
    backend, _ = make_backend(lambda p: Reply(raw_body=page), max_retries=0)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    message = str(err.value)
    assert "not JSON: an HTML page ('Open WebUI'" in message and "base URL" in message and "xxxxx" not in message


@pytest.mark.parametrize("status", [501, 505])
async def test_not_implemented_is_not_retried(make_backend, status) -> None:
    backend, server = make_backend(lambda p: Reply(status=status), max_retries=3, backoff_base_s=0.01)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    assert err.value.attempts == 1 and len(server.requests) == 1 and f"HTTP {status}" in str(err.value)
