"""The command line: `judge-mcp bench DATASET.jsonl --method METHOD ...` and `judge-mcp bench-report ...`."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from judge_mcp.config.values import DENIED, path_kind
from judge_mcp.contract.fields import ANSWER_ORDERS, FLIP_VARIANTS, GRADE_VARIANTS, TEMPLATES
from judge_mcp.contract.args import GradeScoreOptionsArgs, InferInstructionRewardArgs, LweJudgeArgs
from judge_mcp.bench import convert_cli, figures, published_options, repeats, thresholds

if TYPE_CHECKING:
    from judge_mcp.bench.runner import RunSpec
    from judge_mcp.config.settings import Settings

# The bench database: beside the server's in the per-user data directory (config.default_bench_db_path), never a
# path relative to wherever the command runs; --db puts it elsewhere (the checkout's docs use state/bench.db).
# The method names, without importing the methods at CLI start-up (tests check they match bench.methods.METHODS).
METHOD_NAMES = ("vanilla", "grp", "grp-better", "arena-hard", "lwe", "selective-lwe", "flip", "pointwise", "grade") + figures.METHOD_NAMES
METHOD_HELP = (
    "vanilla: plain better-answer prompt (compare_pair goal=better, template=direct); grp: compare_pair defaults "
    "(goal=worse, SOP); grp-better: SOP, goal=better; arena-hard: JudgeBench's Arena-Hard judge (five labels, "
    "a tie counts wrong), the GRP paper's baseline; lwe / selective-lwe: lwe_judge with selective false / true; "
    "flip: FLIP reward of each response; pointwise: 1-10 rating of each response; grade: grade_score_options"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench",
        help="run a judging method over a benchmark JSONL (resumable) and report its accuracy",
        description="Judge every item of DATASET.jsonl with METHOD; finished judgments are stored in the bench "
        "database as they come, so the same command resumes a killed run.",
    )
    bench.add_argument("dataset", type=Path, help="a JSONL file in the shape of shared/benchmarks/README.md")
    bench.add_argument("--method", required=True, choices=METHOD_NAMES, help=METHOD_HELP + figures.METHOD_HELP)
    scope = bench.add_mutually_exclusive_group()
    scope.add_argument("--limit", type=_positive, help="judge only the first N items of the file")
    scope.add_argument("--sample", type=_positive, help="judge N items spread evenly over the file (every category of a sorted file, in proportion)")
    bench.add_argument("--backend", help="a backend name from JUDGE_MCP_CONFIG, or 'local' for the embedded model (default: the environment's)")
    bench.add_argument(
        "--backends",
        help="vanilla/grp/grp-better: a judge panel, 2-8 comma-separated backend names (e.g. a,b,c); the summary's "
        "`panel` scores each member alone on the same items",
    )
    bench.add_argument(
        "--response-model",
        help="vanilla/grp/grp-better: the model that wrote every response (e.g. gpt-4o for judgebench_gpt-4o): flags same-family judges",
    )
    bench.add_argument("--exclude-same-family", action="store_true", help="with --backends and --response-model: leave same-family members out of the panel")
    bench.add_argument("--out", type=Path, help="write the JSON summary here")
    bench.add_argument("--report", type=Path, help="write an HTML report of every run in the bench database here")
    bench.add_argument("--db", type=Path, default=None, help=f"bench database (default: {_default_db()})")
    bench.add_argument("--template", choices=TEMPLATES, help="vanilla/grp/grp-better: use this template instead")
    bench.add_argument("--unrelated", action="store_true", help="grade: add the unrelated option")
    bench.add_argument(
        "--prompt-variant",
        type=_positive,
        help=f"grade: the paper's prompt 1..{max(GRADE_VARIANTS)} (default {GradeScoreOptionsArgs.default('prompt_variant')}); "
        f"flip: 1..{max(FLIP_VARIANTS)} (default {InferInstructionRewardArgs.default('prompt_variant')})",
    )
    bench.add_argument(
        "--flip-answer-order",
        choices=ANSWER_ORDERS,
        default=InferInstructionRewardArgs.default("answer_order"),
        help="flip: the answer's field order, the paper's (%(default)s, default) or instruction_first (small models); stored as "
        "flip[instruction_first]",
    )
    bench.add_argument(
        "--batch-size", type=_positive, default=LweJudgeArgs.default("batch_size"), help="lwe/selective-lwe: feedback batch size (default %(default)s)"
    )
    bench.add_argument(
        "--no-reask",
        action="store_true",
        help="strict mode (the papers' rule): no re-ask or continuation, an unparsed first answer counts wrong; stored as METHOD+strict",
    )
    bench.add_argument(
        "--adaptive-swap",
        action="store_true",
        help='vanilla/grp/grp-better: also judge each placement with compare_pair swap="auto" and swap=true (over the call cache) '
        "and report calls and accuracy of both; stored as METHOD+auto",
    )
    repeats.add_arguments(bench)  # --labels, --repeats, --temperature
    bench.add_argument("--swap-margin", type=float, help="with --adaptive-swap: compare_pair's swap_margin, 0..1 (default: the tool's)")
    bench.add_argument("--concurrency", type=_positive, help="items in flight (default: the backend's concurrency)")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                       help="exit 1 when the overall METRIC (e.g. accuracy, pair_accuracy, consistency) is below VALUE; repeatable")
    bench.add_argument("--max-dataset-mb", type=_positive,
                       help="refuse a dataset file larger than this many MiB (default 512; the file is read whole)")
    bench.add_argument("--batch-poll-seconds", type=_positive, help="a batch = true backend's batches are polled this often (default 30)")
    figures.add_options(bench)
    published_options.add_options(bench)
    bench.set_defaults(fn=cmd_bench)

    report = sub.add_parser("bench-report", help="combine bench summaries (JSON files and/or a bench database) into one HTML page")
    report.add_argument("summaries", nargs="*", type=Path, help="JSON files written by `judge-mcp bench --out`")
    report.add_argument("--db", type=Path, help="also include every run stored in this bench database")
    report.add_argument("--out", type=Path, help="the HTML file to write (required without --compare)")
    report.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    report.add_argument("--items", type=Path, help="with --db: write one row per judged item of its runs here (JSONL; CSV when it ends in .csv)")
    report.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two runs on the items both judged: "
                        "each a JSON summary of `judge-mcp bench --out`, or a METHOD_KEY[@BACKEND] of a run in --db (bench/compare.py)")
    report.set_defaults(fn=cmd_report)

    convert_cli.add_parser(sub, cmd_convert)  # bench-convert


def cmd_convert(args: argparse.Namespace) -> int:
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench.convert_published import ConvertError, convert

    try:
        done = convert(args)
    except ConvertError as exc:
        print(f"judge-mcp bench-convert: {exc}", file=sys.stderr)
        return 2
    left_out = ", ".join(f"{n} {why}" for why, n in sorted(done.skipped.items())) or "none"
    print(f"wrote {done.written} items to {args.out} (left out: {left_out})")
    return 0


def _default_db() -> Path:
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.config.settings import default_bench_db_path

    return default_bench_db_path()


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {number}")
    return number


def resolve_backend(settings: Any, name: str | None) -> tuple[Any, str | None]:
    """(settings, backend name). A configured name is used as is; a bare kind ('local') that is not configured
    means the environment's backend when it is of that kind, else (for 'local') the bundled model with defaults."""
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.config.settings import KINDS, BackendConfig, ConfigError

    if name is None or name in settings.backend_names():
        return settings, name
    if name in KINDS:
        if settings.default_backend.kind == name:
            return settings, None
        if name == "local":
            local = BackendConfig(name="local", kind="local")
            return replace(settings, named_backends={**settings.named_backends, "local": local}), "local"
    known = ", ".join(settings.backend_names())
    raise ConfigError(f"unknown backend {name!r}; known backends: {known} (or 'local' for the embedded model)")


