"""The pure helpers and SQL the migrations in migrations.py run, copied in as they were when each migration shipped,
so that no later edit of a repository or of the telemetry's facts changes how an old database is upgraded.

Frozen like the migrations themselves: never edited once released, and importing nothing of judge_mcp but the
engine seam's types (`tools/check_imports.py` holds migrations.py and this module to that). The live code these
were copied from (storage/verdict_facts.py, verdict_stats.py, verdict_log.py, lwe_sessions.py, option_pool.py,
tenancy.py) may change; a change that must reach old rows is a new migration.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from judge_mcp.storage.engine import Tx

# ---- m012_verdict_stats: the bias telemetry's tables, backfilled from the verdicts already logged -----------------
PAIR_TOOLS = ("compare_pair", "lwe_judge")  # the tools whose verdicts judge two answers (position, order, length)
ANSWERS = ("response_a", "response_b")  # those two answers' input keys
BROUGHT = ("criteria", "reference", "images", "conversation", "trajectory")
GROUP_KEY = ("backend", "model", "tool", "inputs")
RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)  # SQLite's INSERT ... RETURNING (PostgreSQL has it)
CHUNK = 200  # facts rows per multi-row INSERT
Key = tuple[str, str, str, str]  # (backend, model, tool, inputs)

# One page of the log, newest first, ids below the first parameter; every row (the tables have no tenant yet).
# Parameters: the pairwise tools (a JSON list), the first answer's input key and its key among the inputs'
# `text_refs` (as JSON paths in SQLite), the same three for the second answer, the id to read below, the page size.
STATS_PAGE = {
    "sqlite": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN json_valid(usage) THEN usage END AS usage,"
        " CASE WHEN json_valid(output) THEN json_remove(output, '$.eval_prompt', '$.judgment', '$.feedback', '$.text_refs') END AS output,"
        " CASE WHEN tool IN (SELECT value FROM json_each(?)) AND json_valid(inputs)"
        "  THEN COALESCE(length(json_extract(inputs, ?)), (SELECT chars FROM texts WHERE sha256 = json_extract(inputs, ?))) END AS len_a,"
        " CASE WHEN tool IN (SELECT value FROM json_each(?)) AND json_valid(inputs)"
        "  THEN COALESCE(length(json_extract(inputs, ?)), (SELECT chars FROM texts WHERE sha256 = json_extract(inputs, ?))) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND json_valid(calls) THEN"
        "  (SELECT json_group_array(json_extract(c.value, '$.purpose')) FROM json_each(verdicts.calls) AS c"
        "   WHERE json_extract(c.value, '$.purpose') LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " , CASE WHEN json_valid(inputs) THEN json_array("
        "  json_type(inputs, '$.criteria') IS NOT NULL OR json_type(inputs, '$.text_refs.criteria') IS NOT NULL,"
        "  json_type(inputs, '$.reference') IS NOT NULL OR json_type(inputs, '$.text_refs.reference') IS NOT NULL,"
        "  json_type(inputs, '$.images') IS NOT NULL OR json_type(inputs, '$.response_a_images') IS NOT NULL"
        "  OR json_type(inputs, '$.response_b_images') IS NOT NULL OR json_type(inputs, '$.option_images') IS NOT NULL,"
        "  json_type(inputs, '$.prompt') = 'array' OR json_type(inputs, '$.instruction') = 'array' OR json_type(inputs, '$.context') = 'array',"
        "  json_type(inputs, '$.response_a') = 'array' OR json_type(inputs, '$.response_b') = 'array'"
        "  OR EXISTS (SELECT 1 FROM json_each(inputs, '$.options') AS o WHERE o.type = 'array')"
        "  OR EXISTS (SELECT 1 FROM json_each(inputs, '$.responses') AS r WHERE r.type = 'array')) END AS brought"
        " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?"
    ),
    # judge_mcp_json(text): the text as jsonb, or NULL when it is not valid JSON (m007_json_or_null)
    "postgresql": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN judge_mcp_json(usage) IS NOT NULL THEN usage END AS usage,"
        " CASE WHEN jsonb_typeof(judge_mcp_json(output)) = 'object'"
        "  THEN (judge_mcp_json(output) - 'eval_prompt' - 'judgment' - 'feedback' - 'text_refs')::text"
        "  WHEN judge_mcp_json(output) IS NOT NULL THEN output END AS output,"
        " CASE WHEN tool IN (SELECT jsonb_array_elements_text(?::jsonb)) AND jsonb_typeof(judge_mcp_json(inputs)) = 'object'"
        "  THEN COALESCE(length(judge_mcp_json(inputs) ->> ?),"
        "   (SELECT chars FROM texts WHERE sha256 = judge_mcp_json(inputs) -> 'text_refs' ->> ?)) END AS len_a,"
        " CASE WHEN tool IN (SELECT jsonb_array_elements_text(?::jsonb)) AND jsonb_typeof(judge_mcp_json(inputs)) = 'object'"
        "  THEN COALESCE(length(judge_mcp_json(inputs) ->> ?),"
        "   (SELECT chars FROM texts WHERE sha256 = judge_mcp_json(inputs) -> 'text_refs' ->> ?)) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND jsonb_typeof(judge_mcp_json(calls)) = 'array' THEN"
        "  (SELECT COALESCE(jsonb_agg(c.value ->> 'purpose'), '[]'::jsonb)::text FROM jsonb_array_elements(judge_mcp_json(verdicts.calls)) AS c"
        "   WHERE jsonb_typeof(c.value) = 'object' AND c.value ->> 'purpose' LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " , CASE WHEN jsonb_typeof(judge_mcp_json(inputs)) = 'object' THEN jsonb_build_array("
        "  (judge_mcp_json(inputs) -> 'criteria') IS NOT NULL OR (judge_mcp_json(inputs) -> 'text_refs' -> 'criteria') IS NOT NULL,"
        "  (judge_mcp_json(inputs) -> 'reference') IS NOT NULL OR (judge_mcp_json(inputs) -> 'text_refs' -> 'reference') IS NOT NULL,"
        "  (judge_mcp_json(inputs) -> 'images') IS NOT NULL OR (judge_mcp_json(inputs) -> 'response_a_images') IS NOT NULL"
        "  OR (judge_mcp_json(inputs) -> 'response_b_images') IS NOT NULL OR (judge_mcp_json(inputs) -> 'option_images') IS NOT NULL,"
        "  jsonb_typeof(judge_mcp_json(inputs) -> 'prompt') = 'array' OR jsonb_typeof(judge_mcp_json(inputs) -> 'instruction') = 'array'"
        "  OR jsonb_typeof(judge_mcp_json(inputs) -> 'context') = 'array',"
        "  jsonb_typeof(judge_mcp_json(inputs) -> 'response_a') = 'array' OR jsonb_typeof(judge_mcp_json(inputs) -> 'response_b') = 'array'"
        "  OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(judge_mcp_json(inputs) -> 'options') = 'array'"
        "   THEN judge_mcp_json(inputs) -> 'options' ELSE '[]'::jsonb END) AS o WHERE jsonb_typeof(o.value) = 'array')"
        "  OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(judge_mcp_json(inputs) -> 'responses') = 'array'"
        "   THEN judge_mcp_json(inputs) -> 'responses' ELSE '[]'::jsonb END) AS r WHERE jsonb_typeof(r.value) = 'array')"
        " )::text END AS brought"
        " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?"
    ),
}


def stats_page(tx: Tx, before_id: int | None, limit: int) -> list[dict[str, Any]]:
    """One page of the whole log (every row), newest first, ids below `before_id`; JSON columns as text."""
    tools, (a, b) = json.dumps(list(PAIR_TOOLS)), ANSWERS
    before = before_id if before_id is not None else 2**63 - 1
    a_ref, b_ref = a, b  # a judged answer stored in `texts`: its length is the text's `chars` there
    if tx.dialect.name == "sqlite":  # a JSON path; PostgreSQL's ->> takes the key itself
        a, b, a_ref, b_ref = f"$.{a}", f"$.{b}", f"$.text_refs.{a}", f"$.text_refs.{b}"
    return tx.query(STATS_PAGE[tx.dialect.name], [tools, a, a_ref, tools, b, b_ref, before, limit])


@dataclass
class Facts:
    first_picks: list[tuple[bool, float]] = field(default_factory=list)  # per parsed trial: (picked first shown, unbiased rate)
    orders_disagree: bool | None = None  # None: not both orders parsed (or no orders at all)
    answers: list[tuple[bool, bool | None]] = field(default_factory=list)  # per answer: (parsed, re-asked; None unknown)
    tie: bool | None = None  # None: the tool's tie is undefined for this verdict
    longer_won: bool | None = None  # None: not decided, equal lengths, or not pairwise


def _side(value: Any) -> str | None:
    return value if value in ("A", "B") else None


def _flag(value: Any) -> bool:
    return value is True or value == 1


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _pair_facts(output: dict[str, Any], lengths: tuple[int, int] | None) -> Facts:
    facts = Facts()
    by_order: dict[str, str] = {}
    for trial in _dicts(output.get("trials")):
        better, order = _side(trial.get("better")), trial.get("order")
        parsed = _flag(trial.get("parse_ok")) and better is not None
        facts.answers.append((parsed, _flag(trial.get("reasked"))))
        if parsed and order in ("AB", "BA"):
            facts.first_picks.append(((order == "AB") == (better == "A"), 0.5))
            by_order[order] = better  # type: ignore[assignment]  # parsed: `better` is "A" or "B"
    if len(by_order) == 2:
        facts.orders_disagree = by_order["AB"] != by_order["BA"]
    _winner_facts(facts, output, lengths)
    return facts


def _lwe_facts(output: dict[str, Any], lengths: tuple[int, int] | None, vanilla_reasks: set[str] | None) -> Facts:
    facts = Facts()
    vanilla = output.get("vanilla")
    if isinstance(vanilla, dict):
        ab, ba = _side(vanilla.get("ab")), _side(vanilla.get("ba"))
        for order, verdict in (("AB", ab), ("BA", ba)):
            reasked = None if vanilla_reasks is None else order in vanilla_reasks
            facts.answers.append((verdict is not None, reasked))
            if verdict is not None:
                facts.first_picks.append(((order == "AB") == (verdict == "A"), 0.5))
        if ab is not None and ba is not None:
            facts.orders_disagree = ab != ba
    if output.get("path") == "meta_prompt":
        winner = _side(output.get("winner"))
        parsed = _flag(output.get("parse_ok", winner is not None)) and winner is not None
        facts.answers.append((parsed, _flag(output.get("reasked"))))
        if parsed:
            facts.first_picks.append((winner == "A", 0.5))
    _winner_facts(facts, output, lengths)
    return facts


def _winner_facts(facts: Facts, output: dict[str, Any], lengths: tuple[int, int] | None) -> None:
    winner = _side(output.get("winner"))
    facts.tie = winner is None
    if winner is not None and lengths is not None and lengths[0] != lengths[1]:
        facts.longer_won = (winner == "A") == (lengths[0] > lengths[1])


def _grade_facts(output: dict[str, Any]) -> Facts:
    facts = Facts()
    parsed_any = False
    for trial in _dicts(output.get("trials")):
        position, shown = trial.get("selected_position"), trial.get("order")
        parsed = _flag(trial.get("parse_ok")) and isinstance(position, int) and not isinstance(position, bool)
        facts.answers.append((parsed, _flag(trial.get("reasked"))))
        if parsed and isinstance(shown, list) and shown:
            facts.first_picks.append((position == 0, 1 / len(shown)))
        parsed_any = parsed_any or parsed
    if parsed_any:
        tied = output.get("tied_indices")
        facts.tie = isinstance(tied, list) and len(tied) > 1
    return facts


def _flip_facts(output: dict[str, Any]) -> Facts:
    facts = Facts()
    for item in _dicts(output.get("results")):
        facts.answers.append((_flag(item.get("parse_ok")), _flag(item.get("reasked"))))
    if any(parsed for parsed, _ in facts.answers):
        tied = output.get("tied_best")
        facts.tie = isinstance(tied, list) and len(tied) > 1
    return facts


def _score_facts(output: dict[str, Any]) -> Facts:
    facts = Facts()
    for item in _dicts(output.get("scores")):
        samples, reasked = item.get("samples"), item.get("reasked")
        count = reasked if isinstance(reasked, int) and not isinstance(reasked, bool) else 0
        facts.answers.extend((v is not None, k < count) for k, v in enumerate(samples if isinstance(samples, list) else []))
    return facts


def _generic_facts(output: dict[str, Any]) -> Facts:
    facts = Facts()
    for trial in _dicts(output.get("trials")):
        if "parse_ok" in trial:
            facts.answers.append((_flag(trial.get("parse_ok")), _flag(trial.get("reasked"))))
    return facts


def _facts_of(row: dict[str, Any]) -> Facts:
    tool, output, lengths = row["tool"], row["output"], row.get("lengths")
    if tool == "compare_pair":
        return _pair_facts(output, lengths)
    if tool == "lwe_judge":
        return _lwe_facts(output, lengths, row.get("vanilla_reasks"))
    if tool == "grade_score_options":
        return _grade_facts(output)
    if tool == "infer_instruction_reward":
        return _flip_facts(output)
    if tool == "score_response":
        return _score_facts(output)
    return _generic_facts(output)


def _panel_members(row: dict[str, Any]) -> list[dict[str, Any]]:
    members = []
    for member in _dicts(row["output"].get("panel")):
        backend, model = member.get("backend"), member.get("model")
        if isinstance(backend, str) and isinstance(model, str) and isinstance(member.get("trials"), list):
            usage = member.get("usage") if isinstance(member.get("usage"), dict) else {}
            members.append({**row, "backend": backend, "model": model, "output": member, "usage": usage, "vanilla_reasks": None})
    return members


def _brought_label(flags: Any) -> str:
    names = [name for name, flag in zip(BROUGHT, flags) if flag] if isinstance(flags, (list, tuple)) else []
    return "+".join(names) or "text"


MEANS = ("calls", "cached_calls", "latency_ms")  # the usage values averaged over a group's verdicts


@dataclass
class Counts:
    """What one verdict adds to its group; the field names are the aggregate tables' column names."""

    verdicts: int = 0
    first: int = 0
    picks: int = 0
    unbiased_sum: float = 0.0
    disagree: int = 0
    both_orders: int = 0
    unparsed: int = 0
    answers: int = 0
    reasked: int = 0
    reask_known: int = 0
    ties: int = 0
    tie_of: int = 0
    longer: int = 0
    decided: int = 0
    calls_sum: float = 0.0
    calls_n: int = 0
    cached_calls_sum: float = 0.0
    cached_calls_n: int = 0
    latency_ms_sum: float = 0.0
    latency_ms_n: int = 0

    def add(self, facts: Facts, usage: Mapping[str, Any]) -> None:
        self.verdicts += 1
        for first, unbiased in facts.first_picks:
            self.picks += 1
            self.first += first
            self.unbiased_sum += unbiased
        if facts.orders_disagree is not None:
            self.both_orders += 1
            self.disagree += facts.orders_disagree
        for parsed, reasked in facts.answers:
            self.answers += 1
            self.unparsed += not parsed
            if reasked is not None:
                self.reask_known += 1
                self.reasked += reasked
        if facts.tie is not None:
            self.tie_of += 1
            self.ties += facts.tie
        if facts.longer_won is not None:
            self.decided += 1
            self.longer += facts.longer_won
        for key in MEANS:
            value = usage.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(self, f"{key}_sum", getattr(self, f"{key}_sum") + value)
                setattr(self, f"{key}_n", getattr(self, f"{key}_n") + 1)

    def values(self) -> list[Any]:
        return list(_VALUES(self))


