"""The MCP transports: stdio (line-level JSON-RPC hygiene) and streamable HTTP (auth, Host/Origin checks, limits)."""