def parse_backends(args: argparse.Namespace) -> tuple[str, ...]:
    """--backends a,b,c as 2-8 distinct names; not with --backend."""
    if args.backend is not None:
        raise ValueError("give either --backend (one judge) or --backends (a panel), not both")
    names = tuple(n.strip() for n in args.backends.split(",") if n.strip())
    if not 2 <= len(names) <= 8 or len(set(names)) != len(names):
        raise ValueError(f"--backends needs 2 to 8 distinct comma-separated backend names, got {args.backends!r}")
    return names


PAIRWISE_METHODS = ("vanilla", "grp", "grp-better")


def option_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of bench options given, or None."""
    pairwise = args.method in PAIRWISE_METHODS
    if (args.backends or args.response_model) and not pairwise:
        return "--backends and --response-model apply to vanilla, grp and grp-better"
    if args.exclude_same_family and not (args.backends and args.response_model):
        return "--exclude-same-family needs --backends and --response-model"
    if args.adaptive_swap and not pairwise:
        return "--adaptive-swap applies to vanilla, grp and grp-better"
    if args.adaptive_swap and args.backends:
        return "--adaptive-swap and --backends do not combine (a panel judges one order per member)"
    if args.swap_margin is not None and (not args.adaptive_swap or not 0.0 <= args.swap_margin <= 1.0):
        return "--swap-margin is a number from 0 to 1, used with --adaptive-swap"
    if args.unrelated and args.method != "grade":
        return "--unrelated applies to --method grade only"
    if args.prompt_variant is not None:
        allowed = {"grade": GRADE_VARIANTS, "flip": FLIP_VARIANTS}.get(args.method, ())
        if args.prompt_variant not in allowed:
            return f"--prompt-variant is 1..{max(GRADE_VARIANTS)} for grade and 1..{max(FLIP_VARIANTS)} for flip"
    if args.template and not pairwise:
        return "--template applies to vanilla, grp and grp-better"
    return None


def output_problem(args: argparse.Namespace, options: tuple[str, ...]) -> str | None:
    """A file option (--out, --report, --markdown) naming a folder, found before a run rather than after it."""
    for name in options:
        path = getattr(args, name, None)
        if path is not None and path_kind(path) == "folder":  # (path_kind: never a PermissionError traceback)
            return f"--{name} {path} is a folder; give the name of the file to write there"
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench.methods import Options
    from judge_mcp.bench.runner import RunSpec
    from judge_mcp.config.settings import ConfigError, load_settings

    members: tuple[str, ...] = ()
    try:
        settings, backend = resolve_backend(load_settings(), args.backend)
        if args.backends is not None:
            members = parse_backends(args)
            for name in members:
                settings, _ = resolve_backend(settings, name)
    except (ConfigError, ValueError) as exc:
        print(f"judge-mcp bench: configuration error: {exc}", file=sys.stderr)
        return 2
    problem = (thresholds.fail_under_problem(args) or option_problem(args) or repeats.problem(args) or output_problem(args, ("out", "report"))
               or published_options.options_problem(args.method, args.alpaca_gamed, args.llmbar_strategy))
    if problem is not None:
        print(f"judge-mcp bench: {problem}", file=sys.stderr)
        return 2
    options = Options(
        template=args.template, unrelated=args.unrelated, prompt_variant=args.prompt_variant, batch_size=args.batch_size,
        no_reask=args.no_reask, flip_answer_order=args.flip_answer_order, adaptive_swap=args.adaptive_swap,
        swap_margin=args.swap_margin, panel=members, response_model=args.response_model, exclude_same_family=args.exclude_same_family, labels=args.labels,
        **({"llmbar_strategy": args.llmbar_strategy} if args.llmbar_strategy else {}),
    )
    spec = RunSpec(
        dataset=args.dataset, method=args.method, limit=args.limit, sample=args.sample, backend=backend, options=options,
        concurrency=args.concurrency, batch_poll_s=args.batch_poll_seconds, alpaca_gamed=args.alpaca_gamed,
        max_dataset_bytes=None if args.max_dataset_mb is None else args.max_dataset_mb * 1024 * 1024,
    )
    return run_bench(args, settings, spec)


def run_bench(args: argparse.Namespace, settings: Settings, spec: RunSpec) -> int:
    """Run the bench as `spec` says, print its summary (and write --out, --report); the exit status."""
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.runtime.app import App
    from judge_mcp.bench.data import DatasetError
    from judge_mcp.bench.runner import BenchError, run
    from judge_mcp.config.settings import ConfigError
    from judge_mcp.storage import open_store
    from judge_mcp.bench.schema import BENCH_MIGRATIONS

    args.db = args.db or _default_db()
    app = App(settings, store=open_store(args.db, BENCH_MIGRATIONS))

    async def main() -> dict[str, Any]:
        try:
            return await (repeats.from_args(app, spec, args) if args.repeats else run(app, spec, quiet=args.quiet))
        finally:
            await app.aclose()

    try:
        summary = anyio.run(main)
    except (DatasetError, BenchError, ConfigError) as exc:
        print(f"judge-mcp bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\njudge-mcp bench: interrupted; finished judgments are stored, run the same command to resume", file=sys.stderr)
        return 130
    print(format_summary(summary, args.metric) + ("\n" + repeats.format_line(summary) if "repeats" in summary else ""))
    try:
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        if args.report:
            write_report(args.report, summaries_from_db(args.db))
    except OSError as exc:
        print(f"judge-mcp bench: cannot write {exc.filename}: {exc.strerror or exc}; the judgments are stored in {args.db}, "
              "so `judge-mcp bench-report --db` or the same command again writes it", file=sys.stderr)
        return 2
    return failed_items_status(summary) or thresholds.below_threshold_status(summary, args.fail_under)


def failed_items_status(summary: dict[str, Any]) -> int:
    """0 only when every selected item was judged; else 1, saying how many were not (on stderr)."""
    errors, incomplete = int(summary.get("errors") or 0), int(summary.get("incomplete") or 0)
    if not errors and not incomplete:
        return 0
    parts = [f"{errors} item(s) errored"] if errors else []
    parts += [f"{incomplete} item(s) not finished"] if incomplete else []
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench.runner import timeout_advice

    advice = timeout_advice(summary.get("error_examples") or []) if errors else None
    if advice is None:
        advice = "run the same command again to retry them"
    print(f"judge-mcp bench: {' and '.join(parts)}; {advice}", file=sys.stderr)
    return 1


def _run_for_compare(run: str, db: Path | None) -> dict[str, Any]:
    """One run of --compare: a JSON summary file, or a run of the --db database by its method key (@backend); a
    ValueError saying what was found instead."""
    path = Path(run)
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
        runs = data if isinstance(data, list) else [data]
        if len(runs) != 1 or summary_problem(runs[0]) is not None:
            raise ValueError(f"{path} is not one summary written by `judge-mcp bench --out`")
        return runs[0]
    if db is None:
        raise ValueError(f"{run!r} is not a file; to name a run of a bench database by its method key, give --db")
    if path_kind(db) in ("missing", "denied"):
        raise ValueError(f"{db} does not exist or cannot be read")
    stored = summaries_from_db(db)
    found = [s for s in stored if run in (s["method_key"], f"{s['method_key']}@{s['backend_key']}")]
    if len(found) != 1:
        known = ", ".join(sorted(f"{s['method_key']}@{s['backend_key']}" for s in stored)) or "none"
        raise ValueError(f"{run!r} names {len(found)} runs of {db} (name one as METHOD_KEY@BACKEND; its runs: {known})")
    return found[0]


def cmd_compare(args: argparse.Namespace) -> int:
    """`bench-report --compare RUN_A RUN_B`: the paired comparison on the terminal, and in --out's HTML page."""
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench import compare

    try:
        a, b = (_run_for_compare(run, args.db) for run in args.compare)
        result = compare.compare(a, b)
    except ValueError as exc:
        print(f"judge-mcp bench-report --compare: {exc}", file=sys.stderr)
        return 2
    print(compare.format_comparison(result))
    if args.out:
        problem = output_problem(args, ("out",))
        if problem is not None:
            print(f"judge-mcp bench-report: {problem}", file=sys.stderr)
            return 2
        from judge_mcp.bench import html_report as report  # lazy: as above

        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report.render([a, b], "judge-mcp: two runs compared", lead=compare.html_section(result)), encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    if args.compare:
        return cmd_compare(args)
    if args.items is not None:
        status = _write_items(args)
        if status or args.out is None:
            return status
    return _html_report(args)


