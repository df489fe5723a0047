#!/usr/bin/env node
// A stand-in for the companion's permission gate: a stdio MCP server on the official TypeScript
// SDK with one tool, `approve`, in the shape Claude Code's --permission-prompt-tool calls (see
// claude.mjs). It allows a Bash command containing "ALLOWED" and denies anything else with the
// message "not on the list", so the harness can be proven before the companion's own MCP server
// exists.
//
// Every call is appended to the file in GATE_LOG as one JSON line {arguments, answer}, the
// arguments as Claude Code sent them (unknown fields kept), so a test can check what was asked.
import { appendFileSync } from "node:fs";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const log = process.env.GATE_LOG;
const server = new McpServer({ name: "stand-in-gate", version: "1.0.0" });

server.registerTool(
  "approve",
  {
    description: "Decides whether Claude Code may use a tool.",
    // Loose: fields a later Claude Code adds are kept for the log instead of stripped.
    inputSchema: z.looseObject({
      tool_name: z.string(),
      input: z.record(z.string(), z.unknown()),
      tool_use_id: z.string().optional(),
    }),
  },
  async (args) => {
    const command = typeof args.input.command === "string" ? args.input.command : "";
    const answer = command.includes("ALLOWED")
      ? { behavior: "allow", updatedInput: args.input }
      : { behavior: "deny", message: "not on the list" };
    if (log) appendFileSync(log, `${JSON.stringify({ arguments: args, answer })}\n`);
    // Claude Code reads the answer from the first content block, which must be text holding
    // the JSON (not structuredContent).
    return { content: [{ type: "text", text: JSON.stringify(answer) }] };
  },
);

await server.connect(new StdioServerTransport());
