"""Length bias against the caller's labels (judge_stats' agreement.length), on both engines: each pairwise verdict's
facts row says which answer is longer (written with the verdict; migrations' m015 backfills the verdicts logged
before), and judge_stats sets the labels' share of longer answers beside the verdicts' over the same labelled
verdicts, per tenant."""

from __future__ import annotations

from typing import Any

from judge_mcp import tenants
from judge_mcp.cli import stats_table as stats_text
from judge_mcp.stats import report as stats
from judge_mcp.storage import open_store
from judge_mcp.storage.engine import dumps
from judge_mcp.storage.label_rows import LabelTable
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.texts import LONG
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines


def _pair(store: Any, k: int, a: Any, b: Any, winner: str | None, label: str | None, *, tool: str = "compare_pair", tenant: str = "local") -> str:
    """Log a pairwise verdict of answers `a` and `b` naming `winner`, and label it `label` (None: unlabelled)."""
    verdict_id = f"{tenant}-{k:04d}"
    output = {"winner": winner, "trials": []}
    VerdictLog(store).log(tool, "default", "m", {"prompt": "Q?", "response_a": a, "response_b": b}, output, {}, [],
                          verdict_id=verdict_id, tenant=tenant)
    if label is not None:
        assert LabelTable(store, tenant).put(verdict_id, tool, label, "text", None) is False
    return verdict_id


def _length(store: Any, tenant: str = "local", tool: str = "compare_pair") -> Any:
    with tenants.acting(tenant):
        report = stats.from_store(store)
    return next(g.agreement.length for g in report.all_time.groups if g.tool == tool)


@on_both_engines
def test_a_judge_always_picking_the_longer_answer_against_labels_picking_it_half_the_time_has_length_bias_half(store) -> None:
    short, long = "s" * 5, "L" * 40
    for k in range(8):  # the longer answer alternates between A and B; the judge always names it; half the labels do
        a, b = (long, short) if k % 2 else (short, long)
        longer, shorter = ("A", "B") if k % 2 else ("B", "A")
        _pair(store, k, a, b, longer, longer if k < 4 else shorter)
    # left out of both shares: equal lengths, a verdict without a winner, a tie label, an unlabelled verdict
    _pair(store, 20, "x" * 9, "y" * 9, "A", "B")
    _pair(store, 21, short, long, None, "B")
    _pair(store, 22, short, long, "B", "tie")
    _pair(store, 23, short, long, "B", None)
    # long answers stored once in `texts` count by their length too: B (LONG + 50 chars) is longer, the label says A
    _pair(store, 24, "a" * LONG, "b" * (LONG + 50), "B", "A")
    # another tenant's labelled verdicts (the judge picks the shorter answer, the labels the longer) stay its own
    for k in range(3):
        _pair(store, k, short, long, "A", "B", tenant="other")
    length = _length(store)
    # with their Wilson intervals: 9 of 9 [z^2/(9 + z^2) below 1 = 0.7009, 1]; 4 of 9 by hand [0.1888, 0.7333]
    assert length.longer_picked.model_dump() == {"rate": 1.0, "count": 9, "of": 9, "ci": [0.7009, 1.0]}
    assert length.longer_labels.model_dump() == {"rate": 0.4444, "count": 4, "of": 9, "ci": [0.1888, 0.7333]}
    assert length.bias == 0.5556  # (9 - 4) / 9
    other = _length(store, "other")
    assert (other.longer_picked.count, other.longer_labels.count, other.longer_picked.of, other.bias) == (0, 3, 3, -1.0)
    with tenants.acting("local"):
        assert stats_text.render_stats(stats.from_store(store)).split("agreement with human labels")[1].count("0.56 (1.00 - 0.44 of 9)") == 1


@on_both_engines
def test_the_set_from_the_brief_gives_exactly_one_half(store) -> None:
    for k in range(10):
        a, b = ("L" * (20 + k), "s") if k % 2 else ("s", "L" * (20 + k))
        longer, shorter = ("A", "B") if k % 2 else ("B", "A")
        _pair(store, k, a, b, longer, longer if k < 5 else shorter, tool="lwe_judge")
    length = _length(store, tool="lwe_judge")
    assert (length.longer_picked.rate, length.longer_labels.rate, length.bias) == (1.0, 0.5, 0.5)
    assert (length.longer_picked.of, length.longer_labels.of) == (10, 10)


