// Runs the real Claude Code CLI (@anthropic-ai/claude-code from npm, pinned in package.json)
// against a model server and MCP servers of the test's choosing, and nothing else.
//
// What was found in the installed package (2.1.332), and checked by running it:
//
// - Install. The npm package is a stub: its `bin/claude.exe` only prints an error until its
//   postinstall copies the native binary (a ~400 MB executable) over it from the platform's
//   optional dependency (@anthropic-ai/claude-code-linux-x64 and so on). Both come from the npm
//   registry alone. npm 12 blocks install scripts it was not told to allow, older npm runs them,
//   so .npmrc here sets ignore-scripts=true for every npm to behave the same: this harness runs
//   the platform package's binary itself, as the package's own cli-wrapper.cjs does. Nothing is
//   downloaded at run time.
//
// - Driving it. `-p PROMPT` (print mode) runs one conversation to its end without a terminal;
//   `--output-format json` prints one result document (`result`, `num_turns`, `is_error`,
//   `permission_denials`, ...), `stream-json` every message as a JSON line and needs `--verbose`.
//   `--mcp-config FILE|JSON` with `--strict-mcp-config` gives it our MCP servers and no others.
//
// - `--permission-prompt-tool mcp__<server>__<tool>` (a hidden option: `claude --help` does not
//   list it). When a tool needs permission (Bash, Write, ... in the default permission mode),
//   Claude Code calls that MCP tool with the arguments
//     {"tool_name": "Bash", "input": {"command": "...", "description": "..."}, "tool_use_id": "toolu_..."}
//   (tool_use_id optional in its schema; an MCP skill's call adds `mcp_skill_ask`). A Bash
//   command it deems read-only (`ls -la`) runs without asking anyone, so a test of the gate
//   uses one that writes. It reads the answer from the result's FIRST content block, which must
//   be {"type": "text"} holding JSON (structuredContent is not read):
//     {"behavior": "allow", "updatedInput": {...}}   updatedInput optional; when given, it is what
//                                                    runs (an edited command runs edited)
//     {"behavior": "deny", "message": "..."}         the message becomes the tool_result the model
//                                                    gets next, with is_error: true
//   (also optional: `updatedPermissions`, `interrupt` on deny, `decisionClassification`). An
//   answer that is not this shape denies the call with "The permission prompt tool returned an
//   invalid permission result". A denial is also listed in the result's `permission_denials`.
//
// - Isolation. ANTHROPIC_BASE_URL (no /v1: it posts to /v1/messages?beta=true, and may probe
//   HEAD /api/hello) and ANTHROPIC_API_KEY (sent as x-api-key; no login, no approval prompt in
//   print mode) point it at our server. Without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 it
//   still looks up api.anthropic.com (its telemetry and the like) and warms its connection to
//   our server with HEAD /api/hello; with it, strace shows no DNS lookup and no connection but
//   the one POST to our server per model turn. DISABLE_AUTOUPDATER, DISABLE_TELEMETRY and
//   DISABLE_ERROR_REPORTING are what that one switch implies, set too in case a release splits
//   them. A fresh HOME and CLAUDE_CONFIG_DIR (it writes .claude.json, sessions, backups and
//   ~/.cache there) keep it from reading or writing this machine's own Claude configuration.
//   The environment is built from nothing but PATH and TMPDIR, so no ANTHROPIC_* or CLAUDE_*
//   variable of the machine leaks in. Managed settings in /etc/claude-code are the one thing it can still
//   read; a test machine has none.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { arch, platform, tmpdir } from "node:os";
import path from "node:path";

const require = createRequire(import.meta.url);