COLUMN_TYPES = {f.name: (float if f.type in ("float", float) else int) for f in fields(Counts)}
COLUMNS = tuple(COLUMN_TYPES)
_VALUES = operator.attrgetter(*COLUMNS)
REAL_COLUMNS = tuple(name for name, kind in COLUMN_TYPES.items() if kind is float)
FACT_COLUMNS = COLUMNS[1:]  # a facts row is one verdict of its group: no `verdicts` column


def contributions(row: dict[str, Any]) -> list[tuple[Key, Counts]] | None:
    """What a decoded row adds (the row first, then each panel member with trials); None: its output is unreadable."""
    if not isinstance(row.get("output"), dict):
        return None
    label = _brought_label(row.get("brought"))
    parts = []
    for one in [row, *_panel_members(row)]:
        counts = Counts()
        usage = one.get("usage")
        counts.add(_facts_of(one), usage if isinstance(usage, dict) else {})
        parts.append(((str(one["backend"]), str(one["model"]), str(one["tool"]), label), counts))
    return parts


def row_from_json(row: dict[str, Any]) -> dict[str, Any]:
    """A `stats_page` row with its JSON columns decoded (an unreadable output becomes None: skipped)."""
    def load(text: Any) -> Any:
        try:
            return json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None

    lengths = (row["len_a"], row["len_b"]) if row.get("len_a") is not None and row.get("len_b") is not None else None
    reasks = load(row.get("vanilla_reasks"))
    return {
        "id": row["id"], "tool": row["tool"], "backend": row["backend"], "model": row["model"], "created_at": row["created_at"],
        "output": load(row.get("output")), "usage": load(row.get("usage")) or {}, "lengths": lengths, "brought": load(row.get("brought")),
        "vanilla_reasks": {p.split(":")[2] for p in reasks if isinstance(p, str) and p.count(":") >= 3} if isinstance(reasks, list) else None,
    }