def _html_report(args: argparse.Namespace) -> int:
    """`bench-report --out FILE.html`: the runs of the summaries given and of --db, one page."""
    if args.out is None:
        print("judge-mcp bench-report: --out FILE.html is required (or --compare RUN_A RUN_B)", file=sys.stderr)
        return 2
    summaries = []
    for path in args.summaries:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"judge-mcp bench-report: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        runs = data if isinstance(data, list) else [data]
        problem = next((p for p in map(summary_problem, runs) if p), None) if runs else "an empty list"
        if problem is not None:
            print(f"judge-mcp bench-report: {path} is not a summary written by `judge-mcp bench --out` ({problem})", file=sys.stderr)
            return 2
        summaries.extend(runs)
    if args.db:
        kind = path_kind(args.db)
        if kind in ("missing", "denied"):
            print(f"judge-mcp bench-report: {args.db} {'does not exist' if kind == 'missing' else f'cannot be read: {DENIED}'}", file=sys.stderr)
            return 2
        known = {(s.get("dataset"), s.get("method_key"), s.get("backend_key")) for s in summaries}
        summaries += [s for s in summaries_from_db(args.db) if (s["dataset"], s["method_key"], s["backend_key"]) not in known]
    if not summaries:
        given = f"{args.db} holds no bench run" if args.db else "no runs given"
        print(f"judge-mcp bench-report: {given} (pass JSON summaries written by `judge-mcp bench --out` and/or --db BENCH.db)", file=sys.stderr)
        return 2
    problem = output_problem(args, ("out", "markdown"))
    if problem is not None:
        print(f"judge-mcp bench-report: {problem}", file=sys.stderr)
        return 2
    write_report(args.out, summaries)
    print(f"wrote {args.out} ({len(summaries)} runs)")
    if args.markdown:
        # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
        from judge_mcp.bench import html_report as report

        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(report.markdown(summaries) + "\n", encoding="utf-8")
        print(f"wrote {args.markdown}")
    return 0


