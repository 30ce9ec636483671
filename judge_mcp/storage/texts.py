"""Long texts stored once: the `texts` and `text_bodies` tables (migrations.m010_texts), keyed by the SHA-256 of the
text.

A text of at least LONG characters is kept here once, zlib-compressed, and referred to by its hash from every place
that keeps it: a model reply in the call cache's answer (`call_cache.response`) and in the verdict's call record
(`verdicts.calls`), the judged texts in the verdict's inputs (its top-level strings), LWE's texts in the verdict's
output (`eval_prompt`, `judgment`, `feedback`) and in the session's feedback buffer (`lwe_feedback`, which also keeps
the judged pair). Such an item lists the fields it no longer holds under REFS
(`"text_refs": {field: hash}`). A shorter text stays inline (a reference and a row here cost about as much as the
text). Readers put the texts back (`resolve`), so every item reads as it always did; rows written before this table
existed keep their inline texts and read unchanged.

Retention: each text records (in `texts`, a small row apart from its body in `text_bodies`, so a new use never
rewrites the body) when a cache row (`cache_used_at`), a verdict (`verdict_used_at`) and an LWE session
(`lwe_used_at`) last took it, in the same transaction as that row. Every row that refers to a text was written at or
before those times, so a text whose times are older than the retention cutoffs (or absent), and that no LWE session
took (they are never deleted), is referred to by no row left (`delete_unused`).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from typing import Any

from judge_mcp.redaction import scrub
from judge_mcp.storage.engine import Engine, Tx

LONG = 256  # characters: a reply this long or longer is stored once, in `texts`; a shorter one inline where used
FAST_ABOVE = 1 << 20  # bytes: a text larger than this is compressed at zlib's fastest level (it holds the write lane)
KEYS_PER_READ = 500

# which row took a text: the column recording when
USED_AT = {"cache": "cache_used_at", "verdict": "verdict_used_at", "lwe": "lwe_used_at"}
REFS = "text_refs"  # in an item whose long texts are stored here: {field: hash}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pack(text: str) -> bytes:
    data = text.encode("utf-8")
    return zlib.compress(data, 1 if len(data) > FAST_ABOVE else 6)


def unpack(body: bytes | memoryview) -> str:
    return zlib.decompress(bytes(body)).decode("utf-8")


def upsert_sql(use: str) -> list[str]:
    """The statements that store one text, or its time of use when it is stored already (parameters: hash,
    characters and time for the first; hash and packed body for the second)."""
    col = USED_AT[use]
    return [
        f"INSERT INTO texts (sha256, chars, {col}) VALUES (?, ?, ?) ON CONFLICT (sha256) DO UPDATE SET {col} = excluded.{col}",
        "INSERT INTO text_bodies (sha256, body) VALUES (?, ?) ON CONFLICT (sha256) DO NOTHING",
    ]


def upsert_statements(text: str, use: str, now: float) -> tuple[str, list[tuple[str, list[Any]]]]:
    """(hash, the statements that store `text` as (SQL, parameters)), for a caller that runs them itself."""
    text = scrub(text)
    digest = sha256(text)
    uses, body = upsert_sql(use)
    return digest, [(uses, [digest, len(text), now]), (body, [digest, pack(text)])]


def put(tx: Tx, text: str, use: str, now: float) -> str:
    """Inside the caller's transaction: store `text` once (or record its use by a `use` row at `now`); its hash.
    A text stored already is neither compressed nor written again: only its small row of times changes. Every
    registered credential is blanked out first (redaction.scrub)."""
    text = scrub(text)
    digest = sha256(text)
    if tx.execute(f"UPDATE texts SET {USED_AT[use]} = ? WHERE sha256 = ?", [now, digest]) == 0:
        uses, body = upsert_sql(use)
        tx.execute(uses, [digest, len(text), now])
        tx.execute(body, [digest, pack(text)])
    return digest


def shelve(tx: Tx, item: dict[str, Any], fields: tuple[str, ...], use: str, now: float) -> dict[str, Any]:
    """A copy of `item` (a cache answer, a call record, a verdict's output, an LWE feedback item) whose long string
    `fields` are stored here and listed by hash under REFS instead; `item` itself when none is long."""
    long = [f for f in fields if isinstance(item.get(f), str) and len(item[f]) >= LONG]
    if not long:
        return item
    out = {k: v for k, v in item.items() if k not in long}
    out[REFS] = {f: put(tx, item[f], use, now) for f in long}
    return out


def messages_in(item: Any) -> list[dict[str, Any]]:
    """The chat messages inside an item's list values (a conversation or trajectory, or a list of them: options,
    responses): the dicts carrying a `role`."""
    found: list[dict[str, Any]] = []
    stack = [v for v in item.values() if isinstance(v, list)] if isinstance(item, dict) else []
    while stack:
        for value in stack.pop():
            if isinstance(value, list):
                stack.append(value)
            elif isinstance(value, dict) and "role" in value:
                found.append(value)
    return found


def shelve_messages(tx: Tx, item: dict[str, Any], use: str, now: float) -> dict[str, Any]:
    """A copy of `item` (a verdict's inputs) in which every message inside its list values has its long `content`
    stored here (see shelve); `item` itself when it holds no list."""
    def shelved(value: Any) -> Any:
        if isinstance(value, list):
            return [shelved(v) for v in value]
        if isinstance(value, dict) and "role" in value:
            return shelve(tx, value, ("content",), use, now)
        return value

    if not any(isinstance(v, list) for v in item.values()):
        return item
    return {k: shelved(v) for k, v in item.items()}


def read_many(store: Engine | Tx, digests: Iterable[str]) -> dict[str, str]:
    """The texts among `digests`, by hash (missing ones are left out)."""
    found: dict[str, str] = {}
    unique = list(dict.fromkeys(digests))
    for start in range(0, len(unique), KEYS_PER_READ):
        chunk = unique[start : start + KEYS_PER_READ]
        marks = ",".join("?" * len(chunk))
        for row in store.query(f"SELECT sha256, body FROM text_bodies WHERE sha256 IN ({marks})", chunk):
            found[row["sha256"]] = unpack(row["body"])
    return found


def resolve(store: Engine | Tx, items: Iterable[Any]) -> None:
    """Put the stored texts of `items` back in place, each under its field (one read for all of them); REFS is
    removed from an item whose texts are all found, and kept, listing the missing ones, from one whose are not."""
    shelved = [item for item in items if isinstance(item, dict) and isinstance(item.get(REFS), dict)]
    if not shelved:
        return
    found = read_many(store, [digest for item in shelved for digest in item[REFS].values()])
    for item in shelved:
        missing = {}
        for field, digest in item.pop(REFS).items():
            if digest in found:
                item[field] = found[digest]
            else:
                missing[field] = digest
        if missing:
            item[REFS] = missing


def delete_unused(tx: Tx, cache_cutoff: float | None, verdict_cutoff: float | None) -> int:
    """Inside retention's transaction, after its deletes: the texts no row refers to any more. A text last taken by
    a cache row before `cache_cutoff` and by a verdict before `verdict_cutoff` (None: that table keeps its rows,
    so only texts it never took qualify) is deleted. How many."""
    if cache_cutoff is None and verdict_cutoff is None:
        return 0
    conditions: list[str] = []
    params: list[Any] = []
    conditions.append("lwe_used_at IS NULL")  # LWE sessions are never deleted, nor the texts they keep
    for col, cutoff in (("cache_used_at", cache_cutoff), ("verdict_used_at", verdict_cutoff)):
        if cutoff is None:
            conditions.append(f"{col} IS NULL")
        else:
            conditions.append(f"({col} IS NULL OR {col} < ?)")
            params.append(cutoff)
    deleted = tx.execute("DELETE FROM texts WHERE " + " AND ".join(conditions), params)
    # then the bodies left without their row: a use recorded meanwhile by another transaction kept its row (PostgreSQL
    # re-checks a row it waited for), so its body stays
    tx.execute("DELETE FROM text_bodies WHERE NOT EXISTS (SELECT 1 FROM texts t WHERE t.sha256 = text_bodies.sha256)")
    return deleted
