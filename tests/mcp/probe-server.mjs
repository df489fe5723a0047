#!/usr/bin/env node
// A stdio MCP server on the official TypeScript SDK whose tools misbehave on request, for the
// app's tests of what the reference servers never do: crash, hang, notice a cancellation, change
// their tool list. What happened is written to stderr, which the app keeps and the tests read.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "probe", version: "1.0.0" });
const say = (line) => process.stderr.write(`${line}\n`);

server.registerTool(
  "slow",
  {
    description: "Waits `seconds`, reporting progress each second; notices a cancellation.",
    inputSchema: { seconds: z.number() },
    annotations: { readOnlyHint: true },
  },
  async ({ seconds }, extra) => {
    for (let i = 1; i <= seconds; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      if (extra.signal.aborted) {
        say(`cancelled ${extra.requestId}`);
        return { content: [{ type: "text", text: "cancelled" }] };
      }
      const token = extra._meta?.progressToken;
      if (token !== undefined) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken: token, progress: i, total: seconds, message: `step ${i}` },
        });
      }
    }
    return { content: [{ type: "text", text: `waited ${seconds}` }] };
  },
);

server.registerTool(
  "crash",
  { description: "Exits the process at once.", inputSchema: {} },
  async () => {
    say("crashing on purpose");
    process.exit(3);
  },
);

server.registerTool(
  "hang",
  { description: "Never answers.", inputSchema: {} },
  () => new Promise(() => {}),
);

server.registerTool(
  "write_note",
  {
    title: "Write a note",
    description: "Writes a note (a write the app must hold).",
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: false, destructiveHint: true },
  },
  async ({ text }) => {
    say(`wrote ${text}`);
    return { content: [{ type: "text", text: `noted: ${text}` }] };
  },
);

server.registerTool(
  "noop",
  { description: "Answers at once with nothing (the benchmark's tool).", inputSchema: {} },
  async () => ({ content: [] }),
);

server.registerTool(
  "fail_with",
  { description: "Answers an error result with `text` (as servers wrapping an API do).", inputSchema: { text: z.string() } },
  async ({ text }) => ({ isError: true, content: [{ type: "text", text }] }),
);

let added = false;
server.registerTool(
  "add_tool",
  { description: "Adds the tool `late` and says the tool list changed.", inputSchema: {} },
  async () => {
    if (!added) {
      added = true;
      server.registerTool("late", { description: "Added at run time.", inputSchema: {} }, async () => ({
        content: [{ type: "text", text: "late" }],
      }));
    }
    return { content: [{ type: "text", text: "added" }] };
  },
);

say("probe server up");
await server.connect(new StdioServerTransport());