/** The native Claude Code binary of this platform, from its optional dependency. */
export function claudeBinary() {
  const os = platform();
  // glibc or musl, as the package's own wrapper tells them apart.
  const musl = os === "linux" && process.report?.getReport?.().header?.glibcVersionRuntime === undefined;
  const name = `@anthropic-ai/claude-code-${os}-${arch()}${musl ? "-musl" : ""}`;
  const dir = path.dirname(require.resolve(`${name}/package.json`));
  const binary = path.join(dir, os === "win32" ? "claude.exe" : "claude");
  if (!existsSync(binary)) throw new Error(`${name} has no binary at ${binary}; run npm ci in tests/agents`);
  return binary;
}

/**
 * Runs `claude -p prompt` and waits for it to end.
 *
 * - prompt: the user's message.
 * - mcpConfig: the MCP configuration, an object ({mcpServers: {...}}) or a JSON string.
 * - permissionTool: the tool that answers permission prompts, `mcp__<server>__<tool>`.
 * - modelBaseUrl: the model server's root, such as http://127.0.0.1:PORT (a trailing /v1 is
 *   dropped, so the scripted model server's printed base URL can be given as it is).
 * - cwd: where Claude Code works (and its Bash tool runs); a fresh temporary folder if absent.
 * - env: more environment variables (they win over the ones set here).
 * - timeoutMs: how long it may run before it is killed (with every process it started).
 * - outputFormat: "json" (default) or "stream-json".
 * - args: more command-line arguments.
 *
 * Returns {code, signal, timedOut, stdout, stderr, json, cwd}: json is the parsed result document
 * for "json", the list of parsed lines for "stream-json", null when stdout is not that. The
 * temporary HOME is removed; cwd (which the caller may have given) is left as it is.
 */
export async function runClaude({
  prompt,
  mcpConfig,
  permissionTool,
  modelBaseUrl,
  cwd,
  env = {},
  timeoutMs = 120_000,
  outputFormat = "json",
  args = [],
}) {
  if (!prompt) throw new Error("runClaude needs a prompt");
  if (!modelBaseUrl) throw new Error("runClaude needs modelBaseUrl");
  const home = mkdtempSync(path.join(tmpdir(), "claude-home-"));
  const configDir = path.join(home, ".claude");
  mkdirSync(configDir);
  const workDir = cwd ?? mkdtempSync(path.join(tmpdir(), "claude-work-"));
  const argv = ["-p", prompt, "--output-format", outputFormat];
  if (outputFormat === "stream-json") argv.push("--verbose");
  if (mcpConfig !== undefined) {
    const file = path.join(home, "mcp.json");
    writeFileSync(file, typeof mcpConfig === "string" ? mcpConfig : JSON.stringify(mcpConfig));
    argv.push("--mcp-config", file, "--strict-mcp-config");
  }
  if (permissionTool) argv.push("--permission-prompt-tool", permissionTool);
  argv.push(...args);
  const childEnv = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    CLAUDE_CONFIG_DIR: configDir,
    XDG_CONFIG_HOME: path.join(home, ".config"),
    XDG_CACHE_HOME: path.join(home, ".cache"),
    XDG_DATA_HOME: path.join(home, ".local", "share"),
    XDG_STATE_HOME: path.join(home, ".local", "state"),
    TMPDIR: process.env.TMPDIR ?? tmpdir(),
    ANTHROPIC_BASE_URL: modelBaseUrl.replace(/\/+$/, "").replace(/\/v1$/, ""),
    ANTHROPIC_API_KEY: "sk-ant-scripted-model-server",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    ...env,
  };
  const child = spawn(claudeBinary(), argv, {
    cwd: workDir,
    env: childEnv,
    // Its own process group, so a timeout ends the Bash commands and MCP servers it started too.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }, timeoutMs);
  const { code, signal } = await new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal }));
  }).finally(() => clearTimeout(timer));
  rmSync(home, { recursive: true, force: true });
  return { code, signal, timedOut, stdout, stderr, json: parse(stdout, outputFormat), cwd: workDir };
}

function parse(stdout, outputFormat) {
  try {
    if (outputFormat === "stream-json") {
      return stdout.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    }
    return JSON.parse(stdout);
  } catch {
    return null;
  }
}
