"""The command line: `judge-mcp serve | demo | bench | stats | sessions | gc`, the demo and the terminal texts."""
