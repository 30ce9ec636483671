"""A key echoed in the forms a plain text search misses never reaches a tool output, the verdict
log, the cache or a log line: JSON-escaped in the reply body, in a response header printed by debug logging, and
credentials written into the base URL itself."""

from __future__ import annotations

import base64
import json
import logging

from judge_mcp.backends.base import user
from judge_mcp.calls.cache import CallCache
from judge_mcp.backends.client import split_userinfo
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from judge_mcp.redaction import RedactingFilter, register
from testkit.scripted_servers import Reply, chat_body

KEY = "sk-echo-7c1e0b55aa93"


def escaped(text: str) -> str:
    """Every character as a JSON \\u escape: valid JSON, but the key's letters never appear in the raw body."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


async def test_a_key_echoed_json_escaped_is_redacted_before_it_is_read(make_backend, store):
    body = json.dumps(chat_body("your key is KEYHERE")).replace("KEYHERE", escaped(KEY)).encode()
    assert KEY.encode() not in body
    backend, server = make_backend(lambda p: Reply(raw_body=body), name="echo", model="m", api_key=KEY, max_retries=0)
    completion, _ = await CallCache(store).complete(backend, user("hi"))
    await backend.aclose()
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert completion.text == "your key is [redacted]"
    assert KEY not in json.dumps(completion.raw)
    assert KEY not in json.dumps(store.query("SELECT response FROM call_cache"))


async def test_credentials_in_the_base_url_are_sent_as_basic_auth_and_stored_nowhere(scripted, store):
    server = scripted(lambda p: "fine")
    host_url = server.base_url.replace("http://", f"http://judge:{KEY}@")
    backend = OpenAICompatBackend("userinfo", "m", base_url=host_url, max_retries=0)
    assert KEY not in backend.base_url and KEY not in backend.identity() and KEY not in repr(backend)
    completion, _ = await CallCache(store).complete(backend, user("hi"))
    await backend.aclose()
    assert completion.text == "fine"
    assert server.headers[0]["authorization"] == "Basic " + base64.b64encode(f"judge:{KEY}".encode()).decode()
    assert KEY not in json.dumps(store.query("SELECT key, backend, request, response FROM call_cache"))


async def test_an_api_key_beside_credentials_in_the_base_url_is_the_one_sent(scripted, store):
    server = scripted(lambda p: "fine")
    host_url = server.base_url.replace("http://", "http://judge:url-secret@")
    backend = OpenAICompatBackend("both", "m", base_url=host_url, api_key=KEY, max_retries=0)
    completion, _ = await CallCache(store).complete(backend, user("hi"))
    await backend.aclose()
    assert completion.text == "fine"
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"


def test_split_userinfo_keeps_host_port_path_and_decodes_escapes():
    assert split_userinfo("http://u:p%40ss@127.0.0.1:8000/v1") == ("http://127.0.0.1:8000/v1", ("u", "p@ss"))
    assert split_userinfo("http://[::1]:9/v1")[1] is None
    assert split_userinfo("https://user:pw@[::1]:9/v1") == ("https://[::1]:9/v1", ("user", "pw"))


def test_a_secret_in_any_log_record_is_blanked(caplog):
    register(KEY)
    logger = logging.getLogger("httpcore.http11")
    handler = caplog.handler
    handler.addFilter(RedactingFilter())
    try:
        with caplog.at_level(logging.DEBUG, logger="httpcore.http11"):
            logger.debug("receive_response_headers.complete return_value=%r", [(b"authorization", f"Bearer {KEY}".encode())])
            try:
                raise RuntimeError(f"boom {KEY}")
            except RuntimeError:
                logger.exception("failed")
    finally:
        handler.removeFilter(handler.filters[-1])
    text = caplog.text
    assert "receive_response_headers" in text and "[redacted]" in text and "boom" in text
    assert KEY not in text
