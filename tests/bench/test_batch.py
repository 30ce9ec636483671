"""`batch = true` backends in `judge-mcp bench`: OpenAI's Batch API and Anthropic's Message Batches, against scripted
servers speaking their wire formats on 127.0.0.1 (testkit/scripted_batches.py)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge_mcp.backends.errors import BackendError
from judge_mcp.bench.batching import SEQUENTIAL_NOTE, summary_line
from judge_mcp.calls.cache import scoped_key
from testkit.scripted_judges import first_user
from judge_mcp.config.settings import load_settings
from judge_mcp.config.values import ConfigError
from judge_mcp.runtime.run import run_method
from tests.bench.batch_helpers import batch_env, bench_batch, db_rows, start
from tests.bench.datasets import LISTS, PAIRS, item_of
from tests.engines import on_both_engines
from tests.helpers import make_app

ROOT = Path(__file__).resolve().parents[2]
JUDGED = {"p1", "p2", "p3", "p4", "p5", "p6"}  # p0 is degenerate: never sent


@pytest.fixture
def servers():
    started = []

    def make(kind: str, **kw):
        server = start(kind, **kw)
        started.append(server)
        return server

    yield make
    for server in started:
        server.__exit__()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_one_batch_answers_every_item_and_a_rerun_answers_from_the_cache(servers, tmp_path, kind):
    server = servers(kind)
    stream = io.StringIO()
    summary = await bench_batch(server, kind, PAIRS, "vanilla", tmp_path, stream=stream)
    assert summary["overall"]["n"] == 6 and summary["overall"]["accuracy"] == 1.0 and not summary.get("errors")
    batch_id = server.batches[0].id
    said = stream.getvalue()
    assert f"backend cheap: batch {batch_id} submitted (12 requests)" in said and f"batch {batch_id} {'completed' if kind == 'openai' else 'ended'}: 12 answered" in said
    assert len(server.batches) == 1 and len(server.submitted()[0]) == 12  # 6 items x 2 placements, in one batch
    creates = ["/v1/files", "/v1/batches"] if kind == "openai" else ["/v1/messages/batches"]
    assert server.posts() == creates
    batch = summary["batch"]
    assert batch["backends"] == ["cheap"] and batch["batches_submitted"] == 1 and batch["requests_submitted"] == 12
    assert batch["calls"] == 12 and batch["prompt_tokens"] == 120 and batch["completion_tokens"] == 60  # scripted usage 10 + 5
    assert "half" in batch["pricing"] and "half the provider's per-token prices" in summary_line(batch)
    db = tmp_path / "bench.db"
    cached = {key for (key,) in db_rows(db, "SELECT key FROM call_cache")}
    # the call-cache key is the custom id in the bench's scope (tenant local), and every answer landed in the cache
    assert {scoped_key(key, "tenant:local") for key in server.submitted()[0]} <= cached
    assert db_rows(db, "SELECT status FROM bench_batches") == [("completed" if kind == "openai" else "ended",)]

    db_rows(db, "DELETE FROM bench_results")  # judge the same items again: every call is a cache hit
    again = await bench_batch(server, kind, PAIRS, "vanilla", tmp_path)
    assert again["overall"]["accuracy"] == 1.0 and len(server.batches) == 1 and server.posts() == creates
    assert again["batch"]["batches_submitted"] == 0


async def test_later_calls_go_in_later_batches(servers, tmp_path):
    """A method whose calls depend on earlier answers (grade's rotations all at once, then none) and re-asks: an
    unparsable first answer for p2 is re-asked in a second batch, which holds exactly the re-asks."""
    seen: dict[str, int] = {}

    def unparsed_once(payload):
        text = first_user(payload)
        if "<|The Start of Assistant A's Answer|>" in text and item_of(text) == "p2":
            digest = hashlib.sha256(text.encode()).hexdigest()
            seen[digest] = seen.get(digest, 0) + 1
            if seen[digest] == 1:
                return "no verdict here"
        from tests.bench.datasets import right_judge

        return right_judge(payload)

    server = servers("openai")
    server.responder = unparsed_once
    summary = await bench_batch(server, "openai", PAIRS, "vanilla", tmp_path)
    assert summary["overall"]["accuracy"] == 1.0
    sizes = [len(ids) for ids in server.submitted()]
    assert sizes == [12, 2]  # every first call, then p2's two re-asks
    assert summary["batch"]["batches_submitted"] == 2


async def test_errored_requests_are_sent_again_and_invalid_ones_fail(servers, tmp_path):
    server = servers("openai")
    errors: dict[str, int] = {}

    def request_error(body):
        item = item_of(first_user(body))
        if item == "p2":  # a server error on its first submission: sent again, then answered
            key = json.dumps(body, sort_keys=True)
            errors[key] = errors.get(key, 0) + 1
            return "server" if errors[key] == 1 else None
        return "invalid" if item == "p3" else None  # an invalid request: never sent again

    server.request_error = request_error
    summary = await bench_batch(server, "openai", PAIRS, "vanilla", tmp_path)
    first, second = server.submitted()
    assert len(first) == 12 and len(second) == 2 and set(second) < set(first)  # exactly p2's two placements again
    assert summary["batch"]["requests_resubmitted"] == 2 and summary["batch"]["requests_failed"] == 2
    assert summary["overall"]["n"] == 5 and summary["overall"]["accuracy"] == 1.0  # p3 is no verdict
    assert summary["errors"] == 1 and any("scripted invalid" in e for e in summary["error_examples"])
    rows = db_rows(tmp_path / "bench.db", "SELECT item_id, status FROM bench_results WHERE item_id = 'p3'")
    assert sorted(rows) == [("p3", "error"), ("p3", "error")]


async def test_bounded_resubmissions(servers, tmp_path):
    server = servers("anthropic")
    server.request_error = lambda body: "server" if item_of(first_user(body)) == "p4" else None
    summary = await bench_batch(server, "anthropic", PAIRS, "vanilla", tmp_path)
    assert [len(ids) for ids in server.submitted()] == [12, 2, 2]  # three submissions in all, then it fails
    assert summary["errors"] == 1 and summary["overall"]["n"] == 5
    assert any("api_error" in e for e in summary["error_examples"])


@pytest.mark.parametrize("kind,outcome", [("openai", "expired"), ("openai", "failed"), ("anthropic", "expired")])
async def test_an_expired_or_failed_batch_fails_exactly_its_requests(servers, tmp_path, kind, outcome):
    """The first batch answers all but p5 (a server error); the batch that re-sends p5 ends badly: p5's two
    placements fail, stored as errors, and every other item keeps its verdict."""
    server = servers(kind)
    sent: dict[str, int] = {}

    def p5_errors_once(body):
        if item_of(first_user(body)) != "p5":
            return None
        key = json.dumps(body, sort_keys=True)
        sent[key] = sent.get(key, 0) + 1
        return "server" if sent[key] == 1 else None

    server.request_error = p5_errors_once
    server.batch_outcome = lambda n: outcome if n == 1 else "completed"
    summary = await bench_batch(server, kind, PAIRS, "vanilla", tmp_path)
    assert [len(ids) for ids in server.submitted()] == [12, 2]
    rows = db_rows(tmp_path / "bench.db", "SELECT item_id, status, error FROM bench_results WHERE status != 'skipped'")
    failed = {item for item, status, _ in rows if status == "error"}
    assert failed == {"p5"} and summary["errors"] == 1 and summary["overall"]["n"] == 5
    expected = outcome if kind == "openai" else "expired in the batch"
    assert all(expected in (error or "") for item, _, error in rows if item == "p5")
    statuses = [s for (s,) in db_rows(tmp_path / "bench.db", "SELECT status FROM bench_batches ORDER BY created_at")]
    assert statuses == (["completed", outcome] if kind == "openai" else ["ended", "ended"])


async def test_a_listwise_method_runs_in_batches(servers, tmp_path):
    server = servers("openai")
    summary = await bench_batch(server, "openai", LISTS, "grade", tmp_path)
    assert summary["overall"]["accuracy"] == 1.0 and len(server.batches) == 1


@pytest.mark.parametrize("running_at_restart", [False, True])
def test_a_killed_bench_polls_its_batch_instead_of_submitting_again(servers, tmp_path, running_at_restart):
    """A real `judge-mcp bench` process is killed after submitting its batch; the next run polls the stored batch
    id and submits nothing new, whether the batch ended meanwhile or is still running when it starts."""
    server = servers("anthropic")
    server.hold = True
    env = {**os.environ, **batch_env(server, "anthropic", tmp_path, "judge.db")}
    db = tmp_path / "bench.db"
    cmd = [sys.executable, "-m", "judge_mcp", "bench", str(PAIRS), "--method", "vanilla", "--backend", "cheap", "--db", str(db),
           "--batch-poll-seconds", "1"]
    proc = subprocess.Popen(cmd + ["--quiet"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait(lambda: _polls(server) >= 1 or proc.poll() is not None)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert len(server.batches) == 1 and _polls(server) >= 1, proc.stderr.read().decode() if proc.stderr else ""
    assert db_rows(db, "SELECT id, status FROM bench_batches") == [(server.batches[0].id, "open")]
    posts_before = list(server.posts())

    out = tmp_path / "summary.json"
    if not running_at_restart:
        server.hold = False
    rerun = subprocess.Popen(cmd + ["--out", str(out)], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if running_at_restart:  # the rerun polls the held batch; it ends only then
        polled = _polls(server)
        _wait(lambda: _polls(server) > polled or rerun.poll() is not None)
        server.hold = False
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr
    assert server.posts() == posts_before == ["/v1/messages/batches"]  # nothing submitted again
    summary = json.loads(out.read_text())
    assert summary["overall"]["n"] == 6 and summary["overall"]["accuracy"] == 1.0
    assert summary["batch"]["batches_resumed"] == 1 and summary["batch"]["batches_submitted"] == 0
    assert "batch = true (cheap)" in stdout and "submitted by an earlier run: polling it again" in stderr
    assert db_rows(db, "SELECT status FROM bench_batches") == [("ended",)]


def _wait(done, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


def _polls(server) -> int:
    return sum(1 for method, _ in server.log if method == "GET")


async def test_tool_calls_refuse_a_batch_backend(servers, tmp_path):
    server = servers("openai")
    app = make_app(batch_env(server, "openai", tmp_path))
    try:
        with pytest.raises(BackendError) as caught:
            await run_method(app, "compare_pair", {"prompt": "q", "response_a": "a", "response_b": "b", "backend": "cheap"})
    finally:
        await app.aclose()
    message = str(caught.value)
    assert "batch = true" in message and "tool call needs its answer now" in message and "judge-mcp bench" in message
    assert server.log == []  # nothing was sent


async def test_an_mcp_tool_call_naming_a_batch_backend_gets_the_reason(servers, tmp_path):
    from tests.connect import over_memory

    server = servers("anthropic")
    async with over_memory(batch_env(server, "anthropic", tmp_path), tmp_path) as client:
        result = await client.call_tool("compare_pair", {"prompt": "q", "response_a": "a", "response_b": "b", "backend": "cheap"})
    assert result.is_error
    text = result.content[0].text
    assert "backend 'cheap'" in text and "batch = true" in text and "tool call needs its answer now" in text, text
    assert server.log == []


@pytest.mark.parametrize(
    "table,problem",
    [
        ('kind = "local"\nbatch = true', 'batch = true applies to kind = "openai" or "anthropic"'),
        ('kind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nbatch = "yes"', "batch must be true or false"),
    ],
)
def test_the_batch_key_is_checked(tmp_path, table, problem):
    toml = tmp_path / "b.toml"
    toml.write_text(f"[backends.x]\n{table}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings({"JUDGE_MCP_CONFIG": str(toml)}).backend("x")  # the table's problem fails the calls naming it
    assert problem in str(caught.value) and "[backends.x] batch" in str(caught.value)


def test_batch_false_and_absent_build_the_plain_backend(tmp_path):
    from judge_mcp.backends import build_backend
    from judge_mcp.backends.batch import BatchBackend

    toml = tmp_path / "b.toml"
    toml.write_text('[backends.x]\nkind = "anthropic"\nbase_url = "http://127.0.0.1:9"\n[backends.y]\nkind = "anthropic"\n'
                    'base_url = "http://127.0.0.1:9"\nbatch = true\n', encoding="utf-8")
    settings = load_settings({"JUDGE_MCP_CONFIG": str(toml)})
    plain, batched = build_backend(settings.backend("x")), build_backend(settings.backend("y"))
    assert not isinstance(plain, BatchBackend) and isinstance(batched, BatchBackend)
    assert plain.identity() == batched.identity()  # the same call-cache keys with or without the batch API


async def test_lwe_learns_the_same_through_batches(servers, scripted, tmp_path, monkeypatch):
    """Selective LWE's steps depend on earlier answers and on the session's stored state: through batches (one per
    step) it buffers the same feedback and makes the same meta-prompt versions as the same run sent call by call."""
    from judge_mcp.bench import batching
    from judge_mcp.bench.methods import Options
    from testkit.scripted_judges import schema_name
    from tests.bench.datasets import bench, right_judge

    monkeypatch.setattr(batching, "SETTLE_S", 0.05)

    def position_biased(payload):  # vanilla verdicts always name the first answer: the meta-prompt path every time
        if schema_name(payload) == "lwe_vanilla_verdict" or "lwe_vanilla" in json.dumps(payload.get("output_config") or {}):
            return json.dumps({"explanation": "e", "verdict": "A"})
        return right_judge(payload)

    server = servers("openai")
    server.responder = position_biased
    options = Options(batch_size=2)
    (tmp_path / "b").mkdir()
    (tmp_path / "p").mkdir()
    batched = await bench_batch(server, "openai", PAIRS, "selective-lwe", tmp_path / "b", options=options, limit=4)
    plain, _ = await bench(scripted, position_biased, PAIRS, "selective-lwe", tmp_path / "p", options=options, limit=4)
    same = ("n", "accuracy", "pair_accuracy", "calls_per_item", "tokens_per_item")
    assert [batched["overall"][k] for k in same] == [plain["overall"][k] for k in same] and not batched.get("errors")
    assert batched["lwe"]["refinements"] == plain["lwe"]["refinements"] >= 1

    def learned(db: Path) -> tuple:
        feedback = db_rows(db, "SELECT meta_version, prompt, feedback FROM lwe_feedback ORDER BY id")
        versions = db_rows(db, "SELECT version, reason FROM lwe_versions ORDER BY version")
        return feedback, versions

    feedback, versions = learned(tmp_path / "b" / "bench.db")
    assert (feedback, versions) == learned(tmp_path / "p" / "bench.db")
    # 3 learning cases: a full batch of 2 refined as it filled, the last partial one at the end of the run
    assert len(feedback) == 3 and [r for _, r in versions] == ["initial", "refine", "refine"]
    assert len(server.batches) > 4  # one batch per step: each step needed the answer before it
    assert batched["warnings"] == [SEQUENTIAL_NOTE] and "warnings" not in plain


async def test_a_panel_of_batch_backends_sends_one_batch_to_each(servers, tmp_path):
    from judge_mcp.bench.methods import Options
    from judge_mcp.bench.runner import RunSpec, run

    first, second = servers("openai"), servers("anthropic")
    toml = tmp_path / "panel.toml"
    toml.write_text(
        f'[backends.a]\nkind = "openai"\nmodel = "m1"\nbase_url = "{first.base_url}"\nbatch = true\n'
        f'[backends.b]\nkind = "anthropic"\nmodel = "m2"\nbase_url = "{second.base_url}"\nbatch = true\n', encoding="utf-8"
    )
    app = make_app({"JUDGE_MCP_CONFIG": str(toml), "JUDGE_MCP_DB": str(tmp_path / "bench.db")})
    try:
        spec = RunSpec(dataset=PAIRS, method="vanilla", options=Options(panel=("a", "b")), batch_poll_s=0.02)
        summary = await run(app, spec, progress_stream=io.StringIO())
    finally:
        await app.aclose()
    assert summary["overall"]["accuracy"] == 1.0 and set(summary["panel"]) == {"a", "b"}
    assert [len(ids) for ids in first.submitted()] == [12] and [len(ids) for ids in second.submitted()] == [12]
    assert summary["batch"]["backends"] == ["a", "b"] and summary["batch"]["batches_submitted"] == 2


@on_both_engines
def test_stored_batches_on_both_engines(store):
    from judge_mcp.bench.batching import BatchJobs
    from judge_mcp.bench.schema import BENCH_MIGRATIONS

    store.migrate(BENCH_MIGRATIONS)
    jobs = BatchJobs(store)
    jobs.add("b1", "openai|x|m", ["k1", "k2"])
    jobs.add("b2", "openai|x|m", ["k3"])
    jobs.add("b3", "anthropic|y|m", ["k4"])
    jobs.ended("b2", "expired", "scripted")
    assert jobs.open_batches("openai|x|m") == {"b1": ["k1", "k2"]}
    assert jobs.open_batches("anthropic|y|m") == {"b3": ["k4"]}
    assert [(r["id"], r["status"], r["detail"]) for r in jobs.all()] == [("b1", "open", None), ("b2", "expired", "scripted"), ("b3", "open", None)]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_answers_an_expired_batch_finished_stand(servers, tmp_path, kind):
    """A batch that expires after answering 5 of its 12 requests: those 5 are judged (and cached), the other 7 fail
    as errors (never verdicts); nothing is sent again."""
    server = servers(kind)
    server.batch_outcome = lambda n: "expired"
    server.finished_before_expiry = 5
    summary = await bench_batch(server, kind, PAIRS, "vanilla", tmp_path)
    assert len(server.batches) == 1 and summary["batch"]["requests_failed"] == 7
    db = tmp_path / "bench.db"
    statuses = sorted(status for (status,) in db_rows(db, "SELECT status FROM bench_results WHERE status != 'skipped'"))
    assert statuses == ["done"] * 5 + ["error"] * 7
    answered = {r["custom_id"] for r in server.batches[0].results}
    cached = {key for (key,) in db_rows(db, "SELECT key FROM call_cache")}
    assert {scoped_key(key, "tenant:local") for key in answered} <= cached and len(answered) == 5
    errors = [e for (e,) in db_rows(db, "SELECT error FROM bench_results WHERE status = 'error'")]
    assert all(("expired" in e) for e in errors)
    assert db_rows(db, "SELECT status FROM bench_batches") == [("expired" if kind == "openai" else "ended",)]
