// A connected agent written with the official TypeScript MCP SDK (@modelcontextprotocol/sdk's
// Client), run by crates/companion/tests/agents_clients.rs against the companion, which plays the
// user on the other side. Usage:
//
//   node ts-client.mjs <plan> http <url>          Streamable HTTP, token in FEISHU_COMPANION_TOKEN
//   node ts-client.mjs <plan> stdio <cmd> [args]  the stdio relay, started by the SDK's transport
//
// Plans (the Rust test decides each held call as the plan expects, in this order):
//   full   lists the tools, then asks request_approval (approved), approve with a Bash command
//          (approved with the command edited to EDITED), approve with another (rejected with
//          REASON); each call must hear progress while it waits.
//   leave  asks request_approval and exits the process at the first progress notification, so
//          the call is left waiting with nobody to answer.
//
// Prints one JSON report on stdout ({server, tools, calls: [{tool, answer, progress}]}) and exits
// non-zero, after printing what it found, on any mismatch, so both sides can fail.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** What the Rust test edits the second command to, and the reason it rejects the third with. */
const EDITED = "npm test -- --ci";
const REASON = "not on a Friday";

const [plan, kind, target, ...rest] = process.argv.slice(2);
const token = process.env.FEISHU_COMPANION_TOKEN ?? "";

function transport() {
  if (kind === "http") {
    return new StreamableHTTPClientTransport(new URL(target), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  }
  if (kind === "stdio") {
    // The relay reads the token from its environment, as a client's configuration gives it.
    return new StdioClientTransport({
      command: target,
      args: rest,
      env: { FEISHU_COMPANION_TOKEN: token },
      stderr: "inherit",
    });
  }
  throw new Error(`unknown transport ${kind}: http <url> or stdio <command> [args]`);
}

const problems = [];
const report = { server: null, tools: [], calls: [] };
const expect = (ok, what) => ok || problems.push(what);

/** Calls `tool` and records its answer (the first text block, parsed) and the progress heard. */
async function call(client, tool, args, onProgress = () => {}) {
  const progress = [];
  const result = await client.callTool({ name: tool, arguments: args }, undefined, {
    onprogress: (p) => {
      progress.push(p.message ?? "");
      onProgress(p);
    },
    // A held call waits for the user: each report restarts the SDK's 60 s request timeout.
    resetTimeoutOnProgress: true,
  });
  const text = result.content?.[0]?.type === "text" ? result.content[0].text : "";
  let answer;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = text;
  }
  const entry = { tool, answer, isError: result.isError === true, progress };
  report.calls.push(entry);
  expect(progress.length > 0, `${tool}: no progress notification while it waited`);
  expect(
    progress.some((m) => /approval/i.test(m)),
    `${tool}: no progress said it waits for approval: ${JSON.stringify(progress)}`,
  );
  return entry;
}

async function full(client) {
  const { tools } = await client.listTools();
  report.tools = tools.map((t) => t.name);
  for (const name of ["approve", "request_approval"]) {
    expect(report.tools.includes(name), `tools/list lacks ${name}`);
  }
  const approve = tools.find((t) => t.name === "approve");
  expect(approve?.inputSchema?.required?.includes("tool_name"), "approve's schema does not require tool_name");

  const yes = await call(client, "request_approval", { summary: "Publish the release notes" });
  expect(JSON.stringify(yes.answer) === JSON.stringify({ approved: true }), `request_approval answered ${JSON.stringify(yes.answer)}`);

  const edited = await call(client, "approve", {
    tool_name: "Bash",
    input: { command: "npm test", description: "Run the tests" },
    tool_use_id: "toolu_ts_1",
  });
  const wanted = { behavior: "allow", updatedInput: { command: EDITED, description: "Run the tests" } };
  expect(JSON.stringify(edited.answer) === JSON.stringify(wanted), `the edited approval answered ${JSON.stringify(edited.answer)}`);

  const no = await call(client, "approve", { tool_name: "Bash", input: { command: "rm -rf build" } });
  expect(no.answer?.behavior === "deny", `the rejection answered ${JSON.stringify(no.answer)}`);
  expect(String(no.answer?.message).includes(REASON), `the rejection's message lacks the reason: ${JSON.stringify(no.answer)}`);
}

async function leave(client) {
  // Exits (abruptly, as a killed agent would) once the companion says the call is held.
  await call(client, "request_approval", { summary: "Force-push the branch" }, () => {
    process.stdout.write(`${JSON.stringify({ left: true })}\n`, () => process.exit(0));
  });
  problems.push("the held call answered before the client left");
}

const client = new Client({ name: "ts-client", version: "1.0.0" });
try {
  await client.connect(transport());
  report.server = client.getServerVersion() ?? null;
  expect(report.server?.name === "feishu-companion", `the server calls itself ${JSON.stringify(report.server)}`);
  if (plan === "full") await full(client);
  else if (plan === "leave") await leave(client);
  else throw new Error(`unknown plan ${plan}: full or leave`);
} catch (e) {
  problems.push(`failed: ${e?.stack ?? e}`);
} finally {
  await client.close().catch(() => {});
}
report.problems = problems;
process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(problems.length ? 1 : 0));
