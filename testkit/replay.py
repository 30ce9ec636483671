"""Replaying a published judge's recorded answers through the bench, so its published figures can be checked against
judge-mcp's prompts, parsing and scoring without calling the model again:

    python -m testkit.replay judgebench OUTPUTS.jsonl --method arena-hard|jb-vanilla [--metric strict]
    python -m testkit.replay alpaca-eval ANNOTATIONS.json
    python -m testkit.replay llmbar RESULT.json --strategy NAME --config CONFIG.json

- judgebench: one of JudgeBench's recorded runs (`outputs/dataset=...,judge_name=J,judge_model=M.jsonl`: each pair
  with its two judgments, the pair as given and swapped). The pairs are converted as bench-convert judgebench does;
  a scripted server on 127.0.0.1 answers each request with the judgment recorded for that pair and order, found by
  the request's user message as judge-mcp renders it from the recorded pair; where the recording keeps the prompt
  JudgeBench sent (`judgment.prompt`), the summary's `replay` says how many equal judge-mcp's (JudgeBench records
  the first answer there instead for o1 models, whose system message it folds into the user message, so none do
  for them). A request not in the recording is refused and counted. A judgment recorded as failed (null) is answered
  with an empty text; Arena-Hard's recorded text (the first answer and any continuation, joined) is answered whole,
  which parses to the same label set; a continuation judge-mcp asks after that is answered empty.
- alpaca-eval: one of AlpacaEval's annotation files (`results/M/weighted_alpaca_eval_gpt4_turbo/annotations.json`),
  converted as bench-convert alpaca-eval does; each request is answered with the recorded completion's log-
  probabilities (its `raw_completion`), and the summary says how many rows' preferences equal the recorded ones.
- llmbar: one of LLMBar's recorded evaluations (`Dataset/.../evaluators/JUDGE/NAME/result.json`: each instance with
  its results) and the evaluator's config (`LLMEvaluator/evaluators/config/JUDGE/NAME.json`); LLMBar's own code
  (testkit/llmbar_reference.py) is run over the recording, answered with the recorded completions in order, and
  the bench is answered with the same completions for the same messages; the summary's `replay` says how many
  request bodies equal LLMBar's (the model apart) and gives LLMBar's statistics.json of the recording beside the
  bench's `llmbar` block. Compare both with the statistics.json beside result.json.
The run goes to a bench database of its own (--db, default a temporary one); the summary prints as `judge-mcp bench`
prints it. A test double like the scripted servers: it speaks the real wire format on a local port.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge_mcp import prompts
from judge_mcp.bench import alpaca_eval, jb_vanilla
from judge_mcp.bench.convert_published import alpaca_eval as alpaca_rows
from judge_mcp.bench.convert_published import judgebench as judgebench_items
from testkit.scripted_servers import Reply, ScriptedServer

METHODS = ("arena-hard", "jb-vanilla")


class ReplayError(ValueError):
    """A recording that cannot be read."""


def user_message(method: str, question: str, a: str, b: str) -> str:
    """The user message judge-mcp sends for (question, A, B) with `method`."""
    if method == "arena-hard":
        return prompts.render("arena_hard_user.txt", prompt=question, answer_a=a, answer_b=b)
    args = jb_vanilla.JbVanillaArgs.parse(dict(prompt=question, response_a=a, response_b=b))
    return jb_vanilla.request(args).messages[0].content


def judgebench_answers(records: list[dict[str, Any]], method: str) -> tuple[dict[str, str], str]:
    """({user message: recorded answer} for both orders of every recorded pair, "N of M": the recorded prompts
    equal to judge-mcp's user message)."""
    answers, equal, kept = {}, 0, 0
    for r in records:
        judgments = r.get("judgments") or [None, None]
        for (a, b), judgment in zip(((r["response_A"], r["response_B"]), (r["response_B"], r["response_A"])), judgments):
            recorded = (judgment or {}).get("judgment") or {}
            text, ours = recorded.get("response") or "", user_message(method, r["question"], a, b)
            answers[ours] = text[1:] if text.startswith("\n") else text
            if isinstance(recorded.get("prompt"), str):
                kept += 1
                equal += recorded["prompt"] == ours
    return answers, f"{equal} of {kept}"


def alpaca_answers(rows: list[dict[str, Any]]) -> dict[str, Reply]:
    """{user message: the recorded completion's token and log-probabilities} for every row with a recording."""
    answers = {}
    for row in rows:
        if row["output_1"] == row["output_2"] or not row.get("recorded_completion"):
            continue
        args = alpaca_eval.AlpacaEvalArgs.parse(dict(instruction=row["prompt"], output_1=row["output_1"], output_2=row["output_2"]))
        chat, _ = alpaca_eval.request(args)
        try:
            recorded = row["recorded_completion"]  # a JSON object, or its Python repr in older files
            completion = recorded if isinstance(recorded, dict) else ast.literal_eval(recorded)
            content = completion["logprobs"]["content"]
        except (ValueError, SyntaxError, KeyError, TypeError):
            raise ReplayError(f"{row['id']}: the recorded completion is not AlpacaEval's raw_completion shape") from None
        answers[chat.messages[-1].content] = Reply(completion.get("text") or "", logprobs=content, finish_reason="length")
    return answers


def responder(answers: dict[str, Any], misses: list[str]) -> Callable[[dict[str, Any]], Any]:
    def answer(payload: dict[str, Any]) -> Any:
        messages = payload.get("messages", [])
        if any(m.get("role") == "assistant" for m in messages):
            return ""  # a continuation: nothing more was recorded
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        if user not in answers:
            misses.append(user[:200])
            return Reply(status=400)
        return answers[user]

    return answer


def _write(rows: list[dict[str, Any]], folder: Path, name: str) -> Path:
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def llmbar_rows(instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """LLMBar's instances as pairwise rows in shared/benchmarks/llmbar_*.jsonl's shape (`original_label` its order)."""
    rows = []
    for k, instance in enumerate(instances):
        label = instance["label"]
        rows.append({"id": f"llmbar-{k}", "category": "llmbar", "prompt": instance["input"], "chosen": instance[f"output_{label}"],
                     "rejected": instance[f"output_{3 - label}"], "original_label": label})
    return rows


def replay(kind: str, recorded: Path, method: str, db: Path, folder: Path, **llmbar: Any) -> tuple[dict[str, Any], list[str]]:
    """(the run's summary, the user messages not in the recording) of replaying `recorded`."""
    rows: list[dict[str, Any]] = []
    prompts_equal = None
    if kind == "judgebench":
        records = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines() if line.strip()]
        dataset = _write(judgebench_items(recorded), folder, "judgebench_replay")
        jb_answers, prompts_equal = judgebench_answers(records, method)
        answers: dict[str, Any] = dict(jb_answers)
    elif kind == "llmbar":
        return _replay_llmbar(recorded, db, folder, **llmbar)
    else:
        rows = alpaca_rows(recorded, None)
        dataset, answers, method = _write(rows, folder, "alpaca_eval_replay"), alpaca_answers(rows), "alpaca-eval"
    misses: list[str] = []
    summary = _run(dataset, method, db, responder(answers, misses))
    if kind == "alpaca-eval":
        summary["alpaca_eval"]["recorded_preferences_matched"] = _matched(rows, db, summary)
    else:
        summary["replay"] = {"recorded_prompts_equal": prompts_equal}
    return summary, misses


def _replay_llmbar(recorded: Path, db: Path, folder: Path, strategy: str, config: Path) -> tuple[dict[str, Any], list[str]]:
    from judge_mcp.bench.methods import Options
    from testkit import llmbar_reference as reference

    instances = json.loads(recorded.read_text(encoding="utf-8"))
    configs = json.loads(config.read_text(encoding="utf-8"))
    answers, bodies = reference.recorded_answers(instances, [i["results"] for i in instances], strategy, configs)
    misses: list[str] = []
    seen: list[dict[str, Any]] = []

    def answer(payload: dict[str, Any]) -> Any:
        key = reference.key_of(payload)
        if key not in answers:
            misses.append(key[:200])
            return Reply(status=400)
        seen.append(payload)
        return answers[key]

    dataset = _write(llmbar_rows(instances), folder, "llmbar_replay")
    summary = _run(dataset, "llmbar", db, answer, Options(llmbar_strategy=strategy))
    equal = sum({k: v for k, v in p.items() if k != "model"} == bodies[reference.key_of(p)] for p in seen)
    summary["replay"] = {"request_bodies_equal": f"{equal} of {len(seen)} sent ({len(bodies)} in LLMBar's run)",
                         "llmbar_statistics_of_the_recording": reference.statistics(instances),
                         "bench_as_statistics_json": reference.as_statistics_json(summary["llmbar"]["overall"])}
    return summary, misses


def _run(dataset: Path, method: str, db: Path, answer: Callable[[dict[str, Any]], Any], options: Any = None) -> dict[str, Any]:
    """The bench's summary of `method` over `dataset` against a scripted server answering with `answer`."""
    import anyio

    from judge_mcp.runtime.app import App
    from judge_mcp.bench.methods import Options
    from judge_mcp.bench.runner import RunSpec, run
    from judge_mcp.config.settings import load_settings
    from judge_mcp.storage import open_store
    from judge_mcp.bench.schema import BENCH_MIGRATIONS

    server = ScriptedServer(answer).start()
    try:
        env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "replay", "JUDGE_MCP_MAX_RETRIES": "0"}
        app = App(load_settings(env), store=open_store(db, BENCH_MIGRATIONS))

        async def go() -> dict[str, Any]:
            try:
                return await run(app, RunSpec(dataset=dataset, method=method, concurrency=8, options=options or Options()), quiet=True)
            finally:
                await app.aclose()

        return anyio.run(go)
    finally:
        server.stop()