def create_stats_tables(tx: Tx) -> None:
    """stats_groups, verdict_facts, stats_totals and their index (IF NOT EXISTS), as m012 made them."""
    def kind(name: str) -> str:
        return tx.dialect.real if name in REAL_COLUMNS else "INTEGER"

    counters = ", ".join(f"{name} {kind(name)} NOT NULL DEFAULT 0" for name in ("logged", *COLUMNS))
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS stats_groups (
            id {tx.dialect.auto_id}, backend TEXT NOT NULL, model TEXT NOT NULL, tool TEXT NOT NULL, inputs TEXT NOT NULL,
            {counters}, UNIQUE (backend, model, tool, inputs))"""
    )
    facts = ", ".join(f"{name} {kind(name)} NOT NULL DEFAULT 0" for name in FACT_COLUMNS)
    clustered = " WITHOUT ROWID" if tx.dialect.name == "sqlite" else ""  # SQLite: rows stored in key order
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS verdict_facts (
            verdict_id BIGINT NOT NULL, part INTEGER NOT NULL, group_id BIGINT, created_at {tx.dialect.real} NOT NULL,
            {facts}, PRIMARY KEY (verdict_id, part)){clustered}"""
    )
    tx.execute("CREATE INDEX IF NOT EXISTS verdict_facts_created ON verdict_facts(created_at)")
    tx.execute("CREATE TABLE IF NOT EXISTS stats_totals (name TEXT PRIMARY KEY, n INTEGER NOT NULL)")


