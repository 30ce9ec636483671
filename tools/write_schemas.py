"""`make schemas`: rewrite judge_mcp/server/schemas.json from the tools' argument and result models.

    .venv/bin/python tools/write_schemas.py
"""

from judge_mcp.server import schemas
from judge_mcp.server.tools import TOOLS

if __name__ == "__main__":
    print(f"wrote {schemas.write(TOOLS)}")