SUMMARY_KEYS = {"dataset": str, "method_key": str, "overall": dict}  # what every `bench --out` summary holds


def summary_problem(data: Any) -> str | None:
    """Why `data` (one run read from a JSON file) is not a bench summary, or None."""
    if not isinstance(data, dict):
        return f"a run is a JSON object, got {type(data).__name__}"
    for key, kind in SUMMARY_KEYS.items():
        if not isinstance(data.get(key), kind):
            return f"no {key!r}" if key not in data else f"{key!r} is not {'text' if kind is str else 'an object'}"
    if not isinstance(data.get("categories", {}), dict):
        return "'categories' is not an object"
    return None


def write_report(path: Path, summaries: list[dict[str, Any]]) -> None:
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench import html_report as report

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.render(summaries), encoding="utf-8")


def _write_items(args: argparse.Namespace) -> int:
    """`bench-report --items FILE`: the per-item rows of every run in --db (bench/item_rows.py)."""
    if args.db is None or path_kind(args.db) in ("missing", "denied"):
        print("judge-mcp bench-report: --items needs --db naming an existing bench database", file=sys.stderr)
        return 2
    problem = output_problem(args, ("items",))
    if problem is not None:
        print(f"judge-mcp bench-report: {problem}", file=sys.stderr)
        return 2
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench.item_rows import item_rows, write_items
    from judge_mcp.bench.schema import BENCH_MIGRATIONS
    from judge_mcp.storage import open_store

    store = open_store(args.db, BENCH_MIGRATIONS)
    try:
        rows = item_rows(store)
    finally:
        store.close()
    try:
        write_items(args.items, rows)
    except OSError as exc:
        print(f"judge-mcp bench-report: cannot write {args.items}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(rows)} item rows to {args.items}")
    return 0