_NAMES = ("logged", *COLUMNS)
_UPSERT = (
    f"INSERT INTO stats_groups ({', '.join(GROUP_KEY)}, {', '.join(_NAMES)}) VALUES ({', '.join('?' * (len(GROUP_KEY) + len(_NAMES)))})"
    f" ON CONFLICT ({', '.join(GROUP_KEY)}) DO UPDATE SET {', '.join(f'{name} = stats_groups.{name} + excluded.{name}' for name in _NAMES)}"
)


def _plus(a: Counts, b: Counts) -> Counts:
    out = Counts()
    for name, x, y in zip(COLUMNS, a.values(), b.values()):
        setattr(out, name, COLUMN_TYPES[name](x + y))
    return out


def _group(tx: Tx, key: Key, counts: Counts, logged: int) -> int:
    """Add `counts` (and `logged`) to the group's counters, making its row if new; its id."""
    if tx.dialect.name == "postgresql" or RETURNING:
        return int(tx.query(_UPSERT + " RETURNING id", [*key, logged, *counts.values()])[0]["id"])
    tx.execute(_UPSERT, [*key, logged, *counts.values()])
    rows = tx.query("SELECT id FROM stats_groups WHERE backend = ? AND model = ? AND tool = ? AND inputs = ?", [*key])
    return int(rows[0]["id"])


