from judge_mcp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
