"""judge-mcp: an MCP server that gives coding agents and chat clients a judge they can call."""

__version__ = "0.1.0"