def add_many(tx: Tx, verdicts: Iterable[tuple[int, float, list[tuple[Key, Counts]] | None]]) -> None:
    """The facts rows and group counters of a page of verdicts (each group's counters changed once), and the skipped."""
    totals: dict[Key, tuple[Counts | None, int]] = {}
    pending: list[tuple[int, int, Key | None, float, Counts]] = []
    skipped = 0
    for verdict_id, created_at, parts in verdicts:
        if parts is None:
            skipped += 1
            pending.append((verdict_id, 0, None, created_at, Counts()))
            continue
        for number, (key, counts) in enumerate(parts):
            total, logged = totals.get(key, (None, 0))
            totals[key] = (counts if total is None else _plus(total, counts), logged + (number == 0))
            pending.append((verdict_id, number, key, created_at, counts))
    ids = {key: _group(tx, key, counts or Counts(), logged) for key, (counts, logged) in sorted(totals.items())}  # sorted: one lock order
    rows = [(v, p, None if key is None else ids[key], at, *c.values()[1:]) for v, p, key, at, c in pending]
    one = "(" + ", ".join("?" * (4 + len(FACT_COLUMNS))) + ")"
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        tx.execute(
            f"INSERT INTO verdict_facts (verdict_id, part, group_id, created_at, {', '.join(FACT_COLUMNS)}) VALUES {', '.join([one] * len(chunk))}",
            [value for row in chunk for value in row],
        )
    if skipped:
        tx.execute("INSERT INTO stats_totals (name, n) VALUES ('skipped', ?) ON CONFLICT (name) DO UPDATE SET n = stats_totals.n + excluded.n", [skipped])


