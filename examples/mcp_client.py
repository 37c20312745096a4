"""Talk to KnowHub's MCP server with the official `mcp` SDK: over stdio (spawning `manage.py mcp`) or HTTP.

    KNOWHUB_TOKEN=kh_... .venv/bin/python -m examples.mcp_client stdio
    KNOWHUB_TOKEN=kh_... KNOWHUB_MCP_URL=http://localhost:8001 .venv/bin/python -m examples.mcp_client http

For an MCP host (Claude Desktop, an IDE), configure the same command:
    {"command": "/path/to/knowhub/.venv/bin/python", "args": ["/path/to/knowhub/manage.py", "mcp"],
     "env": {"KNOWHUB_TOKEN": "kh_..."}}
or the URL http://localhost:8001/mcp (the MCP server `make run` starts on MCP_PORT) with the header "Authorization: Bearer kh_...".
"""
import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def session_for(transport: str, token: str, base_url: str, env: dict | None = None):
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp"], cwd=str(REPO),
                                       env={**(env or os.environ), "KNOWHUB_TOKEN": token})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
    else:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http, \
                streamable_http_client(base_url.rstrip("/") + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def demo(transport: str, token: str, base_url: str, env: dict | None = None) -> dict:
    async with session_for(transport, token, base_url, env) as session:
        print("tools:", ", ".join(t.name for t in (await session.list_tools()).tools))
        await session.call_tool("knowledge_save", {"task": "Log in to site A", "content": "Use the test account",
                                                   "types": ["tool"]})
        result = await session.call_tool("knowledge_search", {"query": "site A login", "top_k": 3})
        found = json.loads(result.content[0].text)
        print(json.dumps(found, ensure_ascii=False, indent=2))
        return found


if __name__ == "__main__":
    anyio.run(demo, sys.argv[1] if len(sys.argv) > 1 else "stdio", os.environ["KNOWHUB_TOKEN"],
              os.environ.get("KNOWHUB_MCP_URL", "http://localhost:8001"))
