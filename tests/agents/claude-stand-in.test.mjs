// The real Claude Code CLI against the scripted model server (crates/emulator, its Anthropic
// Messages endpoint) and the stand-in permission gate (stand-in-gate.mjs), through claude.mjs:
// the model has Claude run two Bash commands; the gate allows the first, which runs once, and
// denies the second, which never runs, and its reason reaches the model in the tool result.
// This proves the harness before the companion's own MCP server takes the gate's place.
//
// The model server binary is MODEL_SERVER_BIN when set, else built (or found up to date) with
// cargo, which honours CARGO_TARGET_DIR.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { runClaude } from "./claude.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

const ALLOWED = "echo ALLOWED >> ran.txt";
const DENIED = "echo DENIED >> denied.txt";

// Appending (>>) rather than writing makes a second run visible in the file.
const script = {
  // Claude Code may ask side questions (a title, a summary) a script cannot foresee.
  fallback: "OK.",
  steps: [
    {
      when: { role: "user", contains: "ran.txt" },
      reply: {
        text: "I'll write the file.",
        tool_calls: [{ name: "Bash", arguments: { command: ALLOWED, description: "Append to ran.txt" } }],
      },
    },
    // Listed before the answer to any Bash result, so the denial is told apart.
    {
      when: { role: "tool", tool: "Bash", contains: "not on the list" },
      reply: { text: "The second command was refused: not on the list." },
    },
    {
      when: { role: "tool", tool: "Bash" },
      reply: {
        text: "Now the other one.",
        tool_calls: [{ name: "Bash", arguments: { command: DENIED, description: "Append to denied.txt" } }],
      },
    },
  ],
};

let dir;
let server;
let baseUrl;

/** The model server's binary: MODEL_SERVER_BIN, or what cargo builds. */
function modelServerBinary() {
  if (process.env.MODEL_SERVER_BIN) return process.env.MODEL_SERVER_BIN;
  const out = execFileSync(
    "cargo",
    ["build", "--locked", "-p", "emulator", "--bin", "model-server", "--message-format=json-render-diagnostics"],
    { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 },
  );
  const built = out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l))
    .find((m) => m.reason === "compiler-artifact" && m.target?.name === "model-server" && m.executable);
  assert.ok(built, "cargo built no model-server binary");
  return built.executable;
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "claude-stand-in-"));
  writeFileSync(path.join(dir, "script.json"), JSON.stringify(script));
  server = spawn(
    modelServerBinary(),
    ["--script", path.join(dir, "script.json"), "--log", path.join(dir, "model.jsonl")],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  // Its first line is the base URL.
  baseUrl = await new Promise((resolve, reject) => {
    server.on("error", reject);
    server.on("exit", (code) => reject(new Error(`model-server exited with ${code}`)));
    createInterface({ input: server.stdout }).once("line", resolve);
  });
});

after(() => {
  // SIGINT is its Ctrl-C: it writes the rest of its log and stops.
  server?.kill("SIGINT");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The JSON lines of a log file. */
function lines(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** The tool_result blocks of a Messages request's last message. */
function toolResults(request) {
  const last = request.body.messages.at(-1);
  return Array.isArray(last.content) ? last.content.filter((b) => b.type === "tool_result") : [];
}

test("a command the gate allows runs once; one it denies never runs and the model hears why", async () => {
  const work = path.join(dir, "work");
  mkdirSync(work);
  const gateLog = path.join(dir, "gate.jsonl");
  const run = await runClaude({
    prompt: "Please append ALLOWED to ran.txt, then try the other command.",
    mcpConfig: {
      mcpServers: {
        gate: {
          type: "stdio",
          command: process.execPath,
          args: [path.join(here, "stand-in-gate.mjs")],
          env: { GATE_LOG: gateLog },
        },
      },
    },
    permissionTool: "mcp__gate__approve",
    modelBaseUrl: baseUrl,
    cwd: work,
    timeoutMs: 90_000,
  });
  const why = `exit ${run.code}${run.timedOut ? " (timed out)" : ""}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;
  assert.equal(run.code, 0, why);
  assert.equal(run.json?.is_error, false, why);
  assert.equal(run.json.result, "The second command was refused: not on the list.", why);

  // The gate was asked about both commands, in order, in the shape claude.mjs describes.
  const asked = lines(gateLog);
  assert.deepEqual(
    asked.map((c) => [c.arguments.tool_name, c.arguments.input.command]),
    [
      ["Bash", ALLOWED],
      ["Bash", DENIED],
    ],
  );
  for (const call of asked) assert.match(call.arguments.tool_use_id, /^toolu_/);

  // The allowed command ran exactly once; the denied one not at all.
  assert.equal(readFileSync(path.join(work, "ran.txt"), "utf8"), "ALLOWED\n");
  assert.equal(existsSync(path.join(work, "denied.txt")), false);
  assert.deepEqual(
    run.json.permission_denials.map((d) => [d.tool_name, d.tool_input.command]),
    [["Bash", DENIED]],
  );

  // What the model was sent: each step answered once, the allowed command's result, then the
  // denial's reason as an error result for the denied call.
  await new Promise((r) => setTimeout(r, 300)); // the server writes its log every 100 ms
  const requests = lines(path.join(dir, "model.jsonl")).filter((r) => r.path === "/v1/messages");
  const answered = (step) => requests.filter((r) => r.step === step);
  for (const step of [0, 1, 2]) assert.equal(answered(step).length, 1, `step ${step} answered once`);
  const [allowedResult] = toolResults(answered(2)[0]);
  assert.equal(allowedResult.tool_use_id, asked[0].arguments.tool_use_id);
  assert.notEqual(allowedResult.is_error, true);
  const [denial] = toolResults(answered(1)[0]);
  assert.equal(denial.tool_use_id, asked[1].arguments.tool_use_id);
  assert.equal(denial.is_error, true);
  const text = typeof denial.content === "string" ? denial.content : denial.content.map((b) => b.text).join("");
  assert.match(text, /not on the list/);
});