# ---- m013_tenants: who owns the rows from before tenants, and the keys that carry a tenant ------------------------
TENANT_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def legacy_tenant(engine: str) -> str:
    """The tenant of the rows from before tenants: `local` in SQLite, `default` in PostgreSQL."""
    return "default" if engine == "postgresql" else "local"


def session_key(tenant: str, session: str) -> str:
    """An LWE session's key: its tenant and its name."""
    return f"{tenant}/{session}"


def instruction_hash(instruction: str, tenant: str) -> str:
    """An instruction's key in `tenant`'s option pool."""
    return hashlib.sha256(f"{tenant}\x00{instruction.strip()}".encode("utf-8")).hexdigest()


def key_groups_by_tenant(tx: Tx, owner: str) -> None:
    """`stats_groups` gains `tenant` (its rows `owner`'s) and its unique key becomes (tenant, backend, model, tool,
    inputs). SQLite cannot drop a constraint: the table is made again with the same ids."""
    if "tenant" in tx.columns("stats_groups"):
        return
    key = ", ".join(("tenant", *GROUP_KEY))
    if tx.dialect.name == "postgresql":
        tx.execute(f"ALTER TABLE stats_groups ADD COLUMN tenant TEXT NOT NULL DEFAULT '{owner}'")
        for row in tx.query("SELECT conname FROM pg_constraint WHERE conrelid = 'stats_groups'::regclass AND contype = 'u'"):
            tx.execute(f'ALTER TABLE stats_groups DROP CONSTRAINT "{row["conname"]}"')
        tx.execute(f"CREATE UNIQUE INDEX stats_groups_tenant_key ON stats_groups({key})")
        return
    names = ", ".join((*GROUP_KEY, "logged", *COLUMNS))
    counters = ", ".join(f"{name} {tx.dialect.real if name in REAL_COLUMNS else 'INTEGER'} NOT NULL DEFAULT 0" for name in ("logged", *COLUMNS))
    tx.execute("ALTER TABLE stats_groups RENAME TO stats_groups_m012")
    tx.execute(
        f"""CREATE TABLE stats_groups (
            id {tx.dialect.auto_id}, tenant TEXT NOT NULL, backend TEXT NOT NULL, model TEXT NOT NULL, tool TEXT NOT NULL,
            inputs TEXT NOT NULL, {counters}, UNIQUE ({key}))"""
    )
    tx.execute(f"INSERT INTO stats_groups (id, tenant, {names}) SELECT id, ?, {names} FROM stats_groups_m012", [owner])
    tx.execute("DROP TABLE stats_groups_m012")


