"""A connected agent written with the official Python MCP SDK (PyPI `mcp`), run by
crates/companion/tests/agents_clients.rs against the companion, which plays the user.

    python py_client.py <url>     (the token in FEISHU_COMPANION_TOKEN)

It connects through the SDK's Streamable HTTP client with the token in an Authorization header,
in the SDK's default mode ("auto": it probes `server/discover` first and falls back to the
initialize handshake, as every client built on this SDK does). Then the same plan as
ts-client.mjs's `full`: lists the tools, asks request_approval (the Rust test approves it),
approve with a Bash command (approved with the command edited to EDITED) and approve with
another (rejected with REASON); each call must hear progress while it waits.

Prints one JSON report on stdout ({server, protocol, tools, calls: [{tool, answer, progress}]})
and exits non-zero on any mismatch. Installed by tests/agents/install-python-sdk.
"""

import asyncio
import json
import os
import sys
import traceback

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

EDITED = "npm test -- --ci"
REASON = "not on a Friday"

problems: list[str] = []
report: dict = {"server": None, "protocol": None, "tools": [], "calls": []}


def expect(ok: bool, what: str) -> None:
    if not ok:
        problems.append(what)


async def call(client: Client, tool: str, args: dict) -> dict:
    """Calls `tool`, recording its answer (the first text block, parsed) and the progress heard."""
    progress: list[str] = []

    async def heard(_progress: float, _total: float | None, message: str | None) -> None:
        progress.append(message or "")

    result = await client.call_tool(tool, args, progress_callback=heard)
    text = result.content[0].text if result.content and result.content[0].type == "text" else ""
    try:
        answer = json.loads(text)
    except ValueError:
        answer = text
    entry = {"tool": tool, "answer": answer, "isError": result.is_error, "progress": progress}
    report["calls"].append(entry)
    expect(bool(progress), f"{tool}: no progress notification while it waited")
    expect(
        any("approval" in m.lower() for m in progress),
        f"{tool}: no progress said it waits for approval: {progress}",
    )
    return entry


async def main(url: str) -> None:
    token = os.environ.get("FEISHU_COMPANION_TOKEN", "")
    # Long reads: a held call's stream stays open while the user decides.
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=300),
    )
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        info = client.server_info
        report["server"] = info.model_dump(by_alias=True, exclude_none=True) if info else None
        report["protocol"] = client.protocol_version
        expect(bool(info) and info.name == "feishu-companion", f"the server calls itself {report['server']}")

        listed = await client.list_tools()
        report["tools"] = [t.name for t in listed.tools]
        for name in ("approve", "request_approval"):
            expect(name in report["tools"], f"tools/list lacks {name}")

        yes = await call(client, "request_approval", {"summary": "Publish the release notes"})
        expect(yes["answer"] == {"approved": True}, f"request_approval answered {yes['answer']}")

        edited = await call(
            client,
            "approve",
            {
                "tool_name": "Bash",
                "input": {"command": "npm test", "description": "Run the tests"},
                "tool_use_id": "toolu_py_1",
            },
        )
        wanted = {"behavior": "allow", "updatedInput": {"command": EDITED, "description": "Run the tests"}}
        expect(edited["answer"] == wanted, f"the edited approval answered {edited['answer']}")

        no = await call(client, "approve", {"tool_name": "Bash", "input": {"command": "rm -rf build"}})
        answer = no["answer"] if isinstance(no["answer"], dict) else {}
        expect(answer.get("behavior") == "deny", f"the rejection answered {no['answer']}")
        expect(REASON in str(answer.get("message")), f"the rejection's message lacks the reason: {no['answer']}")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1]))
    except BaseException:  # noqa: BLE001 - any failure is reported, with its trace, as a problem
        problems.append("failed: " + traceback.format_exc())
    report["problems"] = problems
    print(json.dumps(report), flush=True)
    sys.exit(1 if problems else 0)
