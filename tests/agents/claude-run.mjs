// Runs the real Claude Code CLI once through claude.mjs's runClaude, for a test in another
// language (crates/companion/tests/agents_clients.rs): `node claude-run.mjs SPEC.json`, where the
// file holds runClaude's options ({prompt, mcpConfig, permissionTool, modelBaseUrl, cwd, env,
// timeoutMs}). Prints one JSON line on stdout: {code, signal, timedOut, result, stderr, stdout}
// (result: Claude's own JSON result document, or null) and exits 0 once Claude ran, whatever it
// did; the caller judges.
import { readFileSync } from "node:fs";

import { runClaude } from "./claude.mjs";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const run = await runClaude(spec);
const out = {
  code: run.code,
  signal: run.signal,
  timedOut: run.timedOut,
  result: run.json,
  stderr: run.stderr,
  stdout: run.json ? "" : run.stdout,
};
process.stdout.write(`${JSON.stringify(out)}\n`);