# ---- m015_longer_answers: the longer of a pairwise verdict's two answers, backfilled ------------------------------
# A judged answer's length in characters, from a verdict row `v`'s inputs: the text itself when it is inline, else the
# `chars` of the text stored once under the hash its `text_refs` lists; NULL when the answer is not a text (a
# trajectory). The answer's input key is spelled in by `longer_answers_sql`.
_LENGTH = {
    "sqlite": "CASE WHEN json_type(v.inputs, '$.{key}') = 'text' THEN length(json_extract(v.inputs, '$.{key}'))"
    " WHEN json_type(v.inputs, '$.{key}') IS NULL THEN (SELECT chars FROM texts WHERE sha256 = json_extract(v.inputs, '$.text_refs.{key}')) END",
    "postgresql": "CASE WHEN jsonb_typeof(j.doc -> '{key}') = 'string' THEN length(j.doc ->> '{key}')"
    " WHEN j.doc -> '{key}' IS NULL THEN (SELECT chars FROM texts WHERE sha256 = j.doc -> 'text_refs' ->> '{key}') END",
}
# the verdict row `v` (with its inputs as jsonb `j.doc` in PostgreSQL), only where its inputs are a JSON object
_FROM = {
    "sqlite": "FROM verdicts v WHERE v.id = verdict_facts.verdict_id AND CASE WHEN json_valid(v.inputs) THEN json_type(v.inputs) END = 'object'",
    "postgresql": "FROM verdicts v CROSS JOIN LATERAL (SELECT judge_mcp_json(v.inputs) AS doc) j"
    " WHERE v.id = verdict_facts.verdict_id AND jsonb_typeof(j.doc) = 'object'",
}


def longer_answers_sql(dialect: str) -> str:
    """The one UPDATE that sets part 0's `longer_answer` of every pairwise verdict from its stored inputs."""
    a, b = (_LENGTH[dialect].format(key=key) for key in ANSWERS)
    names = ", ".join(f"'{tool}'" for tool in PAIR_TOOLS)
    return (
        "UPDATE verdict_facts SET longer_answer = (SELECT CASE WHEN x.a > x.b THEN 'A' WHEN x.b > x.a THEN 'B' END"
        f" FROM (SELECT {a} AS a, {b} AS b {_FROM[dialect]}) x)"
        f" WHERE part = 0 AND verdict_id IN (SELECT id FROM verdicts WHERE tool IN ({names}))"
    )