@on_both_engines
def test_groups_without_a_length_figure(store) -> None:
    _pair(store, 1, "same", "same", "A", "A")  # labelled, but equal lengths: the figure is there with `of` 0, null rates
    VerdictLog(store).log("grade_score_options", "default", "m", {"instruction": "Q", "options": ["x", "yy"]},
                          {"winner_index": 1, "trials": []}, {}, [], verdict_id="g-1")
    LabelTable(store).put("g-1", "grade_score_options", "1", "text", None)
    report = stats.from_store(store)
    pair, grade = (next(g.agreement for g in report.all_time.groups if g.tool == tool) for tool in ("compare_pair", "grade_score_options"))
    assert pair.length is not None and pair.length.longer_picked.model_dump() == {"rate": None, "count": 0, "of": 0, "ci": None} and pair.length.bias is None
    assert grade.labelled == 1 and grade.length is None  # not a pair: no length figure


def _facts(store: Any) -> list[tuple[Any, ...]]:
    rows = store.query("SELECT v.verdict_id, f.part, f.longer_answer FROM verdict_facts f JOIN verdicts v ON v.id = f.verdict_id ORDER BY v.id, f.part")
    return [(r["verdict_id"], r["part"], r["longer_answer"]) for r in rows]


@on_both_engines
def test_the_migration_backfills_each_verdicts_longer_answer_as_the_write_path_keeps_it(store, tmp_path, request) -> None:
    long = "w" * (LONG + 10)  # stored once in `texts`: the row keeps its hash
    _pair(store, 1, "aaaa", "bb", "A", "B")  # A longer, inline
    _pair(store, 2, long, long + "!", "A", "A")  # both stored apart: B longer
    _pair(store, 3, "short", long, "B", "B")  # one inline, one stored apart
    _pair(store, 4, "same", "same", "A", "A")  # equal: NULL
    _pair(store, 5, [{"role": "assistant", "content": "hi"}], "b", "A", "A")  # a trajectory is not a text: NULL
    _pair(store, 6, "bb", "aaaa", "B", "A", tool="lwe_judge", tenant="other")
    VerdictLog(store).log("grade_score_options", "default", "m", {"instruction": "Q", "options": ["x", "yy"]},
                          {"winner_index": 1, "trials": []}, {}, [], verdict_id="g-1")
    member = {"backend": "local", "model": "m2", "status": "ok", "winner": "A", "trials": []}  # a panel: parts 1.. have none
    VerdictLog(store).log("compare_pair", "panel", "p", {"response_a": "aaa", "response_b": "b"}, {"winner": "A", "trials": [], "panel": [member]},
                          {}, [], verdict_id="p-1")
    with store.transaction() as tx:  # a row whose inputs are not JSON (and its facts row) is left NULL, not an error
        bad = tx.insert("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at, verdict_id, tenant)"
                        " VALUES ('compare_pair', 'default', 'm', '{not json', '{}', '{}', '[]', 1.0, 'bad-1', 'local')")
        tx.execute("INSERT INTO verdict_facts (verdict_id, part, created_at, tenant) VALUES (?, 0, 1.0, 'local')", [bad])
    written = _facts(store)
    expected = {"local-0001": "A", "local-0002": "B", "local-0003": "B", "local-0004": None, "local-0005": None, "other-0006": "B",
                "g-1": None, "p-1": "A", "bad-1": None}
    assert [(v, p, side) for v, p, side in written] == [(v, p, expected[v] if p == 0 else None) for v, p, _ in written]
    assert [v for v, p, _ in written if p == 1] == ["p-1"]
    before = (_length(store), _length(store, "other", "lwe_judge"))
    assert before[0].longer_picked.of == 3 and before[1].bias == 1.0

    # a database from before m015: the column gone, the migration not recorded; opened again, it is backfilled
    location = request.getfixturevalue("postgres_url") if store.dialect.name == "postgresql" else tmp_path / "judge.db"
    with store.transaction() as tx:
        tx.drop_column("verdict_facts", "longer_answer")
        tx.execute("DELETE FROM _migrations WHERE name = 'm015_longer_answers'")
    store.close()
    again = open_store(location, MIGRATIONS)
    try:
        assert _facts(again) == written
        assert (_length(again), _length(again, "other", "lwe_judge")) == before
    finally:
        again.close()