def summaries_from_db(db: Path) -> list[dict[str, Any]]:
    """Every run stored in a bench database, summarised from its rows (all items judged so far)."""
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench.published import METHODS
    from judge_mcp.bench.stored_runs import all_runs, run_rows
    from judge_mcp.bench.runner import run_summary
    from judge_mcp.storage import open_store
    from judge_mcp.bench.schema import BENCH_MIGRATIONS

    store = open_store(db, BENCH_MIGRATIONS)
    try:
        out = []
        for info in all_runs(store):
            name = re.match(r"[a-z-]*", info["method"])
            method = METHODS.get(name.group(0)) if name else None
            if method is not None:
                out.append(run_summary(info, method, run_rows(store, info["dataset"], info["method"], info["backend"])))
        return out
    finally:
        store.close()


def _f(v: Any) -> str:
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def _d(value: Any) -> str:
    """A dict of figures as the terminal shows it: floats to 3 decimals (the JSON summary keeps every digit)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_d(v)}" for k, v in value.items()) + "}"
    return _f(value)


def format_summary(s: dict[str, Any], metric: str | None = None) -> str:
    """A few readable lines for the terminal (`metric` "strict": the strict score beside JudgeBench's, figures.py)."""
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench import metrics, uncertainty

    COLUMNS = metrics.columns(metric)
    cols = [key for key, _ in COLUMNS]
    widths = [max(len(title), 7) + 2 for _, title in COLUMNS]  # each column as wide as its whole title
    rows = [("overall", s["overall"]), *s.get("categories", {}).items()]
    first = max(18, *(len(name) + 2 for name, _ in rows), *(len(name) + 4 for name in (s.get("panel") or {})))
    lines = [f"{s['dataset']} · {s['method_key']} · judge {s['model']}"]
    headline = _headline(s["overall"])
    if headline:
        lines.append(headline)
    lines.append(f"{'':<{first}}" + "".join(f"{title:>{w}}" for (_, title), w in zip(COLUMNS, widths)))
    for name, row in rows:
        lines.append(f"{name:<{first}}" + "".join(f"{_f(row.get(c)):>{w}}" for c, w in zip(cols, widths)))
    extra = [f"{k}: {s[k]}" for k in ("errors", "incomplete") if s.get(k)]
    if s.get("degenerate"):
        extra.insert(0, f"degenerate pairs (identical or empty responses): {s['degenerate']}, not judged; left out of every "
                        "figure but the JudgeBench score, which counts them wrong as JudgeBench does")
    extra += _method_lines(s) + figures.summary_lines(s) + uncertainty.summary_lines(s)
    if s.get("panel"):
        extra.append("panel members, each scored alone on the same items:")
        for name, row in s["panel"].items():
            extra.append(f"  {name:<{first - 2}}" + "".join(f"{_f(row.get(c)):>{w}}" for c, w in zip(cols, widths)))
    if s.get("self_preference") is not None:
        extra.append(f"judges of the responses' model family: {', '.join(s['self_preference']['same_family_judges']) or 'none'}")
    if s.get("batch"):
        # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
        from judge_mcp.bench.batching import summary_line
        extra.append(summary_line(s["batch"]))
    run = s.get("run", {})
    few = metrics.few_items_line(s)
    if few:
        extra.append(few)
    extra += ["legend:", *metrics.legend_lines()]
    extra.append(
        f"wall time this invocation {run.get('wall_seconds_this_invocation')} s for {run.get('judged_this_invocation')} items; "
        f"total {run.get('wall_seconds_total')} s"
    )
    return "\n".join(lines + extra)


def _with_ci(value: Any, ci: Any) -> str:
    """A figure with its interval: `0.700 [0.481, 0.855]`, or `(too few to say (n=4))`."""
    if value is None:
        return "-"
    if isinstance(ci, list) and len(ci) == 2:
        return f"{_f(value)} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{_f(value)} ({ci})" if isinstance(ci, str) else _f(value)


def _headline(row: dict[str, Any]) -> str:
    """The overall rates with their 95% intervals, one readable line."""
    ci = row.get("ci") or {}
    shown = [(title, key) for key, title in (("pair_accuracy", "pair acc."), ("accuracy", "both-orders acc."),
                                              ("first_order_accuracy", "first-order acc."), ("consistency", "consistency"),
                                              ("position_bias", "position bias")) if row.get(key) is not None]
    return "; ".join(f"{title} {_with_ci(row[key], ci.get(key))}" for title, key in shown)


def _method_lines(s: dict[str, Any]) -> list[str]:
    """The summary's method-specific figures (LWE, Grade Score, calibration, adaptive swap), one line each."""
    extra = []
    if s.get("lwe"):
        lwe = s["lwe"]
        extra.append(
            f"lwe meta-path share {_f(lwe.get('meta_path_share'))}, refinements {lwe.get('refinements')}, "
            f"relative cost (characters, vs one vanilla judgment) {_f(lwe.get('relative_cost'))}"
        )
        if lwe.get("final_refinement"):
            extra.append(f"final partial batch refined: {lwe['final_refinement']}")
        if lwe.get("vanilla_fig9"):
            extra.append(f"vanilla (Figure 9) pair: {_d(lwe['vanilla_fig9'])}")
    if s.get("grade"):
        extra.append(f"grade: {_d(s['grade'])}")
    if s.get("calibration"):
        c = s["calibration"]
        for name in ("single_order", "both_orders"):
            extra.append(f"probabilities, {name.replace('_', ' ')}: {_d(c[name])} (ECE over {c['bins']} bins)")
    if s.get("adaptive"):
        a, auto, both = s["adaptive"], s["adaptive"]["auto"], s["adaptive"]["swap_true"]
        extra.append(
            f"swap auto: second order in {_f(a['second_order_share'])} of {a['judgments']} judgments; "
            f"calls/judgment {_f(auto['calls_per_judgment'])} vs {_f(both['calls_per_judgment'])} (swap true); "
            f"accuracy {_f(auto['accuracy'])} vs {_f(both['accuracy'])}; "
            f"pair accuracy {_f(auto['pair_accuracy'])} vs {_f(both['pair_accuracy'])}; "
            f"one-order judgments right {_f(a['one_order_accuracy'])}"
        )
    return extra
