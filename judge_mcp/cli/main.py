"""judge-mcp serve | demo | sessions | gc | stats (and bench, see judge_mcp/bench/command.py)."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from judge_mcp.storage import tenancy as tenants

def _setup_logging(verbose: bool = False) -> None:
    # stdout belongs to JSON-RPC in stdio mode: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp import redaction

    redaction.install()  # backend credentials are blanked out of every record, whoever logs it


def _serve_settings() -> Any:
    """The settings `serve` runs on (the bundled model's answers capped, config/bundled.py), reported on stderr."""
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.bundled import cap_bundled
    from judge_mcp.config.settings import settings_or_error

    settings, capped = cap_bundled(settings_or_error())
    report_settings(settings, "judge-mcp")
    if capped:
        # lazy: the model's files are looked for only when a backend is the bundled model
        from judge_mcp.backends.local_models import start_note
    for name in capped:
        print(f"judge-mcp: {start_note(name)}", file=sys.stderr)
    return settings


def cmd_serve(args: argparse.Namespace) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.server.build import build_server

    settings = _serve_settings()
    if settings.config_error is not None:
        print(f"judge-mcp: configuration error: {settings.config_error}", file=sys.stderr)
        if args.transport != "stdio":  # started by hand, in a terminal; and no network server runs half-configured
            return 2
        # An MCP client shows a server that exits before the handshake as "Failed to connect", without this message:
        # serve, and answer every judging call with the error instead.
        print("judge-mcp: serving anyway: every judging tool answers with this error until it is fixed", file=sys.stderr)
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.runtime.app import App
    from judge_mcp.runtime.startup import settle_heap, warm_up

    if args.stateless and args.transport != "http":
        print("judge-mcp: --stateless applies to --transport http only", file=sys.stderr)
        return 2
    app = App(settings)
    app.stdio = args.transport == "stdio"  # image arguments may name files (inside JUDGE_MCP_IMAGE_DIRS) over stdio only
    server = build_server(app)
    if args.transport == "stdio":
        # lazy: each subcommand loads only what it runs (a `serve` start stays short)
        from judge_mcp.server.transports.stdio import serve_stdio

        main = partial(serve_stdio, server, on_initialized=partial(warm_up, settings))
    else:
        main = _http_main(server, app, args, stateless=args.stateless or settings.http_stateless)

    async def serve() -> None:
        try:
            await main()
        finally:  # the backends' HTTP sessions closed on the loop that made them, the store after them
            with anyio.CancelScope(shield=True):
                await app.aclose()

    settle_heap()  # once everything the server runs on is imported and built; turns the collector back on
    if args.transport == "http":  # uvicorn re-raises the SIGTERM it shut down on: unwind through app.aclose first
        signal.signal(signal.SIGTERM, _terminated)
        warm_up(settings)  # (over stdio: once the client has finished its handshake, see serve_stdio)
    try:
        anyio.run(serve)
    except KeyboardInterrupt:  # stdio: stopped at once
        app.interrupted = True
    except _Terminated:  # closed (verdict rows written, spans flushed): now end by the signal, as uvicorn would have
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
    except SystemExit as exc:  # uvicorn exits 3 when it cannot bind (it has logged why): exit 2, as a refused bind does
        if args.transport != "http" or exc.code in (0, None):
            raise
        print(f"judge-mcp: could not serve HTTP on {args.host}:{args.port} (the reason is above; a port in use: choose another with --port)", file=sys.stderr)
        return 2
    if app.interrupted:  # http: after uvicorn's graceful shutdown, or a second Ctrl-C (_interrupted)
        n = app.calls_in_flight
        print(f"judge-mcp: stopped (Ctrl-C){f'; {n} call(s) in flight cancelled' if n else ''}", file=sys.stderr, flush=True)
        return 130
    return 0


class _Terminated(Exception):
    """SIGTERM during `serve --transport http`: raised where the signal lands (after uvicorn's graceful shutdown, when
    it re-raises the signal), so serve() reaches its `finally` and closes the App before the process ends."""


def _terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def report_settings(settings: Any, prog: str) -> None:
    """On stderr: each setting warning (a JUDGE_MCP_* variable judge-mcp does not read) and each [backends.NAME]
    table that cannot be used (the calls naming it fail with the same message; the rest work)."""
    for warning in settings.warnings:
        print(f"{prog}: warning: {warning}", file=sys.stderr)
    for name, problem in sorted(settings.broken_backends.items()):
        print(f"{prog}: warning: backend '{name}' cannot be used, and calls naming it fail: {problem}", file=sys.stderr)


def _http_main(server: Any, app: Any, args: argparse.Namespace, *, stateless: bool) -> Any:
    """serve --transport http: the streamable HTTP app (without sessions when `stateless`) behind /healthz and
    /readyz (readiness: the store's database answers and is migrated)."""
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.storage.health import readiness
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.server.transports import oauth
    from judge_mcp.server.transports.http import serve_http
    from judge_mcp.config.settings import ConfigError
    from judge_mcp.tenants import TokenFile, TokenFileError

    ready = partial(readiness, app.store)
    token: Any = app.settings.http_tokens or app.settings.http_token
    tokens_file = os.environ.get("JUDGE_MCP_HTTP_TOKENS", "").strip()
    if tokens_file and app.settings.http_tokens:  # reread when it changes (tenants.TokenFile)
        try:
            token = TokenFile(tokens_file, app.settings.http_token, reserved_ok=app.settings.http_reserved_ok)
        except TokenFileError as exc:  # changed since the settings read it
            raise ConfigError(str(exc)) from None
    return partial(
        serve_http, server, host=args.host, port=args.port, token=token, stateless=stateless,
        ready=ready, max_body=app.settings.http_max_body_bytes, oauth=oauth.from_env(os.environ), on_interrupt=partial(_interrupted, app),
    )


def _interrupted(app: Any, again: bool) -> None:
    """What a Ctrl-C of `serve --transport http` says: the first lets the calls in flight finish, a second stops now."""
    app.interrupted = True
    if again:
        print("judge-mcp: second Ctrl-C: stopping now; calls still in flight are cancelled", file=sys.stderr, flush=True)
        return
    n = app.calls_in_flight
    waiting = f"waiting for {n} call{'s' if n != 1 else ''} in flight to finish" if n else "no call in flight"
    print(f"judge-mcp: Ctrl-C: stopping ({waiting}); press Ctrl-C again to stop now", file=sys.stderr, flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    import tempfile
    from judge_mcp.cli.demo import run_demo

    # The demo's verdicts and its label stay out of the user's own database (judge-mcp stats would count them from
    # then on) unless a database is named: --db, or JUDGE_MCP_DB (make demo names the checkout's state/judge.db).
    scratch = None if os.environ.get("JUDGE_MCP_DB", "").strip() else tempfile.TemporaryDirectory(prefix="judge-mcp-demo-")
    if scratch is not None:
        os.environ["JUDGE_MCP_DB"] = os.path.join(scratch.name, "judge.db")
    try:
        return anyio.run(partial(run_demo, scratch=scratch is not None))
    except KeyboardInterrupt:
        print("\njudge-mcp demo: stopped (Ctrl-C)", file=sys.stderr, flush=True)
        return 130
    finally:
        if scratch is not None:
            scratch.cleanup()


def cmd_sessions(args: argparse.Namespace) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.settings import load_settings
    from judge_mcp.methods import lwe
    from judge_mcp.contract.fields import InputError
    from judge_mcp.cli.stats_table import none_of_tenant
    from judge_mcp.storage import open_store
    from judge_mcp.storage.lwe_sessions import sessions_by_tenant
    from judge_mcp.storage.migrations import MIGRATIONS

    database = load_settings().database
    missing = _no_database(database, "sessions", "no LWE session stored there yet, or JUDGE_MCP_DB names another place in the MCP client's env")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    store = open_store(database, MIGRATIONS)
    try:
        if args.action == "list":
            rows = lwe.list_sessions(store)
            if not rows:  # none of this tenant's: whose the database holds, so that a wrong --tenant does not read as none
                others = {t: n for t, n in sessions_by_tenant(store).items() if t != args.tenant}
                print(none_of_tenant("LWE sessions", "session", args.tenant, others, empty="no LWE sessions yet"))
            for row in rows:
                print("  ".join(f"{k}={v}" for k, v in row.items()))
        elif args.action == "show":
            shown = lwe.lwe_session(store, session=args.session, action="show")
            print(f"session {shown.session}: version {shown.current_version}, batch size {shown.batch_size}, {shown.pending_feedback} feedback pending")
            for v in shown.versions:
                print(f"  v{v.version}  parent={v.parent}  {v.reason:<9} {v.chars} chars")
            print("\n--- current meta-prompt ---\n" + shown.meta_prompt)
        elif args.action == "export":
            print(json.dumps(lwe.export_session(store, args.session), indent=2, ensure_ascii=False))
    except InputError as exc:
        print(f"judge-mcp: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    return 0


def _no_database(path: Path | str, command: str, why: str) -> str | None:
    """Why a reading command (stats, sessions) has no SQLite database to read at `path`, or None when it has one. A
    reader never creates a database: a wrong path (JUDGE_MCP_DB set for the MCP client, not in this shell) must not
    look like an empty one."""
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.values import DENIED, path_kind

    kind = path_kind(path) if isinstance(path, Path) else "file"  # a PostgreSQL URL: its server says
    if kind == "denied":
        return f"judge-mcp {command}: cannot read the database {str(path)!r}: {DENIED}"
    if kind == "missing":
        return f"judge-mcp {command}: no database at {str(path)!r} ({why})"
    return None  # a file, or something else at the path: opening it says what is wrong


def cmd_stats(args: argparse.Namespace) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.stats import report as stats
    from judge_mcp.cli.stats_table import empty_log, render_stats
    from judge_mcp.storage import open_store, verdict_stats
    from judge_mcp.storage.migrations import MIGRATIONS

    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.storage.pg_url import is_postgres_url, shown

    if args.db is not None:
        path: Path | str = args.db if is_postgres_url(args.db) else Path(args.db)
    else:
        # lazy: each subcommand loads only what it runs (a `serve` start stays short)
        from judge_mcp.config.settings import ConfigError, load_settings

        try:
            path = load_settings().database
        except ConfigError as exc:
            print(f"judge-mcp stats: configuration error: {exc} (or give --db PATH)", file=sys.stderr)
            return 2
    missing = _no_database(path, "stats", "nothing logged there yet, or a wrong --db / JUDGE_MCP_DB")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.settings import ConfigError as SettingError, cached_input_price

    try:
        price = cached_input_price(os.environ)
    except SettingError as exc:
        print(f"judge-mcp stats: configuration error: {exc}", file=sys.stderr)
        return 2
    store = open_store(path, MIGRATIONS)
    try:
        report = stats.from_store(store, args.last, price)
        # none of this tenant's: whose the log holds, so that a wrong --tenant does not read as an empty log
        others = {t: n for t, n in verdict_stats.tenants_logged(store).items() if t != args.tenant} if not report.all_time.verdicts else {}
    finally:
        store.close()
    if args.json:
        print(report.model_dump_json(indent=2))
        if others:
            print(f"judge-mcp stats: {empty_log(args.tenant, others)}", file=sys.stderr)
    else:
        print(f"{shown(str(path))}\n\n{render_stats(report, tenant=args.tenant, others=others)}")
    return 0


# ---- judge-mcp stats: the report as two tables ------------------------------------------------------------------
def _tenant(value: str) -> str:
    if not tenants.NAME.fullmatch(value):
        raise argparse.ArgumentTypeError("a tenant name matches [A-Za-z0-9_.-]{1,64}")
    return value


def _last(value: str) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.stats import report as stats

    try:
        return stats.check_last(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


SERVE_ENVIRONMENT = """\
environment (set by the MCP client's "env" block or the shell):
  JUDGE_MCP_BACKEND      local | openai (any OpenAI-compatible server) | anthropic  [default: local]
  JUDGE_MCP_MODEL        model name; for local, a GGUF path      [default: the bundled SmolLM2-135M-Instruct
                                                                 (local), gpt-4o-mini, claude-sonnet-4-5]
  JUDGE_MCP_BASE_URL     e.g. http://127.0.0.1:8000/v1           [default: the provider's public URL]
  JUDGE_MCP_API_KEY      the backend's key                       [default: OPENAI_API_KEY / ANTHROPIC_API_KEY,
                                                                 sent only to the provider's own URL]
  JUDGE_MCP_DB           SQLite file holding all state           [default: {db}]
                         or a postgresql://user:password@host/db URL or a keyword DSN
                         (host=... password=... dbname=...): replicas sharing one database
  JUDGE_MCP_CONFIG       TOML file with [backends.NAME] tables   [default: none]
  JUDGE_MCP_HTTP_TOKEN   bearer token for --transport http       [default: none, then loopback binds only]
  JUDGE_MCP_HTTP_TOKENS  file of `TOKEN TENANT` lines: a token    [default: none]
                         per tenant (`#` comments)
  JUDGE_MCP_OAUTH_ISSUER, JUDGE_MCP_OAUTH_AUDIENCE  also accept the issuer's JWT access tokens [default: none]
                         (JUDGE_MCP_OAUTH_JWKS_URL, JUDGE_MCP_OAUTH_TENANT_CLAIM: its keys, the tenant's claim)
  JUDGE_MCP_HTTP_STATELESS  1: as serve --stateless              [default: 0]
  JUDGE_MCP_HTTP_MAX_BODY_BYTES  request-body limit over HTTP   [default: fits one call's images, ~29 MiB]
  JUDGE_MCP_IMAGE_DIRS   folders (separated by '{sep}') an image    [default: none: data: URIs only]
                         argument may name a file in; stdio only
  JUDGE_MCP_CONCURRENCY  most calls in flight per backend (the   [default: 256 for openai and anthropic,
                         limit adapts below it on 429/503)       4 (its slots) for local]
  JUDGE_MCP_TIMEOUT_S    seconds to wait for a reply to start    [default: 120; a local server on CPU: 600]
                         (the rest of it: min(30, this); a backend call, retries included, ends within
                         2 x (this + min(30, this)) seconds of getting its slot)
  JUDGE_MCP_MAX_RETRIES  retries of a refused call (429, 5xx,    [default: 3; a timed-out attempt is
                         connection errors)                      retried once at most]
  JUDGE_MCP_MAX_OUTPUT_TOKENS  local only: cap on every answer's token budget   [default: none, the method's]
  JUDGE_MCP_MMPROJ       local only: the model's multimodal      [default: none: no images on local]
                         projector (mmproj GGUF file)
  JUDGE_MCP_STRUCTURED_OUTPUT  auto: JSON schema until the server refuses it,   [default: auto]
                               then text grammars; json_schema: always; off: never
  JUDGE_MCP_CACHE_MAX_AGE_DAYS     cached answers older than this are deleted at start   [default: kept]
  JUDGE_MCP_VERDICTS_MAX_AGE_DAYS  verdict-log rows older than this are deleted at start [default: kept]
  JUDGE_MCP_SHARED_OPTION_POOL     1: grade_score_options' unrelated option may come from  [default: 0, the
                                   options stored by earlier calls of any client            built-in pool only]
  JUDGE_MCP_SHARED_CACHE  1: tenants share the cached answers of configured backends   [default: 0, each
                          (a hit tells one what another sent)                        tenant its own]
  JUDGE_MCP_OTEL         1: OpenTelemetry traces (the otel extra)  [default: on when OTEL_EXPORTER_OTLP_ENDPOINT
                         0: none, whatever OTEL_* says             or OTEL_TRACES_EXPORTER is set]
  JUDGE_MCP_OTEL_CAPTURE_TEXT  1: spans may carry judged and model text   [default: 0, never]
"""


def _version() -> str:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("judge-mcp")
    except PackageNotFoundError:  # a source tree on sys.path without an install
        # lazy: each subcommand loads only what it runs (a `serve` start stays short)
        from judge_mcp._version import __version__

        return __version__


def cmd_gc(args: argparse.Namespace) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.settings import load_settings
    from judge_mcp.storage import open_store, retention
    from judge_mcp.storage.migrations import MIGRATIONS

    settings = load_settings()
    cache_days = args.cache_days if args.cache_days is not None else settings.cache_max_age_days
    verdict_days = args.verdict_days if args.verdict_days is not None else settings.verdicts_max_age_days
    if cache_days is None and verdict_days is None and not args.vacuum:
        print(
            "judge-mcp gc: nothing to do: give --cache-days and/or --verdict-days "
            "(or set JUDGE_MCP_CACHE_MAX_AGE_DAYS / JUDGE_MCP_VERDICTS_MAX_AGE_DAYS), or --vacuum",
            file=sys.stderr,
        )
        return 2
    store = open_store(settings.database, MIGRATIONS)
    on_file = settings.db_url is None  # a PostgreSQL database has no file of its own to measure
    try:
        before = settings.db_path.stat().st_size if on_file else 0
        counts = retention.gc(
            store,
            cache_older_than_s=None if cache_days is None else cache_days * 86400,
            verdicts_older_than_s=None if verdict_days is None else verdict_days * 86400,
            vacuum=args.vacuum,
        )
        store.checkpoint()
        after = settings.db_path.stat().st_size if on_file else 0
    finally:
        store.close()
    deleted = f"deleted {counts['call_cache']} call-cache rows, {counts['verdicts']} verdict rows and {counts['texts']} unused reply texts"
    if not on_file:
        # lazy: each subcommand loads only what it runs (a `serve` start stays short)
        from judge_mcp.storage.pg_url import shown

        print(f"{shown(settings.db_url or '')}: {deleted}")
        return 0
    print(f"{settings.db_path}: {deleted}; {before:,} -> {after:,} bytes")
    return 0


def _days(value: str) -> float:
    try:
        days = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {value!r}") from None
    if not days >= 0 or days == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days >= 0, got {value!r}")
    return days


def _port(value: str) -> int:
    """A TCP port (0: the system picks a free one, which the start line names); anything else is a usage error, not
    the OverflowError uvicorn's bind would end the server with."""
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535 (0: any free port), got {value!r}")
    return port


def _db_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--db", metavar="PATH", help=help)


def _add_state_commands(sub: Any) -> None:
    """The subcommands that read or clean the database: sessions, gc, stats."""
    sessions = sub.add_parser("sessions", help="inspect LWE sessions")
    sessions.add_argument("action", choices=["list", "show", "export"])
    sessions.add_argument("session", nargs="?", default="default")
    sessions.add_argument("--tenant", type=_tenant, default="local", help="whose sessions (a tenant of the HTTP tokens; default: %(default)s)")
    _db_option(sessions, "the database to read (default: JUDGE_MCP_DB or the per-user data directory)")
    sessions.set_defaults(fn=cmd_sessions)

    gc = sub.add_parser(
        "gc",
        help="delete old call-cache and verdict-log rows (LWE sessions are never touched)",
        description="Delete call-cache rows and verdict-log rows older than the given ages from the database "
        "(JUDGE_MCP_DB). LWE sessions, versions and feedback are never touched. The same ages set as "
        "JUDGE_MCP_CACHE_MAX_AGE_DAYS / JUDGE_MCP_VERDICTS_MAX_AGE_DAYS are applied at every server start.",
    )
    gc.add_argument("--cache-days", type=_days, help="delete cached model answers older than this many days (default: JUDGE_MCP_CACHE_MAX_AGE_DAYS)")
    gc.add_argument("--verdict-days", type=_days, help="delete verdict-log rows older than this many days (default: JUDGE_MCP_VERDICTS_MAX_AGE_DAYS)")
    gc.add_argument("--vacuum", action="store_true", help="then rewrite the file so the freed space goes back to the filesystem")
    _db_option(gc, "the database to clean (default: JUDGE_MCP_DB or the per-user data directory)")
    gc.set_defaults(fn=cmd_gc)

    stats_cmd = sub.add_parser(
        "stats",
        help="bias telemetry from the verdict log, per backend/model/tool (all time and the last N verdicts)",
        description="Position bias, order inconsistency, parse failures and re-asks, ties, length preference, and mean "
        "calls and latency of each backend/model/tool, computed from the verdict log over all time and over the newest N "
        "verdicts. Each rate is shown as `rate (count/denominator)`; `-` means nothing to count yet. The same report "
        "is the MCP resource judge://stats (judge://stats/last/{n}) and the read-only tool judge_stats.",
    )
    stats_cmd.add_argument("--last", type=_last, default=100, metavar="N", help="size of the recent window, 1 to 1,000,000 (default: %(default)s)")
    stats_cmd.add_argument("--json", action="store_true", help="print the report as JSON (the resource's form) instead of tables")
    _db_option(stats_cmd, "the database to read (default: JUDGE_MCP_DB or the per-user data directory); e.g. the bench's "
               "bench.db beside it for a bench run's verdicts")
    stats_cmd.add_argument("--tenant", type=_tenant, default="local", help="whose verdicts (a tenant of the HTTP tokens; default: %(default)s)")
    stats_cmd.set_defaults(fn=cmd_stats)


def build_parser(bench: bool = True) -> argparse.ArgumentParser:
    """The command line; without `bench` (for a `serve` start: `_serving`), without the bench's subcommands, which
    parse nothing of a `serve` command line and cost ~7 ms of imports."""
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.settings import default_db_path
    from judge_mcp.config.table import serve_help

    parser = argparse.ArgumentParser(prog="judge-mcp", description="An MCP server that gives agents a judge.")
    parser.add_argument("--version", action="version", version=f"judge-mcp {_version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (to stderr)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="run the MCP server (stdio by default)",
        description="Run the MCP server. MCP clients start it as `judge-mcp serve` and speak JSON-RPC over stdio; "
        "`--transport http` serves streamable HTTP at http://HOST:PORT/mcp instead.",
        epilog=serve_help(str(default_db_path(os.environ)), os.pathsep),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="stdio or streamable HTTP (default: %(default)s; no environment variable)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: %(default)s; a non-loopback address needs JUDGE_MCP_HTTP_TOKEN)")
    serve.add_argument("--port", type=_port, default=8765, help="HTTP port (default: %(default)s)")
    serve.add_argument(
        "--stateless",
        action="store_true",
        help="HTTP without MCP sessions, for replicas behind a load balancer with no session affinity (also "
        "JUDGE_MCP_HTTP_STATELESS=1); a client's notifications/cancelled is then lost (closing the request still cancels)",
    )
    serve.set_defaults(fn=cmd_serve)

    demo = sub.add_parser("demo", help="start the server, call every tool once through the MCP client, print the verdicts")
    _db_option(demo, "keep the demo's verdicts in this database (default: JUDGE_MCP_DB if set, else a temporary one, "
               "removed at the end, so your own log stays as it was)")
    demo.set_defaults(fn=cmd_demo)

    _add_state_commands(sub)

    if bench:
        # lazy: each subcommand loads only what it runs (a `serve` start stays short)
        from judge_mcp.bench import add_parser as add_bench

        add_bench(sub)
    # -v also after the subcommand (`judge-mcp serve -v`); SUPPRESS keeps a -v given before it.
    for subparser in sub.choices.values():
        subparser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging (to stderr)")
    return parser


def _serving(argv: list[str]) -> bool:
    """The command line is `serve`'s: its first word other than -v is `serve` (so `--help` or `--version` before it
    still reach the whole parser)."""
    words = [a for a in argv if a not in ("-v", "--verbose")]
    return bool(words) and words[0] == "serve"


def main(argv: list[str] | None = None) -> int:
    # No cyclic collection during the start-up imports (it re-scanned the SDK's, pydantic's and our long-lived objects:
    # ~15% of the start); on again once `serve` froze them (runtime/startup.py's settle_heap), for any other command at once.
    gc.disable()
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C anywhere else (while importing, a command without its own handling): no traceback
        print("judge-mcp: stopped (Ctrl-C)", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:  # stdout closed by its reader (`judge-mcp demo | head`): stop quietly, as a pipe's writer does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the interpreter's last flush has somewhere to go
        return 141  # 128 + SIGPIPE
    finally:
        gc.enable()


def _run(argv: list[str] | None) -> int:
    # lazy: each subcommand loads only what it runs (a `serve` start stays short)
    from judge_mcp.config.settings import ConfigError
    from judge_mcp.storage.engine import StoreError

    args = build_parser(bench=not _serving(sys.argv[1:] if argv is None else argv)).parse_args(argv)
    if args.fn is not cmd_serve:
        gc.enable()
    _setup_logging(args.verbose)
    if getattr(args, "db", None):  # --db of a command that reads or writes state: JUDGE_MCP_DB for this run
        os.environ["JUDGE_MCP_DB"] = str(args.db)  # bench parses --db as a Path
    try:
        with tenants.acting(getattr(args, "tenant", tenants.LOCAL)):  # the tenant whose state a command reads (tenants.py)
            return int(args.fn(args) or 0)
    except (ConfigError, StoreError) as exc:  # a setting, an HTTP bind refused for want of a token, the store: exit 2
        print(f"judge-mcp: {'configuration error: ' if isinstance(exc, ConfigError) else ''}{exc}", file=sys.stderr)
        return 2
