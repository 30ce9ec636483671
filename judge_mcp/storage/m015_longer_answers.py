"""Migration m015: which answer of a pairwise verdict is longer, kept on its facts row (in a module of its own, listed
in migrations.MIGRATIONS like every other)."""

from __future__ import annotations

from judge_mcp.storage.engine import Tx

# A judged answer's length in characters, from a verdict row `v`'s inputs: the text itself when it is inline, else the
# `chars` of the text stored once under the hash its `text_refs` lists (storage/texts.py); NULL when the answer is not
# a text (a trajectory), as verdict_facts.written_row has it. The answer's input key is spelled in by `_sql`.
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


def _sql(dialect: str, tools: tuple[str, ...], answers: tuple[str, str]) -> str:
    a, b = (_LENGTH[dialect].format(key=key) for key in answers)
    names = ", ".join(f"'{tool}'" for tool in tools)
    return (
        "UPDATE verdict_facts SET longer_answer = (SELECT CASE WHEN x.a > x.b THEN 'A' WHEN x.b > x.a THEN 'B' END"
        f" FROM (SELECT {a} AS a, {b} AS b {_FROM[dialect]}) x)"
        f" WHERE part = 0 AND verdict_id IN (SELECT id FROM verdicts WHERE tool IN ({names}))"
    )


def m015_longer_answers(tx: Tx) -> None:
    """Part 0 of each verdict's facts row says which of a pairwise verdict's two answers (compare_pair, lwe_judge) is
    longer in characters (`longer_answer`: "A", "B"; NULL for equal lengths, answers that are not texts and other
    tools), so judge_stats can set the labels' share of longer answers beside the verdicts' (stats/agreement.py).
    Written by the verdict's own transaction from now on (verdict_stats.add); the verdicts already logged are
    backfilled here from their stored inputs, in one statement inside the migration's transaction (all or nothing)."""
    # lazy: loaded only where this migration runs
    from judge_mcp.storage.verdict_facts import ANSWERS, PAIR_TOOLS

    assert all(name.isidentifier() for name in (*PAIR_TOOLS, *ANSWERS))  # spelled into the SQL
    if "longer_answer" not in tx.columns("verdict_facts"):
        tx.execute("ALTER TABLE verdict_facts ADD COLUMN longer_answer TEXT")
    tx.execute(_sql(tx.dialect.name, PAIR_TOOLS, ANSWERS))
