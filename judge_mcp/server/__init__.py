"""The MCP shell: the server's build, one function per tool, the shipped schemas and the transports."""
