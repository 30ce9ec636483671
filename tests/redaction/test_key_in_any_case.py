"""A key echoed in another letter case or encoding (issue 46, break 5): a backend that echoes its API key upper-cased in
a normal reply must not get it into the database's call records, the cached answer or a stored text; nor may any form
of it reach a row through any write (the engines blank every registered credential out of every value written).
(Redaction's linear time on near-misses of these forms: testkit/hostile_texts.py's units, tests/methods/test_linear_text.py.)"""

from __future__ import annotations

import base64
import html
import json
import urllib.parse
from pathlib import Path

import pytest
from mcp import Client

from judge_mcp.redaction import REDACTED, redact, register
from judge_mcp.storage.verdict_log import VerdictLog
from testkit.scripted_judges import PAIR, UniversalJudge
from tests.engines import on_both_engines
from tests.helpers import as_reply

KEY = "sk-case-Echo-4b7d9e21c0aa55"


def case_forms(key: str) -> dict[str, str]:
    return {
        "upper": key.upper(),
        "lower": key.lower(),
        "swapped": key.swapcase(),
        "upper, percent-encoded": urllib.parse.quote(key.upper(), safe=""),
        "percent-encoded all, lower hex, upper key": "".join(f"%{b:02x}" for b in key.upper().encode()),
        "upper, base64": base64.b64encode(key.upper().encode()).decode(),
        "lower, base64 shifted": base64.b64encode(b"q" + key.lower().encode()).decode(),
        "upper, hex": key.upper().encode().hex(),
        "upper, reversed": key.upper()[::-1],
        "html decimal": "".join(f"&#{ord(c)};" for c in key),
        "html hex, upper": "".join(f"&#X{ord(c):X};" for c in key),
        "html escaped by the standard library": html.escape(key.upper()).replace("-", "&#45;"),
        "upper, \\u-escaped": "".join(f"\\u{ord(c):04x}" for c in key.upper()),
    }


@pytest.mark.parametrize("name", list(case_forms(KEY)))
def test_a_key_in_any_case_and_encoding_is_redacted(name: str) -> None:
    echoed = case_forms(KEY)[name]
    text = redact(f"the server said: {echoed} (end)", [KEY])
    if "shifted" in name:  # the characters that depend on the key alone are blanked; the shift's edges may stay
        assert REDACTED in text and echoed[2:-3] not in text, text
    else:
        assert text == f"the server said: {REDACTED} (end)", text


def _echoing(key: str):
    """A judge that answers correctly and adds the key upper-cased to every answer (a normal 200 reply)."""
    judge = UniversalJudge()

    def respond(payload):
        reply = as_reply(judge(payload))
        reply.content = f"{reply.content}\n(debug: authorised with {key.upper()})"
        return reply

    return respond


def _all_rows(db: Path) -> str:
    import sqlite3
    from judge_mcp.storage import texts

    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
        bodies = [texts.unpack(row[0]) for row in conn.execute("SELECT body FROM text_bodies")]
    return dump + "\n".join(bodies)


async def test_an_upper_cased_echo_never_reaches_the_call_records_nor_the_cache(mcp_app, tmp_path: Path) -> None:
    server, backend = mcp_app(_echoing(KEY), JUDGE_MCP_API_KEY=KEY)
    async with Client(server) as client:
        judged = await client.call_tool("compare_pair", PAIR)
        long_args = {**PAIR, "response_b": PAIR["response_b"] + " " + "detail " * 400}  # a long text: stored in `texts`
        again = await client.call_tool("compare_pair", long_args)
    assert not judged.is_error and not again.is_error
    assert backend.headers[0]["authorization"] == f"Bearer {KEY}"
    stored = _all_rows(tmp_path / "judge.db")
    assert "debug: authorised with" in stored and REDACTED in stored  # the answers are there, the key is not
    assert KEY.lower() not in stored.lower()
    assert KEY.lower() not in json.dumps(judged.structured_content).lower()


@on_both_engines
def test_no_write_puts_a_registered_key_into_a_row_whatever_wrote_it(store) -> None:
    """The engines' last line: a value reaching a write with the key in it (a plain column, a JSON column, a long
    text) is stored with the key blanked out."""
    register(KEY)
    calls = [{"purpose": "p", "text": f"echo {KEY.upper()} " + "x" * 3000, "note": KEY.swapcase()}]
    VerdictLog(store).log("compare_pair", "b", KEY.lower(), {"prompt": "p"}, {"winner": "A"}, {"calls": 1}, calls, verdict_id="v1")
    row = VerdictLog(store).recent()[0]
    assert KEY.lower() not in json.dumps(row).lower() and row["model"] == REDACTED
    assert row["calls"][0]["text"].startswith(f"echo {REDACTED} x") and row["calls"][0]["note"] == REDACTED
