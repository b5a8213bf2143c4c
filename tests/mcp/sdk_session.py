"""Drives Noema's MCP endpoint with the official MCP Python SDK (PyPI `mcp`).

Run by tests/tests/mcp.rs with the pinned SDK's interpreter (scripts/lib/mcp_sdk.sh):

    python sdk_session.py URL TOKEN MODE CALLS_JSON

MODE is the SDK's connect mode: `legacy` (the initialize handshake) or `auto`
(`server/discover`, falling back to the handshake). CALLS_JSON is a list of
`{"name": ..., "arguments": {...}}`. The script connects with `Authorization: Bearer TOKEN`,
pings (handshake-era sessions), lists every tool page by page, calls each tool in order and prints one JSON
document: the negotiated version, the server's name, the listed tool names, the number of
pages, and per call either its result (`is_error`, `structured`, `text`) or the protocol
error (`code`, `message`). The Rust test decides what is right; this only reports.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def session(url: str, token: str, mode: str, calls: list) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:
            if mode == "legacy":
                # 2026-07-28 removed ping; handshake-era sessions still have it.
                await client.send_ping()
            names: list[str] = []
            pages = 0
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                pages += 1
                names.extend(tool.name for tool in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            results = []
            for call in calls:
                try:
                    result = await client.call_tool(call["name"], call.get("arguments") or {})
                except MCPError as err:
                    results.append({"error": {"code": err.code, "message": err.error.message}})
                    continue
                texts = [block.text for block in result.content if block.type == "text"]
                results.append(
                    {
                        "is_error": result.is_error,
                        "structured": result.structured_content,
                        "text": "".join(texts),
                    }
                )
            info = client.server_info
            return {
                "protocol_version": client.protocol_version,
                "server": info.name if info is not None else None,
                "tools": names,
                "pages": pages,
                "results": results,
            }


def main() -> None:
    url, token, mode, calls = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    report = asyncio.run(session(url, token, mode, calls))
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
