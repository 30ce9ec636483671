"""judge-mcp serve | demo | sessions (and bench, see bench.py)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

import anyio


def _setup_logging(verbose: bool = False) -> None:
    # stdout belongs to JSON-RPC in stdio mode: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from judge_mcp import redaction

    redaction.install()  # backend credentials are blanked out of every record, whoever logs it


def cmd_serve(args: argparse.Namespace) -> int:
    from judge_mcp.config import ConfigError, load_settings
    from judge_mcp.server import build_server

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"judge-mcp: configuration error: {exc}", file=sys.stderr)
        return 2
    from judge_mcp.app import App

    app = App(settings)
    server = build_server(app)
    if args.transport == "stdio":
        from judge_mcp.stdio import serve_stdio

        anyio.run(serve_stdio, server)
        return 0
    from judge_mcp.http_transport import serve_http

    anyio.run(lambda: serve_http(server, host=args.host, port=args.port, token=settings.http_token))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from judge_mcp.demo import run_demo

    return anyio.run(run_demo)


def cmd_sessions(args: argparse.Namespace) -> int:
    from judge_mcp.config import load_settings
    from judge_mcp.methods import lwe
    from judge_mcp.store import Store
    from judge_mcp.validation import InputError

    store = Store(load_settings().db_path)
    try:
        if args.action == "list":
            rows = lwe.list_sessions(store)
            if not rows:
                print("no LWE sessions yet")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="judge-mcp", description="An MCP server that gives agents a judge.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (to stderr)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765)
    serve.set_defaults(fn=cmd_serve)

    demo = sub.add_parser("demo", help="start the server, call every tool once through the MCP client, print the verdicts")
    demo.set_defaults(fn=cmd_demo)

    sessions = sub.add_parser("sessions", help="inspect LWE sessions")
    sessions.add_argument("action", choices=["list", "show", "export"])
    sessions.add_argument("session", nargs="?", default="default")
    sessions.set_defaults(fn=cmd_sessions)

    from judge_mcp.bench import add_parser as add_bench

    add_bench(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from judge_mcp.store import StoreError

    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return int(args.fn(args) or 0)
    except StoreError as exc:
        print(f"judge-mcp: {exc}", file=sys.stderr)
        return 2