def _matched(rows: list[dict[str, Any]], db: Path, summary: dict[str, Any]) -> str:
    """How many rows' preferences equal AlpacaEval's recorded ones (to 1e-6), of the rows with one."""
    from judge_mcp.bench.stored_runs import run_rows
    from judge_mcp.storage import open_store
    from judge_mcp.bench.schema import BENCH_MIGRATIONS

    store = open_store(db, BENCH_MIGRATIONS)
    try:
        stored = run_rows(store, summary["dataset"], summary["method_key"], summary["backend_key"])
    finally:
        store.close()
    got = {r["item_id"]: (r.get("record") or {}).get("preference") for r in stored}
    recorded = [r for r in rows if r.get("recorded_preference") is not None]
    same = 0
    for r in recorded:
        mine = got.get(r["id"])
        same += mine is not None and abs(float(r["recorded_preference"]) - float(mine)) < 1e-6
    return f"{same} of {len(recorded)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.replay", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("kind", choices=("judgebench", "alpaca-eval", "llmbar"))
    parser.add_argument("recorded", type=Path, help="JudgeBench's outputs/*.jsonl or AlpacaEval's annotations.json")
    parser.add_argument("--method", choices=METHODS, default="arena-hard", help="judgebench: the judge the recording is of")
    parser.add_argument("--metric", choices=("judgebench", "strict"), default="strict")
    parser.add_argument("--db", type=Path, help="the bench database (default: a temporary one)")
    parser.add_argument("--strategy", default="Vanilla", help="llmbar: the evaluator's name (its config's file name)")
    parser.add_argument("--config", type=Path, help="llmbar: the evaluator's config (LLMEvaluator/evaluators/config/JUDGE/NAME.json)")
    args = parser.parse_args(argv)
    from judge_mcp.bench.command import format_summary

    with tempfile.TemporaryDirectory() as tmp:
        extra = {"strategy": args.strategy, "config": args.config} if args.kind == "llmbar" else {}
        summary, misses = replay(args.kind, args.recorded, args.method, args.db or Path(tmp) / "replay.db", Path(tmp), **extra)
    print(format_summary(summary, args.metric))
    if summary.get("replay", {}).get("recorded_prompts_equal"):
        print(f"recorded prompts equal to judge-mcp's user message: {summary['replay']['recorded_prompts_equal']}")
    if args.kind == "llmbar":
        print(json.dumps(summary["replay"], indent=1))
    if misses:
        print(f"{len(misses)} request(s) not in the recording (the prompts differ), e.g. {misses[0]!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
